"""How the swift GRPO plugin scores a batch (kept apart from plugin.py, which imports swift, so it is
tested without it): the same checks as the debug backbone's rollout (`ajet.judge.base.checked_reward`).

A reward the workflow set itself, or one the judge returned, that is not a finite number within
±MAX_ABS_REWARD (NaN, inf, 1e308, "0.5", True) is a judge failure: that episode gets no reward and its
error is recorded, as in `ajet/rollout/runner.py`, never passed to swift to make the group's advantages
NaN. An episode without a reward is then filled with its group's mean (`neutral_fill`).
"""

from __future__ import annotations

from typing import Any

from ajet.judge.base import Reward, checked_reward
from ajet.workflow import Task, WorkflowOutput


def neutral_fill(rewards: list[Reward | None], groups: list[list[int]]) -> list[float]:
    """Rewards for swift: an episode without one (failed, or its judge raised) gets the mean of its group's
    scored episodes, so its advantage is 0 and the others' advantages are what they would be without it
    (swift would count a missing reward as 0 in the group mean)."""
    out = [r.total if r is not None else 0.0 for r in rewards]
    for members in groups:
        scored = [out[i] for i in members if rewards[i] is not None]
        fill = sum(scored) / len(scored) if scored else 0.0
        for i in members:
            if rewards[i] is None:
                out[i] = fill
    return out


async def score_group(judge: Any, infos: list[dict], members: list[int], rewards: list, errors: list) -> None:
    """Score the episodes `members` of one group into `rewards` (a Reward, or None with `errors[i]` set)."""
    scorable = []
    for i in members:
        info = infos[i]
        if info.get("error") or info.get("output") is None:
            continue
        output = WorkflowOutput.model_validate(info["output"])
        if output.reward is not None:  # the workflow scored itself
            rewards[i], errors[i] = checked_reward(output.reward, "the workflow set WorkflowOutput.reward")
        else:
            scorable.append((i, output))
    if not scorable:
        return
    task = Task.model_validate_json(infos[scorable[0][0]]["task"])
    try:
        if judge.scores_groups:
            scored = await judge.score_group(task, [o for _, o in scorable])
            if len(scored) != len(scorable):
                raise ValueError(f"score_group returned {len(scored)} rewards for {len(scorable)} episodes")
        else:
            scored = [await judge.score(task, o) for _, o in scorable]
    except Exception as exc:  # a judge bug must not stop training: those episodes get no reward
        for i, _ in scorable:
            errors[i] = f"{type(exc).__name__}: {exc}"
        return
    for (i, _), reward in zip(scorable, scored):
        rewards[i], errors[i] = checked_reward(reward, "the judge returned")
