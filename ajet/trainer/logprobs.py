"""Per-token log-probabilities of a batch, with the vocabulary projection only where the loss needs it.

A causal LM's output head maps every hidden state to a vocabulary-sized row of logits. For an agent
sample most positions are prompt, tool output or padding, whose logits the loss never reads; for a
small model with a large vocabulary (SmolLM2: hidden 576, vocab 49152) the head is a large share of
the compute and its (B, T, V) logits dominate memory. `token_logprobs` therefore runs the decoder
once, gathers the hidden states at the positions that predict a trained token, and applies the head
to those rows only. `full_token_logprobs` is the plain computation, kept as the reference the tests
compare against.

Both work on a transformers `*ForCausalLM` (tied embeddings included: the head module is whatever
`get_output_embeddings()` returns) and on a peft-wrapped one (LoRA layers are injected into the
decoder's modules, so calling the inner decoder keeps them, and `disable_adapter()` still applies).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ajet.algorithm.losses import token_entropy
from ajet.trainer.policy import unwrap_causal_lm

if TYPE_CHECKING:
    from ajet.trainer.trunk import TrunkCache

MIN_SHARED_PREFIX = 64  # shorter shared prefixes run with every row: one more decoder call is not worth it


def _decoder_and_head(model: nn.Module) -> tuple[nn.Module, nn.Module, float | None]:
    lm = unwrap_causal_lm(model)
    decoder = lm.get_decoder() if hasattr(lm, "get_decoder") else getattr(lm, "model", None)
    head = lm.get_output_embeddings()
    if decoder is None or head is None:
        raise TypeError(f"{type(lm).__name__} has no decoder / output head; is it a *ForCausalLM model?")
    softcap = getattr(lm.config, "final_logit_softcapping", None)  # Gemma-style tanh capping of logits
    return decoder, head, softcap


def _checkpointing(decoder: nn.Module) -> bool:
    """Under gradient checkpointing transformers turns the KV cache off, and the recomputation in backward
    would append to a shared cache a second time: every row then runs whole."""
    return decoder.training and getattr(decoder, "gradient_checkpointing", False)


def _targets(loss_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, cols) of positions whose token is trained; position 0 has no prediction."""
    wanted = loss_mask.bool().clone()  # (B, T)
    wanted[:, 0] = False
    return wanted.nonzero(as_tuple=True)


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """Length of the token prefix every row of a right-padded batch shares. (B, T) -> int"""
    if input_ids.shape[0] < 2:
        return 0
    shortest = int(attention_mask.sum(dim=1).min())
    return _agreeing_prefix(input_ids, input_ids[0], shortest)


def _agreeing_prefix(input_ids: torch.Tensor, reference: torch.Tensor, n: int) -> int:
    """How many of the first n tokens every row of input_ids (B, T) shares with `reference` (T',).
    n must not reach into any row's padding."""
    same = (input_ids[:, :n] == reference[:n]).all(dim=0)  # (n,)
    differs = (~same).nonzero()
    return int(differs[0]) if differs.numel() else n


