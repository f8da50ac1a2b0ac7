"""The judge protocol: score one episode (or rank a whole group) and return a `Reward`."""

from __future__ import annotations

import abc
from typing import Any

from ajet.reward import Reward
from ajet.workflow import Task, WorkflowOutput

__all__ = ["Judge", "Reward"]


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
