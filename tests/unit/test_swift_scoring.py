"""The swift GRPO plugin's scoring (ajet/backbone/swift/scoring.py) applies the checks of the debug
backbone's rollout (`checked_reward`): a NaN, 1e308, "0.5" or True reward, from the judge or set by the
workflow, is a judge failure with its reason, never a number swift turns into NaN advantages; the episode
then gets its group's mean (advantage 0)."""

from __future__ import annotations

import math

from ajet import Judge, Task, WorkflowOutput
from ajet.backbone.swift.scoring import neutral_fill, score_group


class ByAnswer(Judge):
    """Scores what the answer names: a real judge whose bugs are chosen by the test."""

    async def score(self, task, output):
        return {"nan": float("nan"), "huge": 1e308, "text": "0.5", "bool": True}.get(output.answer, 1.0)


def _info(answer: str, reward: float | None = None) -> dict:
    task = Task(task_id="t", query="q")
    return {"task": task.model_dump_json(), "output": WorkflowOutput(answer=answer, reward=reward).model_dump()}


async def test_bad_rewards_are_judge_failures_and_get_the_group_mean():
    infos = [_info("good"), _info("nan"), _info("huge"), _info("text"), _info("bool"), _info("self", float("inf")),
             {"error": "TimeoutError: ..."}]
    rewards, errors = [None] * len(infos), [None] * len(infos)
    await score_group(ByAnswer(), infos, list(range(len(infos))), rewards, errors)
    assert rewards[0].total == 1.0 and errors[0] is None
    assert [e.split(":")[0] if e else None for e in errors] == [
        None, "NonFiniteReward", "RewardOutOfRange", "InvalidReward", "InvalidReward", "NonFiniteReward", None]
    assert "the workflow set WorkflowOutput.reward" in errors[5] and rewards[6] is None
    filled = neutral_fill(rewards, [list(range(len(infos)))])
    assert filled == [1.0] * len(infos) and all(math.isfinite(x) for x in filled)