class PrefixPass:
    """The decoder's pass over a prefix every row of a mini-batch shares, run once for all its micro-batches.

    `_hidden_states` runs a prefix the rows of one micro-batch share once per micro-batch; when a
    token budget splits a step into several micro-batches (`trainer.micro_batch_tokens`), the system
    prompt and tools would still run once per micro-batch. This pass runs them once per mini-batch:
    micro-batches read its keys, values and hidden states through detached copies, so each
    micro-batch's backward stops there and leaves its gradient on them, and `backward()` then sends
    the summed gradient through the one pass. The parameters get the gradient of running the prefix
    with every micro-batch (up to float summation order) at the cost of one pass (run forward twice when
    `checkpointed`: its activations then live only inside `backward()`, not beside the micro-batches').
    Call `backward()` after the last micro-batch's backward and before the optimizer step.
    """

    def __init__(self, model: nn.Module, prefix_ids: torch.Tensor, *, checkpointed: bool = True):
        """model: the policy (a `*ForCausalLM`, peft-wrapped or not); prefix_ids: (P,) the shared tokens.
        checkpointed: keep only the pass's outputs and recompute its activations in `backward()` (one more
        forward over the prefix); False keeps them through the micro-batches (faster, more memory)."""
        self.decoder = _decoder_and_head(model)[0]
        if _checkpointing(self.decoder):
            raise ValueError("a PrefixPass cannot run under gradient checkpointing "
                             "(transformers turns the KV cache off)")
        self.length = int(prefix_ids.shape[0])
        self._template: Any = None

        def run(ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
            out = self.decoder(input_ids=ids.unsqueeze(0), use_cache=True)  # (1, P)
            if self._template is None:  # the first run's cache; the recomputation in backward() makes its own
                self._template = out.past_key_values
            ran = [(layer.keys, layer.values) for layer in out.past_key_values.layers if layer.keys is not None]
            return (out.last_hidden_state, *(t for pair in ran for t in pair))

        # Checkpointed, the pass holds only its outputs while the micro-batches run and recomputes its
        # activations (about 1 MB a token for SmolLM2-135M) in backward(), once theirs are freed, with the
        # same random state and autocast.
        outputs = checkpoint(run, prefix_ids, use_reentrant=False) if checkpointed else run(prefix_ids)
        self._outputs = list(outputs)  # the graph's ends
        self._leaves = [t.detach().requires_grad_(t.requires_grad) for t in self._outputs]

    @classmethod
    def shared_by(cls, model: nn.Module, input_ids: list[torch.Tensor], lengths: list[list[int]],
                  min_shared_prefix: int = MIN_SHARED_PREFIX, *, checkpointed: bool = True) -> PrefixPass | None:
        """The pass over the prefix all rows of these micro-batches share, or None when it is shorter than
        `min_shared_prefix` or the model runs under gradient checkpointing."""
        shared = common_prefix_length(input_ids, lengths)
        if shared < max(min_shared_prefix, 1) or _checkpointing(_decoder_and_head(model)[0]):
            return None
        return cls(model, input_ids[0][0, :shared], checkpointed=checkpointed)

    @property
    def hidden(self) -> torch.Tensor:
        """(1, P, H) last hidden states of the prefix."""
        return self._leaves[0]

    def cache(self) -> Any:
        """A fresh one-row KV cache that holds the prefix; filling it leaves this pass's untouched."""
        cache = copy.copy(self._template)
        cache.layers = [copy.copy(layer) for layer in self._template.layers]
        kv = iter(self._leaves[1:])
        for layer in cache.layers:
            if layer.keys is not None:
                layer.keys, layer.values = next(kv), next(kv)
        return cache

    def backward(self) -> None:
        """Backpropagate the gradients the micro-batches left on the prefix's outputs, then free the pass."""
        ends = [(out, leaf.grad) for out, leaf in zip(self._outputs, self._leaves)
                if out.requires_grad and leaf.grad is not None]
        if ends:
            torch.autograd.backward([out for out, _ in ends], [grad for _, grad in ends])
        self._outputs, self._leaves, self._template = [], [], None


def common_prefix_length(input_ids: list[torch.Tensor], lengths: list[list[int]]) -> int:
    """Length of the prefix every row of several right-padded batches shares, leaving each row at least
    one token of its own. input_ids: (B_i, T_i) each; lengths: the real length of each row."""
    n = min(min(row) for row in lengths) - 1  # no padding before the shortest row's end
    for ids in input_ids:
        if n <= 0:
            return 0
        n = _agreeing_prefix(ids, input_ids[0][0], n)
    return n


def _hidden_states(decoder: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   min_shared_prefix: int, *, embeds: torch.Tensor | None = None,
                   new_cache: Callable[[], Any] | None = None, prefix: PrefixPass | None = None) -> torch.Tensor:
    """Last hidden states (B, T, H). When the rows share a prefix of at least `min_shared_prefix`
    tokens (the system prompt and tools of an agent; the prompt of a GRPO group), the prefix is run
    once and its KV cache broadcast to every row; gradients from all rows flow back into that one
    pass, so the result and its gradient equal the plain computation.

    embeds: (B, T, H) inputs in place of the ids' embeddings (the top of a split decoder, trunk.py); the ids
    still tell which prefix the rows share. new_cache: the KV cache the prefix pass fills (default: the
    decoder's own). prefix: the pass over the first `prefix.length` tokens, which every row shares, run
    once for the mini-batch (`PrefixPass`); only the rest runs here."""
    checkpointing = _checkpointing(decoder)
    if prefix is not None and (checkpointing or embeds is not None or prefix.decoder is not decoder):
        raise ValueError("a PrefixPass serves only the decoder that ran it, whole and without checkpointing")
    length = input_ids.shape[1]
    start = prefix.length if prefix is not None else 0
    shared = shared_prefix_length(input_ids, attention_mask) if min_shared_prefix > 0 and not checkpointing else 0
    # the rows' own common part beyond `start` runs once when it is worth a decoder call
    split = shared if shared - start >= max(min_shared_prefix, 1) and shared < length else start

    def inputs(rows: slice, cols: slice) -> dict[str, torch.Tensor]:
        return {"inputs_embeds": embeds[rows, cols]} if embeds is not None else {"input_ids": input_ids[rows, cols]}

    def positions(first: int, last: int, rows: int) -> torch.Tensor:
        return torch.arange(first, last, device=input_ids.device).unsqueeze(0).expand(rows, -1)

    everything = slice(None)
    if split == 0:
        out = decoder(**inputs(everything, everything), attention_mask=attention_mask, use_cache=False)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    rows = input_ids.shape[0]
    cache = prefix.cache() if prefix is not None else (new_cache() if new_cache else None)
    heads = [prefix.hidden] if prefix is not None else []  # (1, ., H) each
    if split > start:
        common = decoder(**inputs(slice(0, 1), slice(start, split)), position_ids=positions(start, split, 1),
                         past_key_values=cache, use_cache=True)
        cache = common.past_key_values
        heads.append(common.last_hidden_state)
    for layer in cache.layers:  # (1, heads, P, d) -> (B, heads, P, d), a view: no copy
        if layer.keys is None:  # a layer this (partial) decoder does not run
            continue
        layer.keys = layer.keys.expand(rows, -1, -1, -1)
        layer.values = layer.values.expand(rows, -1, -1, -1)
    rest = decoder(**inputs(everything, slice(split, None)), attention_mask=attention_mask,
                   position_ids=positions(split, length, rows), past_key_values=cache, use_cache=True)
    return torch.cat([h.expand(rows, -1, -1) for h in heads] + [rest.last_hidden_state], dim=1)  # (B, T, H)


@dataclass
class TokenOutputs:
    """What one forward pass gives the RL losses. All (B, T) float32."""

    logprobs: torch.Tensor  # log p of each trained token, 0.0 elsewhere
    entropy: torch.Tensor | None = None  # entropy of the distribution each trained token was drawn from
    values: torch.Tensor | None = None  # the value head at every position (PPO's critic)


def token_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    min_shared_prefix: int = MIN_SHARED_PREFIX,
    trunk: TrunkCache | None = None,
    prefix: PrefixPass | None = None,
) -> torch.Tensor:
    """log p(input_ids[b, t] | input_ids[b, :t]) at trained positions, 0.0 elsewhere. (B, T) float32.

    input_ids, attention_mask, loss_mask: (B, T), right-padded. Differentiable w.r.t. the model.
    min_shared_prefix: run a prefix all rows share only once when it is at least this long (0: never).
    trunk: the frozen trunk's outputs of earlier passes (ajet.trainer.trunk), reused for rows seen before;
    the result is the same.
    prefix: the mini-batch's shared prefix, already run (`PrefixPass`); not with `trunk`.
    """
    return token_outputs(model, input_ids, attention_mask, loss_mask, min_shared_prefix=min_shared_prefix,
                         trunk=trunk, prefix=prefix).logprobs


