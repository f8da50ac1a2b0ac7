"""Turn-level credit: a multi-turn sample's turns advantaged apart, when the judge scores each turn.

A linear multi-turn episode becomes one sample whose loss mask holds one trained span per LLM call
(`ajet.tracker.merge`): the runs of 1s, in call order. With one reward per episode every turn gets
the episode's advantage, the turn that went wrong as much as the turns that went right. A judge that
can tell them apart returns `Reward.turn_rewards` (one per trained LLM call; the tool-reference
judge knows which call was wrong), the rollout hands them to the sample (`Sample.turn_rewards`, one
per span), and each turn k of sample i gets

    A_ik = A_i + w * (r_ik - mean_g) / (std_g + eps)      scale on (grpo.scale_rewards)
    A_ik = A_i + w * (r_ik - mean_g)                      scale off

A_i: the sample's outcome advantage (`group_advantages`); w: `grpo.turn_reward_weight`; mean_g and
std_g (population) over every turn reward of the group's samples, pooled: episodes of one task may
take different numbers of turns, so turn k of one episode has no counterpart in another. A group
whose turn rewards are all equal adds nothing; a sample without turn rewards keeps A_i on every turn.

Pure over lists, tested on hand-made samples (tests/unit/test_turn_credit.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ajet.algorithm.advantages import mean_std
from ajet.samples import trained_spans


def turn_advantages(
    outcome: Sequence[float],
    turn_rewards: Sequence[Sequence[float] | None],
    group_ids: Sequence[str],
    weight: float,
    scale: bool = True,
    eps: float = 1e-6,
) -> list[list[float] | None]:
    """Per sample, one advantage per turn (A_ik above), or None for a sample without turn rewards."""
    if not len(outcome) == len(turn_rewards) == len(group_ids):
        raise ValueError(f"turn_advantages: {len(outcome)} advantages, {len(turn_rewards)} turn reward lists, "
                         f"{len(group_ids)} group ids")
    pooled: dict[str, list[float]] = defaultdict(list)
    for rewards, gid in zip(turn_rewards, group_ids):
        pooled[gid].extend(float(r) for r in rewards or [])
    stats = {gid: mean_std(values) for gid, values in pooled.items()}
    out: list[list[float] | None] = []
    for adv, rewards, gid in zip(outcome, turn_rewards, group_ids):
        if rewards is None:
            out.append(None)
            continue
        mean, std = stats[gid]
        if std <= eps:  # every turn of the group scored alike: nothing to tell the turns apart
            out.append([float(adv)] * len(rewards))
            continue
        out.append([float(adv) + weight * ((r - mean) / (std + eps) if scale else r - mean) for r in rewards])
    return out


def spread(loss_mask: Sequence[int | float], per_turn: Sequence[float]) -> list[float]:
    """One value per token: turn k's value on the tokens of span k, 0.0 elsewhere. Raises ValueError when
    the sample has not exactly one span per value (a call that generated nothing, calls that abut)."""
    spans = trained_spans(loss_mask)
    if len(spans) != len(per_turn):
        raise ValueError(f"{len(per_turn)} turn values for {len(spans)} trained spans")
    out = [0.0] * len(loss_mask)
    for (start, end), value in zip(spans, per_turn):
        out[start:end] = [float(value)] * (end - start)
    return out
