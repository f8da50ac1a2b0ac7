"""The judge protocol: score one episode (or rank a whole group) and return a `Reward`."""

from __future__ import annotations

import abc
import math
import numbers
from typing import Any

from ajet.reward import Reward
from ajet.workflow import Task, WorkflowOutput

__all__ = ["MAX_ABS_REWARD", "Judge", "Reward", "checked_reward", "success_of"]

# Rewards beyond this magnitude are judge failures. Real rewards are O(1) (success 0/1, a score, a
# penalty); 1e6 leaves room for any sensible scale while keeping the group mean and std far from overflow.
MAX_ABS_REWARD = 1e6


class Judge(abc.ABC):
    """Subclass and implement `score`. Judges are built once per run with the YAML's keyword arguments."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    @abc.abstractmethod
    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        """Score one episode."""

    async def score_group(self, task: Task, outputs: list[WorkflowOutput]) -> list[Reward]:
        """Score the episodes of one task together. Default: each on its own. Ranking judges override."""
        return [await self.score(task, output) for output in outputs]

    async def aclose(self) -> None:
        """Release what the judge holds (HTTP clients, ...). The rollout calls it once at the end of a run."""

    #: True when `score_group` must see the whole group (rollout then waits for the group to finish).
    scores_groups: bool = False

    #: An episode whose reward has `is_success=None` succeeds when `total >= success_threshold`.
    #: `ajet.judge.build_judge` sets it from `judge.success_threshold` in the config.
    success_threshold: float = 1.0


def checked_reward(value: object, source: str) -> tuple[Reward | None, str | None]:
    """(reward, None) for a usable reward; (None, judge error) otherwise. A reward is a real number (an
    int, a float or a numpy scalar; not a bool or a string such as "0.5") or an `ajet.Reward`, finite and within
    ±MAX_ABS_REWARD in its total and every part: a NaN, inf or 1e308 reward would make the group's
    advantages, the loss and then every weight NaN, so it is a judge failure."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Reward)):
        return None, (f"InvalidReward: {source} {str(value)[:80]!r} ({type(value).__name__}), not a number or "
                      "ajet.Reward; return a float (a bool or a string is not a reward)")
    try:
        reward = Reward.of(value)
    except Exception as exc:  # an int too large for a float
        return None, f"InvalidReward: {source} {str(value)[:80]!r}, not a number or ajet.Reward ({type(exc).__name__})"
    values = {"total": reward.total, **reward.parts,
              **{f"turn_rewards[{i}]": v for i, v in enumerate(reward.turn_rewards or [])}}
    bad = {name: v for name, v in values.items() if not math.isfinite(v)}
    if bad:
        return None, f"NonFiniteReward: {source} a non-finite reward {bad}; rewards must be finite numbers"
    huge = {name: v for name, v in values.items() if abs(v) > MAX_ABS_REWARD}
    if huge:
        return None, (f"RewardOutOfRange: {source} {huge}; rewards must lie within ±{MAX_ABS_REWARD:g} "
                      "(larger ones overflow the group statistics); scale the reward down")
    return reward, None


def success_of(reward: Reward, threshold: float, workflow_verdict: bool | None = None) -> bool:
    """Whether an episode succeeded, by one rule everywhere: the reward's `is_success`, else the workflow's
    verdict (`WorkflowOutput.is_success`), else `reward.total >= threshold` (`judge.success_threshold`)."""
    if reward.is_success is not None:
        return reward.is_success
    if workflow_verdict is not None:
        return workflow_verdict
    return reward.total >= threshold
