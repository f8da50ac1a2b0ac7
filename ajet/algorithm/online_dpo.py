"""Online DPO: preference pairs made from a rollout batch (no preference file).

The episodes of one task form a group. From each group whose rewards differ, the best episode
gives the chosen sample and the worst the rejected one; a group whose rewards are all equal says
nothing about which answer is better and gives no pair. Episodes that failed or were not scored
(no reward, no samples) take no part. Ties are broken by order: the first episode with the top
(bottom) reward is chosen (rejected). From an episode with several samples (a workflow whose calls
did not merge) the one with the most trained tokens stands for it.

Pure over its inputs: anything with `group_id`, `reward` (`.total`) and `samples` will do, so the
rule is tested on hand-built episodes (tests/unit/test_online_dpo.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from ajet.samples import Sample

Pair = tuple[Sample, Sample]  # (chosen, rejected)


class _Reward(Protocol):
    total: float


class ScoredEpisode(Protocol):
    group_id: str
    reward: _Reward | None
    samples: Sequence[Sample]


def online_pairs(episodes: Iterable[ScoredEpisode]) -> list[Pair]:
    """One (chosen, rejected) pair per group whose best reward beats its worst, in group order."""
    groups: dict[str, list[ScoredEpisode]] = {}
    for episode in episodes:
        if episode.reward is not None and episode.samples:
            groups.setdefault(episode.group_id, []).append(episode)
    pairs = []
    for members in groups.values():
        best = max(members, key=lambda e: e.reward.total)  # max/min keep the first of equals
        worst = min(members, key=lambda e: e.reward.total)
        if best.reward.total > worst.reward.total:
            pairs.append((_longest(best.samples), _longest(worst.samples)))
    return pairs


def _longest(samples: Sequence[Sample]) -> Sample:
    return max(samples, key=lambda s: s.num_trained_tokens)