def token_outputs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    entropy: bool = False,
    value_head: nn.Module | None = None,
    min_shared_prefix: int = MIN_SHARED_PREFIX,
    trunk: TrunkCache | None = None,
    prefix: PrefixPass | None = None,
) -> TokenOutputs:
    """`token_logprobs`, and from the same pass the entropy at trained positions (`entropy=True`) and the
    value head's output at every position (`value_head`: a module mapping (..., H) to (..., 1))."""
    decoder, head, softcap = _decoder_and_head(model)
    if trunk is not None and prefix is not None:
        raise ValueError("token_logprobs takes a trunk cache or a prefix pass, not both")
    if trunk is not None and not trunk.checked:
        trunk.check(input_ids, attention_mask, min_shared_prefix, _hidden_states)
    if trunk is not None and trunk.usable and trunk.decoder is decoder:
        hidden = trunk.hidden_states(input_ids, attention_mask, min_shared_prefix, _hidden_states)  # (B, T, H)
    else:
        hidden = _hidden_states(decoder, input_ids, attention_mask, min_shared_prefix, prefix=prefix)  # (B, T, H)
    rows, cols = _targets(loss_mask)  # (N,), (N,)
    h = hidden[rows, cols - 1]  # (N, H): the state at t-1 predicts the token at t
    logits = head(h).float()  # (N, V), float32 for a stable log-softmax under bf16
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    targets = input_ids[rows, cols]  # (N,)
    all_lp = logits.log_softmax(dim=-1)  # (N, V)
    lp = all_lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (N,)
    zeros = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)  # (B, T)
    out = TokenOutputs(zeros.index_put((rows, cols), lp))
    if entropy:
        out.entropy = zeros.index_put((rows, cols), token_entropy(all_lp))  # (B, T)
    if value_head is not None:
        out.values = value_head(hidden).squeeze(-1).float()  # (B, T)
    return out


def full_token_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
) -> torch.Tensor:
    """The same as `token_logprobs`, computing logits at every position (reference, slower). (B, T)"""
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits.float()  # (B, T, V)
    lp = logits[:, :-1].log_softmax(dim=-1).gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # (B, T-1)
    lp = torch.cat([torch.zeros_like(lp[:, :1]), lp], dim=1)  # (B, T): position 0 has none
    mask = loss_mask.bool().clone()
    mask[:, 0] = False
    return torch.where(mask, lp, torch.zeros_like(lp))


def sequence_logprobs(token_lp: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Sum of trained-token logprobs per row (DPO's log pi(completion | prompt)). (B, T) -> (B,)"""
    return (token_lp * loss_mask.to(token_lp.dtype)).sum(dim=1)
