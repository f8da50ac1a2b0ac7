"""What an RL step of the debug backbone trains on: the samples kept and their advantages (or PPO targets).

    grpo  group advantages (grpo.baseline, grpo.scale_rewards), plus turn-level credit when the judge
          scored turns (grpo.turn_reward_weight, `ajet.algorithm.turns`); samples whose every token has
          advantage 0 carry no gradient and are dropped
    ppo   the value head's V_old at each turn's start (`ajet.trainer.value.sample_values`), per-turn
          rewards, GAE (ppo.gamma, ppo.lam), whitened over the step's turns (`ajet.algorithm.ppo`);
          every sample trains (the critic learns from all of them)

Dynamic sampling (grpo.dynamic_sampling_rounds) counts the groups with a signal (`signal_groups`);
the loop that rolls out more tasks lives in `run.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ajet.algorithm.advantages import AdvantageStats, group_advantages
from ajet.algorithm.ppo import PpoTargets, ppo_targets, turn_reward_vector, whiten
from ajet.algorithm.turns import spread, turn_advantages
from ajet.config.schema import AjetConfig, GrpoConfig
from ajet.samples import Sample


@dataclass
class RlBatch:
    """The samples to train on (indices into the step's samples) and what each trains with."""

    kept: list[int]
    advantages: list[float | list[float]]  # grpo: one per kept sample, a number or one per token
    targets: list[PpoTargets] = field(default_factory=list)  # ppo: one per kept sample
    stats: AdvantageStats = field(default_factory=AdvantageStats)
    metrics: dict[str, float] = field(default_factory=dict)


def grpo_batch(samples: Sequence[Sample], grpo: GrpoConfig) -> RlBatch:
    """Group-relative advantages, with turn-level credit where samples carry turn rewards."""
    outcome, stats = group_advantages([s.reward for s in samples], [s.group_id for s in samples],
                                      scale=grpo.scale_rewards, baseline=grpo.baseline)
    advantages: list[float | list[float]] = list(outcome)
    turned = 0
    if grpo.turn_reward_weight > 0 and any(s.turn_rewards is not None for s in samples):
        per_turn = turn_advantages(outcome, [s.turn_rewards for s in samples], [s.group_id for s in samples],
                                   grpo.turn_reward_weight, scale=grpo.scale_rewards)
        for i, (s, turns) in enumerate(zip(samples, per_turn)):
            if turns is not None:  # build_samples gave turn rewards only to samples with one span per call
                advantages[i] = spread(s.loss_mask, turns)
                turned += 1
    kept = [i for i, a in enumerate(advantages) if (any(a) if isinstance(a, list) else a != 0.0)]
    metrics = {"turn_credit_samples": float(turned)} if grpo.turn_reward_weight > 0 else {}
    return RlBatch(kept, [advantages[i] for i in kept], stats=stats, metrics=metrics)


def signal_groups(samples: Sequence[Sample], grpo: GrpoConfig) -> set[str]:
    """The groups at least one of whose samples trains (a non-zero advantage somewhere)."""
    batch = grpo_batch(samples, grpo)
    return {samples[i].group_id for i in batch.kept}


def ppo_batch(samples: Sequence[Sample], values: Sequence[Sequence[float]], cfg: AjetConfig) -> RlBatch:
    """PPO's targets of every sample with a trained token, from its per-token values V_old."""
    kept, targets = [], []
    for i, (s, v) in enumerate(zip(samples, values)):
        spans = s.spans
        if not spans:
            continue
        rewards = turn_reward_vector(len(spans), s.reward, s.turn_rewards, cfg.grpo.turn_reward_weight)
        targets.append(ppo_targets(s.loss_mask, rewards, v, cfg.ppo.gamma, cfg.ppo.lam))
        kept.append(i)
    raw = [a for t in targets for a in t.turn_advantages]
    if cfg.ppo.normalize_advantages:
        whiten(targets, [samples[i].loss_mask for i in kept])
    metrics: dict[str, Any] = {"turns_trained": float(len(raw)),
                               "advantage_raw_mean": sum(raw) / len(raw) if raw else 0.0}
    return RlBatch(kept, [t.advantages for t in targets], targets=targets, metrics=metrics)
