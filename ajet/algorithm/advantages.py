"""Group-relative advantages for GRPO.

Each sample's advantage is its reward minus a baseline from its group (the episodes of one task),
divided by the group's standard deviation when `scale` is on (Dr. GRPO turns scaling off). The
baseline is the group's mean (GRPO), or the mean of the group's other members (`leave_one_out`,
RLOO), which leaves the sample's own reward out of its baseline: R_i - mean_{j != i} R_j, which is
n / (n - 1) times R_i - mean. A group
whose rewards are all equal carries no learning signal: its samples get advantage 0 and the group
is counted in the stats so the caller can skip them instead of spending compute on a zero gradient.
A group with a single sample is treated the same way (there is nothing to compare it with).

Each group is computed on its own, so one bad group never costs the others: a group holding a
non-finite reward (which the rollout already refuses) gets advantage 0 and is counted in
`nonfinite_groups`. Mean and std are taken on rewards divided by the group's largest magnitude, so
finite but huge rewards (1e308 and -1e308) cannot overflow into inf or NaN.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal


@dataclass
class AdvantageStats:
    """What `group_advantages` saw. `skip` lists sample indices with no signal (advantage 0)."""

    groups: int = 0
    zero_variance_groups: int = 0
    singleton_groups: int = 0
    nonfinite_groups: int = 0  # a reward or an advantage was NaN or inf: the group is skipped
    informative_groups: int = 0
    skip: list[int] = field(default_factory=list)
    reward_mean: float = 0.0
    reward_std: float = 0.0
    advantage_abs_mean: float = 0.0

    def to_dict(self) -> dict[str, float]:
        """Numeric stats for logging (the skip list becomes its length)."""
        data = asdict(self)
        data["skipped_samples"] = len(data.pop("skip"))
        return {k: float(v) for k, v in data.items()}


Baseline = Literal["mean", "leave_one_out"]


def group_advantages(
    rewards: Sequence[float],
    group_ids: Sequence[str],
    scale: bool = True,
    eps: float = 1e-6,
    baseline: Baseline = "mean",
) -> tuple[list[float], AdvantageStats]:
    """Group-normalised advantages: (r - b) / (std_g + eps) with scale, else r - b, where the baseline
    b is mean_g (`baseline="mean"`) or the mean of the other members of the group ("leave_one_out").

    std is the population standard deviation of the group (divide by n), the same statistic the
    mean is taken over. A group is zero-variance when its std is <= eps: every member gets exactly
    0.0 and its indices go to `stats.skip`; singleton groups likewise.
    """
    if baseline not in ("mean", "leave_one_out"):
        raise ValueError(f"baseline must be 'mean' or 'leave_one_out', got {baseline!r}")
    if len(rewards) != len(group_ids):
        raise ValueError(f"group_advantages: {len(rewards)} rewards but {len(group_ids)} group ids")
    members: dict[str, list[int]] = defaultdict(list)
    for i, gid in enumerate(group_ids):
        members[gid].append(i)

    advantages = [0.0] * len(rewards)
    stats = AdvantageStats(groups=len(members))
    for idx in members.values():
        values = [float(rewards[i]) for i in idx]
        if len(values) == 1:
            stats.singleton_groups += 1
            stats.skip.extend(idx)
            continue
        if not all(math.isfinite(v) for v in values):
            stats.nonfinite_groups += 1
            stats.skip.extend(idx)
            continue
        mean, std = mean_std(values)
        if std <= eps:
            stats.zero_variance_groups += 1
            stats.skip.extend(idx)
            continue
        # leave-one-out: v - (n * mean - v) / (n - 1) = (v - mean) * n / (n - 1)
        loo = len(values) / (len(values) - 1) if baseline == "leave_one_out" else 1.0
        group = [(v - mean) * loo / (std + eps) if scale else (v - mean) * loo for v in values]
        if not all(math.isfinite(a) for a in group):  # unscaled 1e308 - (-1e308): inf
            stats.nonfinite_groups += 1
            stats.skip.extend(idx)
            continue
        stats.informative_groups += 1
        for i, a in zip(idx, group):
            advantages[i] = a

    stats.skip.sort()
    finite = [float(r) for r in rewards if math.isfinite(float(r))]
    if finite:
        stats.reward_mean, stats.reward_std = mean_std(finite)
    if advantages:
        stats.advantage_abs_mean = mean_std([abs(a) for a in advantages])[0]
    return advantages, stats


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population std of finite `values`, without overflow: both are computed on the values
    divided by their largest magnitude, then scaled back (1e308 and -1e308: mean 0, std 1e308)."""
    if not values:
        return 0.0, 0.0
    top = max(abs(v) for v in values) or 1.0
    scaled = [v / top for v in values]
    mean = math.fsum(scaled) / len(scaled)
    var = math.fsum((s - mean) ** 2 for s in scaled) / len(scaled)
    return mean * top, math.sqrt(var) * top
