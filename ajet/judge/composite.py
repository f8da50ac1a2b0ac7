"""`composite`: a weighted sum of other judges plus penalties (seed 002's reward model).

    total = clip( sum_i weight_i * part_i.total  +  sum of the triggered penalties )

Penalties are fixed numbers (<= 0) added once when their trigger fires:

    format_error    the gateway failed to parse a tool call (metadata ajet.tool_call_parse_failures > 0)
                    or a reported call has malformed arguments
    timeout         the episode timed out (metadata ajet.timed_out)
    redundant_call  the same call (name and arguments) was made twice
    wrong_tool      a call to a tool that is not among the expected calls (only when the task has them)
    no_answer       the final answer is empty
    tool_error      a tool call failed or returned an error-shaped result ({"error": ...}, "Error: ...",
                    empty; ajet.tool_results)
"""

from __future__ import annotations

import asyncio
import difflib
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ajet.errors import JudgeError
from ajet.judge.base import Judge, Reward
from ajet.judge.function_call import expected_calls, parse_failures, predicted_calls
from ajet.judge.registry import build_judge, current_base_dir, current_where, parse_args
from ajet.tool_results import record_error
from ajet.workflow import Task, WorkflowOutput


def _format_error(task: Task, output: WorkflowOutput, expected_key: str) -> bool:
    return parse_failures(output) > 0 or predicted_calls(output)[1] > 0


def _timeout(task: Task, output: WorkflowOutput, expected_key: str) -> bool:
    return bool((output.metadata.get("ajet") or {}).get("timed_out"))


def _redundant_call(task: Task, output: WorkflowOutput, expected_key: str) -> bool:
    seen = set()
    for call in predicted_calls(output)[0]:
        key = (call.name, json.dumps(call.arguments, sort_keys=True, default=str))
        if key in seen:
            return True
        seen.add(key)
    return False


def _wrong_tool(task: Task, output: WorkflowOutput, expected_key: str) -> bool:
    try:
        expected = expected_calls(task, expected_key)
    except Exception:  # a malformed reference is the function_call part's problem, not a penalty
        return False
    if not expected:
        return False
    names = {call.name for call in expected}
    return any(call.name not in names for call in predicted_calls(output)[0])


def _no_answer(task: Task, output: WorkflowOutput, expected_key: str) -> bool:
    answer = output.answer
    return answer is None or (isinstance(answer, str) and not answer.strip())


def _tool_error(task: Task, output: WorkflowOutput, expected_key: str) -> bool:
    return any(record_error(record) is not None for record in output.tool_calls)


PENALTY_TRIGGERS: dict[str, Callable[[Task, WorkflowOutput, str], bool]] = {
    "format_error": _format_error,
    "timeout": _timeout,
    "redundant_call": _redundant_call,
    "wrong_tool": _wrong_tool,
    "no_answer": _no_answer,
    "tool_error": _tool_error,
}


def check_penalties(value: dict[str, float]) -> dict[str, float]:
    """Penalty names must be known triggers and amounts <= 0 (shared by the judges that take penalties)."""
    for name, amount in value.items():
        if name not in PENALTY_TRIGGERS:
            close = difflib.get_close_matches(name, list(PENALTY_TRIGGERS), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown penalty {name!r}{hint} (known: {', '.join(PENALTY_TRIGGERS)})")
        if amount > 0:
            raise ValueError(f"penalty {name!r} is {amount}; penalties are added, write {-amount} to subtract")
    return value


def penalty_parts(penalties: dict[str, float], task: Task, output: WorkflowOutput, expected_key: str) -> dict[str, float]:
    """`penalty.<name>`: its amount when its trigger fires for this episode, else 0.0."""
    return {f"penalty.{name}": amount if PENALTY_TRIGGERS[name](task, output, expected_key) else 0.0
            for name, amount in penalties.items()}


class PartSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Name of the part in the reward's parts.")
    judge: dict[str, Any] = Field(description="A judge config: {type: ..., args: {...}}.")
    weight: float = Field(1.0, description="Multiplier of this part's total.")


class CompositeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    parts: list[PartSpec] = Field(min_length=1, description="Weighted judges.")
    penalties: dict[str, float] = Field(
        default_factory=dict, description="Penalty name -> value (<= 0) added when triggered."
    )
    clip: tuple[float, float] | None = Field(None, description="[lo, hi] bounds of the total.")
    expected_key: str = Field("calls", description="task.answer[expected_key] holds the expected calls (wrong_tool).")

    @field_validator("penalties")
    @classmethod
    def _known_penalties(cls, value: dict[str, float]) -> dict[str, float]:
        return check_penalties(value)

    @model_validator(mode="after")
    def _rules(self) -> CompositeArgs:
        names = [part.name for part in self.parts]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"part names must be unique; repeated: {duplicates}")
        clash = [n for n in names if n.startswith("penalty.")]
        if clash:
            raise ValueError(f"part names may not start with 'penalty.': {clash}")
        if self.clip is not None and self.clip[0] > self.clip[1]:
            raise ValueError(f"clip {list(self.clip)} has lo > hi")
        return self


class CompositeJudge(Judge):
    """Weighted parts plus penalties. parts: each part's total (`<name>`), its own parts
    (`<name>.<part>`), and every configured penalty (`penalty.<name>`: its value when triggered, else 0)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = parse_args(CompositeArgs, kwargs, "composite")
        where, base_dir = current_where(), current_base_dir()
        self.judges: list[Judge] = []
        for i, part in enumerate(self.args.parts):
            self.judges.append(build_judge(part.judge, base_dir, where=f"{where}.args.parts[{i}].judge"))
        # A ranking sub-judge needs the whole group, so the composite does too.
        self.scores_groups = any(judge.scores_groups for judge in self.judges)

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        rewards = await asyncio.gather(*(judge.score(task, output) for judge in self.judges))
        return self._combine(task, output, list(rewards))

    async def score_group(self, task: Task, outputs: list[WorkflowOutput]) -> list[Reward]:
        per_judge = await asyncio.gather(*(judge.score_group(task, outputs) for judge in self.judges))
        for judge, rewards in zip(self.judges, per_judge):
            if len(rewards) != len(outputs):
                raise JudgeError(
                    f"{type(judge).__name__}.score_group returned {len(rewards)} rewards for {len(outputs)} episodes"
                )
        return [
            self._combine(task, output, [rewards[i] for rewards in per_judge]) for i, output in enumerate(outputs)
        ]

    async def aclose(self) -> None:
        for judge in self.judges:
            await judge.aclose()

    def _combine(self, task: Task, output: WorkflowOutput, rewards: list[Reward]) -> Reward:
        parts: dict[str, float] = {}
        total = 0.0
        for spec, reward in zip(self.args.parts, rewards):
            total += spec.weight * reward.total
            parts[spec.name] = reward.total
            for key, value in reward.parts.items():
                parts[f"{spec.name}.{key}"] = value
        penalties = penalty_parts(self.args.penalties, task, output, self.args.expected_key)
        parts.update(penalties)
        total += sum(penalties.values())
        if self.args.clip is not None:
            total = min(max(total, self.args.clip[0]), self.args.clip[1])
        feedback = "; ".join(f"{spec.name}: {r.feedback}" for spec, r in zip(self.args.parts, rewards) if r.feedback)
        return Reward(total=total, parts=parts, feedback=feedback or None)
