"""`FrozenLakeAgent`: a multi-turn episode. Each turn the model reads the lake and answers with a
move; the environment's reply is the next user message. The episode's return (1.0 at the goal,
0 otherwise) is the reward: the workflow sets it itself, so no judge runs.

Every assistant message goes back unchanged, so the gateway splices the exact generated tokens and
the whole episode (up to `rollout.max_turns` calls) merges into ONE training sample
(docs/merging.md): training cost grows with the episode's length, not its square.

Workflow arguments (YAML `workflow_args`):
    max_turns: moves per episode when the tuner sets none (default 10).
    max_observation_chars: an observation longer than this is invalid (default 2000).
"""

from __future__ import annotations

from typing import Any

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from frozenlake import Lake, parse_action

DEFAULT_MAX_TURNS = 10
SYSTEM_PROMPT = (
    "You play FrozenLake. Walk from S to the goal G without stepping into a hole H. P marks you. "
    "Each turn reply with one move, up, down, left or right, as <action>down</action>."
)


class FrozenLakeAgent(Workflow):
    """Plays one map of the task (`metadata.map`) until the goal, a hole or the turn budget."""

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        max_turns = tuner.max_turns or int(self.kwargs.get("max_turns", DEFAULT_MAX_TURNS))
        lake = Lake(task.metadata["map"])
        return await play(tuner.openai_client(agent="player"), tuner.model, lake, max_turns,
                          int(self.kwargs.get("max_observation_chars", 2000)))


async def play(llm: openai.AsyncOpenAI, model: str, lake: Any, max_turns: int,
               max_observation_chars: int = 2000) -> WorkflowOutput:
    """One episode of `lake` (anything with `observation()` and `step(move)` like `Lake`)."""
    counts = {"turns": 0, "invalid_actions": 0, "bumps": 0, "invalid_observation": 0}
    events: list[str] = []
    observation = lake.observation()
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    reward, stop = 0.0, "max_turns"
    for _ in range(max_turns):
        problem = _invalid(observation, max_observation_chars)
        if problem:  # a broken environment ends the episode, counted; the run goes on
            counts["invalid_observation"] = 1
            stop = f"invalid_observation: {problem}"
            break
        messages.append({"role": "user", "content": observation})
        try:
            response = await llm.chat.completions.create(model=model, messages=messages)
        except openai.BadRequestError as exc:  # turn budget or prompt length: the episode ends here
            stop = f"llm_refused: {exc.message}"
            break
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))  # unchanged: exact tokens, one sample
        counts["turns"] += 1
        step = lake.step(parse_action(message.content))
        events.append(step.event)
        counts["invalid_actions"] += step.event == "invalid"
        counts["bumps"] += step.event == "bumped"
        observation = step.observation
        if step.done:
            messages.append({"role": "user", "content": step.observation})
            reward, stop = float(step.reward), step.event
            break
    return WorkflowOutput(
        answer=stop,
        reward=reward,
        is_success=reward >= 1.0,
        messages=messages,
        metadata={"stop_reason": stop, "events": events},
        metrics={**{k: float(v) for k, v in counts.items()}, "goal": float(stop == "goal"),
                 "hole": float(stop == "hole")},
    )


def _invalid(observation: Any, max_chars: int) -> str | None:
    if not isinstance(observation, str):
        return f"a {type(observation).__name__}, not text"
    if not observation.strip():
        return "empty"
    if len(observation) > max_chars:
        return f"{len(observation)} characters, over {max_chars}"
    return None
