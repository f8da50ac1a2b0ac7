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

import torch
from torch import nn

from ajet.trainer.policy import unwrap_causal_lm


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


def token_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
) -> torch.Tensor:
    """log p(input_ids[b, t] | input_ids[b, :t]) at trained positions, 0.0 elsewhere. (B, T) float32.

    input_ids, attention_mask, loss_mask: (B, T), right-padded. Differentiable w.r.t. the model.
    """
    decoder, head, softcap = _decoder_and_head(model)
    out = decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]  # (B, T, H)
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
