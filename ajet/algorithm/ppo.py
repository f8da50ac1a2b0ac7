"""PPO with a critic: the value loss and the per-sample targets (advantages, returns) from GAE.

The policy loss is GRPO's clipped surrogate (`ajet.algorithm.losses.grpo_loss`) with these
advantages in place of group-relative ones; the critic is a value head on the policy
(`ajet.trainer.value`) read at the last token before each turn. Per sample with turns k = 0..K-1
(`ajet.samples.trained_spans`), whose spans start at s_k:

    value position  p_k = s_k - 1                       (the hidden state that predicts the turn's first token)
    reward          r_k = w * turn_reward_k + [k = K-1] * R     (R: the episode's reward; w: grpo.turn_reward_weight)
    A_k, G_k        = gae(r, V_old, gamma, lam)            (`ajet.algorithm.gae`)
    token advantage A_k on the tokens of span k; optionally whitened over the batch's turns

Value loss (clipped as in PPO's reference implementations, OpenAI baselines ppo2):

    L_V = 0.5 * max((V - G)^2, (V_old + clip(V - V_old, -c, c) - G)^2)     averaged over value positions

with c = `ppo.value_clip` (None: the unclipped term alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ajet.algorithm.advantages import mean_std
from ajet.algorithm.gae import gae
from ajet.algorithm.turns import spread
from ajet.samples import trained_spans


@dataclass
class PpoTargets:
    """One sample's training targets, each a list over its tokens."""

    advantages: list[float]  # A_k on the tokens of turn k, 0 elsewhere
    returns: list[float]  # G_k at value position p_k, 0 elsewhere
    old_values: list[float]  # V_old at p_k, 0 elsewhere
    value_mask: list[float]  # 1.0 at each p_k
    turn_advantages: list[float]  # A_k, one per turn (before whitening)


def turn_reward_vector(turns: int, reward: float, turn_rewards: Sequence[float] | None,
                       weight: float) -> list[float]:
    """r_k: the episode's reward on the last turn, plus weight x the judge's per-turn rewards when given."""
    out = [weight * float(r) for r in turn_rewards] if turn_rewards is not None and weight else [0.0] * turns
    if len(out) != turns:
        raise ValueError(f"{len(out)} turn rewards for {turns} turns")
    if turns:
        out[-1] += float(reward)
    return out


def ppo_targets(loss_mask: Sequence[int | float], rewards: Sequence[float], values: Sequence[float],
                gamma: float, lam: float) -> PpoTargets:
    """Targets of one sample from its per-turn rewards and its per-token values (the critic's output at
    every position, before the update)."""
    spans = trained_spans(loss_mask)
    if len(rewards) != len(spans):
        raise ValueError(f"{len(rewards)} turn rewards for {len(spans)} trained spans")
    if spans and spans[0][0] == 0:
        raise ValueError("a trained span starts at position 0: it has no state before it to value")
    positions = [start - 1 for start, _ in spans]
    old = [float(values[p]) for p in positions]
    advantages, returns = gae(rewards, old, gamma, lam)
    n = len(loss_mask)
    returns_row, old_row, mask_row = [0.0] * n, [0.0] * n, [0.0] * n
    for p, g, v in zip(positions, returns, old):
        returns_row[p], old_row[p], mask_row[p] = g, v, 1.0
    return PpoTargets(spread(loss_mask, advantages), returns_row, old_row, mask_row, advantages)


def whiten(targets: list[PpoTargets], loss_masks: Sequence[Sequence[int | float]], eps: float = 1e-6) -> None:
    """Normalise the token advantages of a batch to mean 0 and std 1 over all its turns (each turn counted
    once, whatever its length), in place."""
    pooled = [a for t in targets for a in t.turn_advantages]
    if len(pooled) < 2:
        return
    mean, std = mean_std(pooled)
    for t, mask in zip(targets, loss_masks):
        t.advantages = spread(mask, [(a - mean) / (std + eps) for a in t.turn_advantages])


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip: float | None = 0.2,
    normalizer: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped value loss above over the positions where `mask` is 1. All inputs (B, T); `values`
    carries the gradient. normalizer: the mini-batch's number of value positions (micro-batching);
    None: those in these tensors. stats: value_loss, value_clip_fraction (positions where the clipped
    term was the larger), value_mean, return_mean, value_error (mean |V - G|)."""
    mask = mask.to(values.dtype)
    values32 = values.float()
    unclipped = (values32 - returns) ** 2  # (B, T)
    if clip is not None:
        clipped_v = old_values + torch.clamp(values32 - old_values, -clip, clip)  # (B, T)
        clipped = (clipped_v - returns) ** 2
        per = 0.5 * torch.maximum(unclipped, clipped)
    else:
        clipped = unclipped
        per = 0.5 * unclipped
    per = torch.where(mask > 0, per, torch.zeros_like(per))
    count = float(normalizer) if normalizer is not None else float(mask.sum())
    loss = per.sum() / max(count, 1.0)
    with torch.no_grad():
        n = mask.sum().clamp_min(1.0)
        stats = {
            "value_loss": float(per.sum() / n),
            "value_clip_fraction": float(((clipped > unclipped).float() * mask).sum() / n),
            "value_mean": float((values32.detach() * mask).sum() / n),
            "return_mean": float((returns * mask).sum() / n),
            "value_error": float(((values32.detach() - returns).abs() * mask).sum() / n),
            "value_positions": float(mask.sum()),
        }
    return loss, stats
