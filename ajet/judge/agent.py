"""`agent`: seed 002's five-part agent reward with its penalties, and the agent metrics `ajet eval` reports.

    total = sum_k weight_k * part_k  +  the triggered penalties          (every part in [0, 1])

    task_completion    the `completion` judge's total (default: the final answer states
                       task.answer.final as a number)
    tool_accuracy      F1 of the set of tools called against the target tools (task.answer.target_tools,
                       else the names of the expected calls); a task with no target tool: 1.0 when no
                       tool was called, else 0.5
    efficiency         1.0 when the episode made at most the optimal number of calls
                       (task.answer.optimal_steps, else the number of expected calls), else
                       max(optimal, 1) / calls made
    timing_quality     1.0 when the episode called a tool if and only if the task needs one (it has
                       target tools): a tool when one is needed, a direct answer when not
    format_compliance  well-formed calls / calls attempted (parse failures and malformed arguments
                       count against it; 1.0 with no call), and 0.0 when the final answer is empty

Penalties (<= 0, each added once when it fires) are the `composite` judge's triggers: wrong_tool,
redundant_call, format_error, timeout. Success (`is_success`) is the completion judge's verdict:
end-to-end success, not a threshold on the weighted sum.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ajet.errors import JudgeError
from ajet.judge.base import Judge, Reward, success_of
from ajet.judge.composite import check_penalties, penalty_parts
from ajet.judge.function_call import expected_calls, parse_failures, predicted_calls
from ajet.judge.registry import build_judge, check_weights, current_base_dir, current_where, parse_args
from ajet.workflow import Task, WorkflowOutput

DEFAULT_WEIGHTS = {"task_completion": 0.4, "tool_accuracy": 0.25, "efficiency": 0.15, "timing_quality": 0.10,
                   "format_compliance": 0.10}
DEFAULT_PENALTIES = {"wrong_tool": -0.3, "redundant_call": -0.2, "format_error": -0.1, "timeout": -0.5}
AGENT_METRICS = ("tool_selection_accuracy", "plan_success_rate", "step_efficiency", "timing_precision",
                 "end_to_end_success")


class AgentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    weights: dict[str, float] = Field(default_factory=dict, description="Part weights; missing keys keep seed 002's.")
    penalties: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_PENALTIES),
                                        description="Penalty name -> value (<= 0); {} turns them all off.")
    completion: dict[str, Any] = Field(
        default_factory=lambda: {"type": "exact_match", "args": {"answer_key": "final", "mode": "number"}},
        description="The judge config that decides task completion.")
    expected_key: str = Field("calls", description="task.answer[expected_key] holds the expected calls.")

    @field_validator("weights")
    @classmethod
    def _known_parts(cls, value: dict[str, float]) -> dict[str, float]:
        return check_weights(value, DEFAULT_WEIGHTS, "part")

    @field_validator("penalties")
    @classmethod
    def _known_penalties(cls, value: dict[str, float]) -> dict[str, float]:
        return check_penalties(value)


class AgentReference(BaseModel):
    """What a task says about the right behaviour: the tools it needs and the fewest calls that do it."""

    target_tools: list[str]
    optimal_steps: int
    expected_names: list[str]  # the expected calls' names in order ([] when only target_tools is given)


def reference_of(task: Task, expected_key: str = "calls") -> AgentReference | None:
    """The task's agent reference, or None when it names neither target tools nor expected calls."""
    answer = task.answer if isinstance(task.answer, dict) else {}
    calls = expected_calls(task, expected_key)
    names = [call.name for call in calls] if calls is not None else []
    targets = answer.get("target_tools")
    if targets is None and calls is None:
        return None
    if targets is not None and not (isinstance(targets, list) and all(isinstance(t, str) for t in targets)):
        raise JudgeError(f"task {task.task_id!r}: answer.target_tools must be a list of tool names, got {targets!r}")
    optimal = answer.get("optimal_steps", len(names) if calls is not None else len(targets or []))
    if isinstance(optimal, bool) or not isinstance(optimal, int) or optimal < 0:
        raise JudgeError(f"task {task.task_id!r}: answer.optimal_steps must be an integer >= 0, got {optimal!r}")
    return AgentReference(target_tools=list(targets) if targets is not None else list(dict.fromkeys(names)),
                          optimal_steps=optimal, expected_names=names)


def tool_accuracy(called: list[str], targets: list[str]) -> float:
    """Seed 002's F1 of the tool sets; with no target tool, 1.0 for no call and 0.5 otherwise."""
    got, want = set(called), set(targets)
    if not want:
        return 1.0 if not got else 0.5
    correct = len(got & want)
    if not correct:
        return 0.0
    precision, recall = correct / len(got), correct / len(want)
    return 2 * precision * recall / (precision + recall)


