"""The training losses as pure tensor functions: GRPO (clipped ratio + k3 KL), SFT, DPO (sigmoid, IPO, SimPO).

No model lives here: callers pass per-token log-probabilities (see `ajet.trainer.logprobs`) and
masks, so every formula can be checked on hand-built tensors (tests/unit/test_losses.py).

Shapes: `B` rows (samples), `T` token positions. Per-token tensors are `(B, T)`; `mask` is 1.0 where
a token is trained. Positions outside the mask may hold anything (they are multiplied by 0 before
any sum, and `torch.where` keeps NaN/inf out of the gradient).

Micro-batching: `normalizer` lets a caller split one mini-batch into several micro-batches and
accumulate gradients so that the sum of the micro-batch losses equals the loss of the whole
mini-batch. With `agg='token'` pass the mini-batch's total number of trained tokens; with
`agg='sequence'` its number of trained rows. Left as None, the loss is the mean over these tensors.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

LossAgg = Literal["token", "sequence"]


def _aggregate(per_token: torch.Tensor, mask: torch.Tensor, agg: LossAgg, normalizer: float | None) -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar: token mean, or mean of per-row token means."""
    mask = mask.to(per_token.dtype)
    per_token = torch.where(mask > 0, per_token, torch.zeros_like(per_token))  # (B, T)
    if agg == "token":
        total = per_token.sum()
        if normalizer is not None:
            return total / max(float(normalizer), 1.0)
        return total / mask.sum().clamp_min(1.0)
    if agg == "sequence":
        row_tokens = mask.sum(dim=1)  # (B,)
        row_mean = per_token.sum(dim=1) / row_tokens.clamp_min(1.0)  # (B,)
        if normalizer is not None:
            return row_mean.sum() / max(float(normalizer), 1.0)
        return row_mean.sum() / (row_tokens > 0).to(per_token.dtype).sum().clamp_min(1.0)
    raise ValueError(f"loss aggregation must be 'token' or 'sequence', got {agg!r}")


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    mask = mask.to(torch.float32)
    n = mask.sum()
    if n.item() == 0:
        return 0.0
    values = torch.where(mask > 0, values.detach().to(torch.float32), torch.zeros_like(mask))
    return float(values.sum() / n)


def token_entropy(log_probs: torch.Tensor) -> torch.Tensor:
    """Entropy of each row of a log-softmax: -sum_v p_v log p_v. (..., V) -> (...)"""
    return -(log_probs.exp() * log_probs).sum(dim=-1)


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || ref): exp(ref - logp) - (ref - logp) - 1, always >= 0. (B, T)"""
    delta = ref_logprobs - logprobs  # (B, T)
    return torch.exp(delta) - delta - 1.0


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    epsilon: float,
    epsilon_high: float | None = None,
    ref_logprobs: torch.Tensor | None = None,
    beta: float = 0.0,
    agg: LossAgg = "token",
    normalizer: float | None = None,
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped-ratio policy-gradient loss of GRPO (PPO's surrogate with group-relative advantages).

    logprobs:      (B, T) log p_theta(token) from the model being trained (carries the gradient)
    old_logprobs:  (B, T) log p of the same tokens under the policy that sampled them (the engine)
    advantages:    (B,)   one advantage per sample, broadcast over its tokens (or (B, T) per token)
    mask:          (B, T) 1.0 where the token is trained
    ref_logprobs:  (B, T) log p under the frozen reference; needed when beta > 0
    entropy:       (B, T) entropy of the policy's next-token distribution (differentiable); needed when
                   entropy_coef > 0

    per-token loss = -min(r * A, clip(r, 1 - epsilon, 1 + epsilon_high) * A) + beta * KL_k3 - entropy_coef * H
    with r = exp(logprobs - old_logprobs). Returns (loss, stats); stats are plain floats over the
    masked tokens: clip_fraction (tokens where the clip was the active term), clip_low / clip_high,
    ratio_mean, ratio_max, kl (k3 mean, when a reference is given), entropy (when given), adv_mean, tokens.
    """
    eps_high = epsilon if epsilon_high is None else epsilon_high
    if beta > 0 and ref_logprobs is None:
        raise ValueError("grpo_loss: beta > 0 needs ref_logprobs (the frozen reference's logprobs)")
    if entropy_coef > 0 and entropy is None:
        raise ValueError("grpo_loss: entropy_coef > 0 needs the per-token entropy")
    mask = mask.to(logprobs.dtype)
    adv = advantages.to(logprobs.dtype)
    if adv.dim() == 1:
        adv = adv.unsqueeze(1)  # (B, 1) broadcasts over T
    # Outside the mask the log-ratio may be garbage (padding); zero it so exp() stays finite.
    log_ratio = torch.where(mask > 0, logprobs - old_logprobs, torch.zeros_like(logprobs))  # (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    clipped = torch.clamp(ratio, 1.0 - epsilon, 1.0 + eps_high)  # (B, T)
    surrogate = torch.minimum(ratio * adv, clipped * adv)  # (B, T)
    per_token = -surrogate
    stats: dict[str, float] = {}
    if ref_logprobs is not None:
        ref_safe = torch.where(mask > 0, ref_logprobs, logprobs.detach())
        kl = kl_k3(logprobs, ref_safe)  # (B, T)
        if beta > 0:
            per_token = per_token + beta * kl
        stats["kl"] = _masked_mean(kl, mask)
    if entropy is not None:
        if entropy_coef > 0:  # a bonus: higher entropy lowers the loss, so sampling stays exploratory
            per_token = per_token - entropy_coef * torch.where(mask > 0, entropy, torch.zeros_like(entropy))
        stats["entropy"] = _masked_mean(entropy, mask)
    loss = _aggregate(per_token, mask, agg, normalizer)

    with torch.no_grad():
        adv_full = adv.expand_as(ratio)
        clip_low = ((ratio < 1.0 - epsilon) & (adv_full < 0)).to(torch.float32)
        clip_high = ((ratio > 1.0 + eps_high) & (adv_full > 0)).to(torch.float32)
        masked_ratio = torch.where(mask > 0, ratio.detach(), torch.zeros_like(ratio))
        stats.update(
            clip_fraction=_masked_mean(clip_low + clip_high, mask),
            clip_low=_masked_mean(clip_low, mask),
            clip_high=_masked_mean(clip_high, mask),
            ratio_mean=_masked_mean(ratio, mask),
            ratio_max=float(masked_ratio.max()) if mask.sum() > 0 else 0.0,
            adv_mean=_masked_mean(adv_full, mask),
            tokens=float(mask.sum()),
        )
    return loss, stats


