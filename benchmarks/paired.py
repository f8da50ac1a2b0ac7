"""The paired statistics of rl_gain.py: RL's gain over SFT on the same held-out tasks, with a bootstrap interval.

Per task t (held out, evaluated once for SFT alone and once per RL training seed s):

    d_t = mean_s(y_rl[s, t]) - y_sft[t]          the paired difference, the seeds averaged first

The gain is the mean of d_t. Its 95% interval is a percentile bootstrap over tasks: resample the tasks
with replacement, take the mean of their d_t, 10,000 times, keep the 2.5th and 97.5th percentiles.
Tasks that share a cluster (werewolves: the same seating played several times) are resampled together,
as a cluster, so correlated tasks do not narrow the interval. Seeded: the same numbers give the same
interval.

Where the two arms were not scored task by task on the same run (only their counts were kept, or they ran
on different tasks), `unpaired_interval` resamples each arm on its own: wider than the paired interval,
since nothing cancels the tasks' own difficulty. From the command line, on success counts:

    python benchmarks/paired.py 3/25 18/25     # before, after: difference=+60.0 ci=[+36.0, +80.0] (points)
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass
class Gain:
    tasks: int
    clusters: int
    sft: float  # mean over tasks
    rl: list[float]  # mean over tasks, per seed
    mean: float  # mean of d_t
    low: float
    high: float
    per_seed: list[float]  # mean of y_rl[s, t] - y_sft[t], per seed

    @property
    def significant(self) -> bool:
        """Whether the interval's lower end is above 0 (the task counts as one RL improved)."""
        return self.low > 0


def paired_differences(sft: Mapping[str, float], rl: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """d_t for every task that SFT and every seed measured (a task missing anywhere is left out)."""
    common = [t for t in sft if all(t in seed for seed in rl)]
    return {t: sum(seed[t] for seed in rl) / len(rl) - sft[t] for t in common}


def bootstrap_interval(diffs: Mapping[str, float], clusters: Mapping[str, str] | None = None, *,
                       resamples: int = 10_000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `diffs`, resampling clusters (default: each task alone)."""
    if not diffs:
        raise ValueError("no paired task to bootstrap")
    groups: dict[str, list[float]] = {}
    for task, d in diffs.items():
        groups.setdefault((clusters or {}).get(task, task), []).append(d)
    sums = [(sum(v), len(v)) for v in groups.values()]
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        picked = [sums[rng.randrange(len(sums))] for _ in sums]
        means.append(sum(s for s, _ in picked) / sum(n for _, n in picked))
    means.sort()
    tail = (1 - level) / 2
    return _quantile(means, tail), _quantile(means, 1 - tail)


def gain(sft: Mapping[str, float], rl: Sequence[Mapping[str, float]], clusters: Mapping[str, str] | None = None,
         **bootstrap) -> Gain:
    """The paired gain of RL over SFT, its interval, and the per-seed gains."""
    if not rl:
        raise ValueError("no RL seed to compare with SFT")
    diffs = paired_differences(sft, rl)
    low, high = bootstrap_interval(diffs, clusters, **bootstrap)
    tasks = list(diffs)
    return Gain(
        tasks=len(tasks), clusters=len({(clusters or {}).get(t, t) for t in tasks}),
        sft=_mean(sft[t] for t in tasks), rl=[_mean(seed[t] for t in tasks) for seed in rl],
        mean=_mean(diffs.values()), low=low, high=high,
        per_seed=[_mean(seed[t] - sft[t] for t in tasks) for seed in rl],
    )


def unpaired_interval(before: Sequence[float], after: Sequence[float], *, resamples: int = 10_000,
                      level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(mean(after) - mean(before), low, high): each arm resampled alone, a percentile bootstrap interval."""
    if not before or not after:
        raise ValueError("an arm with no score to bootstrap")
    rng = random.Random(seed)
    differences = []
    for _ in range(resamples):
        differences.append(_mean(rng.choice(after) for _ in after) - _mean(rng.choice(before) for _ in before))
    differences.sort()
    tail = (1 - level) / 2
    return _mean(after) - _mean(before), _quantile(differences, tail), _quantile(differences, 1 - tail)


def _outcomes(counts: str) -> list[float]:
    """'3/25' -> three 1.0 and twenty-two 0.0."""
    successes, _, total = counts.partition("/")
    try:
        k, n = int(successes), int(total)
    except ValueError:
        k, n = -1, 0
    if not 0 <= k <= n or n == 0:
        raise argparse.ArgumentTypeError(f"{counts!r}: want successes/total with 0 <= successes <= total > 0")
    return [1.0] * k + [0.0] * (n - k)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Unpaired bootstrap interval of a difference in success rates.")
    parser.add_argument("before", type=_outcomes, help="successes/total of the first arm, e.g. 3/25")
    parser.add_argument("after", type=_outcomes, help="successes/total of the second arm, e.g. 18/25")
    args = parser.parse_args(argv)
    difference, low, high = unpaired_interval(args.before, args.after)
    print(f"difference={100 * difference:+.1f} ci=[{100 * low:+.1f}, {100 * high:+.1f}] (points)")


def _mean(values) -> float:
    values = list(values)
    return math.fsum(values) / len(values) if values else 0.0


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    position = q * (len(sorted_values) - 1)
    lo = math.floor(position)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (position - lo)


if __name__ == "__main__":
    main()
