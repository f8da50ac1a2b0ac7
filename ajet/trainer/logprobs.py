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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

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
    same = (input_ids[:, :shortest] == input_ids[:1, :shortest]).all(dim=0)  # (shortest,)
    differs = (~same).nonzero()
    return int(differs[0]) if differs.numel() else shortest


def _hidden_states(decoder: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   min_shared_prefix: int, *, embeds: torch.Tensor | None = None,
                   new_cache: Callable[[], Any] | None = None) -> torch.Tensor:
    """Last hidden states (B, T, H). When the rows share a prefix of at least `min_shared_prefix`
    tokens (the system prompt and tools of an agent; the prompt of a GRPO group), the prefix is run
    once and its KV cache broadcast to every row; gradients from all rows flow back into that one
    pass, so the result and its gradient equal the plain computation.

    embeds: (B, T, H) inputs in place of the ids' embeddings (the top of a split decoder, trunk.py); the ids
    still tell which prefix the rows share. new_cache: the KV cache the prefix pass fills (default: the
    decoder's own)."""
    # Under gradient checkpointing transformers turns the KV cache off, and the recomputation in
    # backward would append to a shared cache a second time: every row then runs whole.
    checkpointing = decoder.training and getattr(decoder, "gradient_checkpointing", False)
    shared = shared_prefix_length(input_ids, attention_mask) if min_shared_prefix > 0 and not checkpointing else 0

    def inputs(rows: slice, cols: slice) -> dict[str, torch.Tensor]:
        return {"inputs_embeds": embeds[rows, cols]} if embeds is not None else {"input_ids": input_ids[rows, cols]}

    everything = slice(None)
    if checkpointing or min_shared_prefix <= 0 or shared < min_shared_prefix or shared >= input_ids.shape[1]:
        out = decoder(**inputs(everything, everything), attention_mask=attention_mask, use_cache=False)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    rows = input_ids.shape[0]
    prefix = decoder(**inputs(slice(0, 1), slice(0, shared)), use_cache=True,
                     past_key_values=new_cache() if new_cache else None)
    cache = prefix.past_key_values
    for layer in cache.layers:  # (1, heads, P, d) -> (B, heads, P, d), a view: no copy
        if layer.keys is None:  # a layer this (partial) decoder does not run
            continue
        layer.keys = layer.keys.expand(rows, -1, -1, -1)
        layer.values = layer.values.expand(rows, -1, -1, -1)
    positions = torch.arange(shared, input_ids.shape[1], device=input_ids.device).unsqueeze(0).expand(rows, -1)
    rest = decoder(**inputs(everything, slice(shared, None)), attention_mask=attention_mask, position_ids=positions,
                   past_key_values=cache, use_cache=True)
    head = prefix.last_hidden_state.expand(rows, -1, -1)  # (B, P, H)
    return torch.cat([head, rest.last_hidden_state], dim=1)  # (B, T, H)


def token_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    min_shared_prefix: int = MIN_SHARED_PREFIX,
    trunk: TrunkCache | None = None,
) -> torch.Tensor:
    """log p(input_ids[b, t] | input_ids[b, :t]) at trained positions, 0.0 elsewhere. (B, T) float32.

    input_ids, attention_mask, loss_mask: (B, T), right-padded. Differentiable w.r.t. the model.
    min_shared_prefix: run a prefix all rows share only once when it is at least this long (0: never).
    trunk: the frozen trunk's outputs of earlier passes (ajet.trainer.trunk), reused for rows seen before;
    the result is the same.
    """
    decoder, head, softcap = _decoder_and_head(model)
    if trunk is not None and not trunk.checked:
        trunk.check(input_ids, attention_mask, min_shared_prefix, _hidden_states)
    if trunk is not None and trunk.usable and trunk.decoder is decoder:
        hidden = trunk.hidden_states(input_ids, attention_mask, min_shared_prefix, _hidden_states)  # (B, T, H)
    else:
        hidden = _hidden_states(decoder, input_ids, attention_mask, min_shared_prefix)  # (B, T, H)
    rows, cols = _targets(loss_mask)  # (N,), (N,)
    h = hidden[rows, cols - 1]  # (N, H): the state at t-1 predicts the token at t
    logits = head(h).float()  # (N, V), float32 for a stable log-softmax under bf16
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    targets = input_ids[rows, cols]  # (N,)
    lp = logits.log_softmax(dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (N,)
    result = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)  # (B, T)
    return result.index_put((rows, cols), lp)


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