def sft_loss(
    logprobs_or_logits: torch.Tensor,
    mask: torch.Tensor,
    targets: torch.Tensor | None = None,
    *,
    normalizer: float | None = None,
) -> torch.Tensor:
    """Masked token cross-entropy, the mean over trained tokens.

    Either pass per-token log-probabilities (B, T) of the target tokens (what
    `ajet.trainer.logprobs.token_logprobs` returns) and no `targets`, or raw logits (B, T, V) with
    `targets` (B, T): the class index per position (already aligned, i.e. logits[:, t] predicts
    targets[:, t]). mask: (B, T). `normalizer` replaces the token count (for micro-batching).
    """
    if targets is not None:
        if logprobs_or_logits.dim() != 3:
            raise ValueError("sft_loss: with targets, pass logits of shape (B, T, V)")
        logp = F.log_softmax(logprobs_or_logits.float(), dim=-1)  # (B, T, V)
        token_logp = logp.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)  # (B, T)
    else:
        if logprobs_or_logits.dim() != 2:
            raise ValueError("sft_loss: without targets, pass per-token logprobs of shape (B, T)")
        token_logp = logprobs_or_logits
    return _aggregate(-token_logp, mask, "token", normalizer)


DpoLossType = Literal["sigmoid", "ipo", "simpo"]


def dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor | None,
    ref_rejected_logps: torch.Tensor | None,
    beta: float,
    label_smoothing: float = 0.0,
    *,
    loss_type: DpoLossType = "sigmoid",
    chosen_tokens: torch.Tensor | None = None,
    rejected_tokens: torch.Tensor | None = None,
    simpo_gamma: float = 0.5,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Preference losses over P pairs: sigmoid DPO (Rafailov et al., with cDPO label smoothing), IPO
    (Azar et al.) and SimPO (Meng et al.).

    Inputs are (P,) SUMMED log-probabilities of the completion tokens. `ref_*` None means
    reference-free: the reference log-ratio is taken as 0 (no reference pass is needed).
    `chosen_tokens` / `rejected_tokens` (P,) count the completion tokens; IPO and SimPO need them,
    because both compare per-token mean log-probabilities (so a longer answer is not favoured).

    sigmoid: z = beta * ((pi_c - ref_c) - (pi_r - ref_r));  loss = -(1-ls) log s(z) - ls log s(-z)
    ipo:     h = (pi_c - ref_c)/n_c - (pi_r - ref_r)/n_r;  loss = (h - 1 / (2 beta))^2
    simpo:   z = beta * (pi_c/n_c - pi_r/n_r) - gamma;    loss = -(1-ls) log s(z) - ls log s(-z)
             (never uses a reference, whatever is passed)
    The mean over pairs is returned. stats: reward_chosen / reward_rejected (beta times the
    log-ratio each loss compares, means), reward_margin (mean of their difference), reward_accuracy
    (fraction of pairs whose chosen reward is higher).
    """
    if loss_type not in ("sigmoid", "ipo", "simpo"):
        raise ValueError(f"dpo loss_type must be sigmoid, ipo or simpo, got {loss_type!r}")
    chosen = policy_chosen_logps
    rejected = policy_rejected_logps
    if loss_type != "simpo":
        if ref_chosen_logps is not None:
            chosen = chosen - ref_chosen_logps
        if ref_rejected_logps is not None:
            rejected = rejected - ref_rejected_logps
    if loss_type in ("ipo", "simpo"):
        if chosen_tokens is None or rejected_tokens is None:
            raise ValueError(f"dpo loss_type {loss_type!r} needs chosen_tokens and rejected_tokens")
        chosen = chosen / chosen_tokens.to(chosen.dtype).clamp_min(1.0)  # (P,)
        rejected = rejected / rejected_tokens.to(rejected.dtype).clamp_min(1.0)  # (P,)
    chosen_reward = beta * chosen  # (P,)
    rejected_reward = beta * rejected  # (P,)
    if loss_type == "ipo":
        losses = (chosen - rejected - 1.0 / (2.0 * beta)) ** 2
        z = chosen_reward - rejected_reward
    else:
        z = chosen_reward - rejected_reward - (simpo_gamma if loss_type == "simpo" else 0.0)  # (P,)
        losses = -(1.0 - label_smoothing) * F.logsigmoid(z) - label_smoothing * F.logsigmoid(-z)
    loss = losses.mean()
    with torch.no_grad():
        margin = chosen_reward - rejected_reward
        stats = {
            "reward_chosen": float(chosen_reward.mean()),
            "reward_rejected": float(rejected_reward.mean()),
            "reward_margin": float(margin.mean()),
            "reward_accuracy": float((margin > 0).float().mean()),
        }
    return loss, stats
