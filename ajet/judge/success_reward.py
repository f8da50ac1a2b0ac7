"""`judge.reward: success`: train on the episode's success (1 or 0) instead of the judge's total.

A judge's total often gives partial credit (a parsed call, a right tool name, the answer format), and
GRPO then also pushes towards near-misses: the advantage of a nearly right call over a wrong one can
outweigh that of the right call over a nearly right one. `SuccessReward` wraps the judge the config
names, so every path that builds the judge (rollout, eval, demos, the swift reward plugin) sees the
same 0/1 reward. The judge's own total is kept as `parts["judge_total"]`, so the reports still show it.
"""

from __future__ import annotations

from ajet.judge.base import Judge, Reward, checked_reward, success_of
from ajet.workflow import Task, WorkflowOutput

JUDGE_TOTAL_PART = "judge_total"


class SuccessReward(Judge):
    """Wraps `inner`: each reward's total becomes 1.0 when the episode succeeds, else 0.0.

    Success is decided as the rollout decides it (`success_of`), at `inner`'s success threshold. A reward the
    runner would refuse (not a number, NaN, too large) is passed through unchanged, so that it is reported as
    the judge's error, not hidden as a 0.
    """

    def __init__(self, inner: Judge) -> None:
        super().__init__()
        self.inner = inner
        self.scores_groups = inner.scores_groups
        self.success_threshold = inner.success_threshold

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        return self._binary(await self.inner.score(task, output), output)

    async def score_group(self, task: Task, outputs: list[WorkflowOutput]) -> list[Reward]:
        rewards = await self.inner.score_group(task, outputs)
        if not isinstance(rewards, (list, tuple)) or len(rewards) != len(outputs):
            return rewards  # the runner reports the mismatch
        return [self._binary(reward, output) for reward, output in zip(rewards, outputs)]

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _binary(self, value: object, output: WorkflowOutput) -> Reward:
        reward, error = checked_reward(value, "the judge returned")
        if reward is None or error is not None:
            return value  # type: ignore[return-value]
        success = success_of(reward, self.success_threshold, output.is_success)
        parts = {**reward.parts, JUDGE_TOTAL_PART: reward.total}
        return reward.model_copy(update={"total": float(success), "parts": parts, "is_success": success})