def efficiency(calls_made: int, optimal: int) -> float:
    return 1.0 if calls_made <= optimal else max(optimal, 1) / calls_made


def timing_quality(called_any: bool, needs_tool: bool) -> float:
    return 1.0 if called_any == needs_tool else 0.0


def format_compliance(output: WorkflowOutput) -> float:
    calls, malformed = predicted_calls(output)
    attempts = len(calls) + malformed + parse_failures(output)
    well_formed = len(calls) / attempts if attempts else 1.0
    answer = output.answer
    empty = answer is None or (isinstance(answer, str) and not answer.strip())
    return 0.0 if empty else well_formed


def plan_success(called: list[str], ref: AgentReference) -> float:
    """1.0 when the expected calls' names occur in the episode's calls in order (other calls may sit
    between them); with target tools only, when every target tool was called."""
    if not ref.expected_names:
        return float(set(ref.target_tools) <= set(called))
    remaining = iter(called)
    return float(all(any(name == got for got in remaining) for name in ref.expected_names))


def agent_metrics(task: Task, output: WorkflowOutput, success: bool, expected_key: str = "calls") -> dict[str, float] | None:
    """Seed 002's evaluation metrics of one episode, or None when the task carries no reference."""
    ref = reference_of(task, expected_key)
    if ref is None:
        return None
    called = [call.name for call in predicted_calls(output)[0]]
    return {
        "tool_selection_accuracy": tool_accuracy(called, ref.target_tools),
        "plan_success_rate": plan_success(called, ref),
        "step_efficiency": efficiency(len(called), ref.optimal_steps),
        "timing_precision": timing_quality(bool(called), bool(ref.target_tools)),
        "end_to_end_success": float(success),
    }


def summarize_agent_metrics(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """mean / std (population) / count of each agent metric over the episodes that have it."""
    summary: dict[str, dict[str, float]] = {}
    for name in AGENT_METRICS:
        values = [row[name] for row in rows if name in row]
        if not values:
            continue
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        summary[name] = {"mean": mean, "std": std, "count": float(len(values))}
    return summary


class AgentJudge(Judge):
    """The five parts (`parts`: each part, `completion.<part>` of the completion judge, `penalty.<name>`),
    their weighted sum plus penalties as the total, and a one-line feedback naming what cost reward."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = parse_args(AgentArgs, kwargs, "agent")
        self.weights = {**DEFAULT_WEIGHTS, **self.args.weights}
        self.completion = build_judge(self.args.completion, current_base_dir(), where=f"{current_where()}.args.completion")

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        ref = reference_of(task, self.args.expected_key)
        if ref is None:
            raise JudgeError(f"agent judge: task {task.task_id!r} names no target tools and no expected calls "
                             f"(task.answer.target_tools or task.answer.{self.args.expected_key})")
        done = await self.completion.score(task, output)
        called = [call.name for call in predicted_calls(output)[0]]
        parts = {
            "task_completion": done.total,
            "tool_accuracy": tool_accuracy(called, ref.target_tools),
            "efficiency": efficiency(len(called), ref.optimal_steps),
            "timing_quality": timing_quality(bool(called), bool(ref.target_tools)),
            "format_compliance": format_compliance(output),
        }
        penalties = penalty_parts(self.args.penalties, task, output, self.args.expected_key)
        total = sum(self.weights[name] * value for name, value in parts.items()) + sum(penalties.values())
        parts.update(penalties)
        fired = [name for name in self.args.penalties if penalties[f"penalty.{name}"]]
        for key, value in done.parts.items():
            parts[f"completion.{key}"] = value
        return Reward(total=total, parts=parts, is_success=success_of(done, self.completion.success_threshold),
                      feedback=_feedback(parts, called, ref, fired))


def _feedback(parts: dict[str, float], called: list[str], ref: AgentReference, fired: list[str]) -> str:
    notes = ["task completed" if parts["task_completion"] >= 1.0 else "task not completed"]
    missing = sorted(set(ref.target_tools) - set(called))
    extra = sorted(set(called) - set(ref.target_tools))
    if missing:
        notes.append("missing tools: " + ", ".join(missing))
    if extra:
        notes.append("unneeded tools: " + ", ".join(extra))
    if parts["efficiency"] < 1.0:
        notes.append(f"{len(called)} calls where {ref.optimal_steps} suffice")
    if parts["timing_quality"] < 1.0:
        notes.append("answered without the tool it needs" if ref.target_tools else "called a tool it did not need")
    if parts["format_compliance"] < 1.0:
        notes.append("malformed calls or an empty answer")
    if fired:
        notes.append("penalties: " + ", ".join(fired))
    return "; ".join(notes)
