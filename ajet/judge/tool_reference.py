"""`tool_reference`: an agent episode scored part by part against its reference (ToolRL's decomposition).

A task generated call-first (`ajet generate tasks --from-calls`) carries `answer: {calls, final}`:
the gold calls and the value the last one returned. One number per episode says little to GRPO
when a small model gets the tool right and one argument wrong; the parts say which:

    format      calls that parsed / calls attempted (1.0 when nothing was attempted and none expected)
    tool_name   multiset overlap of called and gold tool names / max(#called, #gold)
    arg_names   F1 over (tool, argument name) pairs: the right keys, whatever their values
    arg_values  F1 over (tool, argument name, value) pairs, values compared leniently
    final       the final answer states the gold value (a number within `rel_tol`, else the text)

In the argument parts an argument sent at its schema default (the tool specs the model saw,
`output.metadata["tools"]`, else `task.metadata["tools"]`) counts as left out, on both sides: the
server runs the two calls alike, and a hand-written reference may spell a default the model leaves out.

The total is their weighted mean (`weights`); the episode is a success when `final` and
`arg_values` are both 1 (the right answer, reached with the right calls). A part is named after
what it checks, not after seed 003's metric names (`function_call` keeps those).

It also says which turn went wrong (`Reward.turn_rewards`, for turn-level credit): one reward per
assistant message of `output.messages` (one per LLM call of a single-agent workflow), in order. A
turn that calls tools gets the share of its calls that match a gold call not matched before (name
and every argument value); a turn that answers in text gets `final`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ajet.errors import JudgeError
from ajet.judge.base import Judge, Reward
from ajet.judge.exact_match import answer_text
from ajet.judge.numbers import numbers_in, parse_number
from ajet.judge.function_call import (
    Call, call_metrics, expected_calls, parse_failures, predicted_calls, to_call, tool_specs, values_match,
    without_defaults,
)
from ajet.judge.registry import check_weights, parse_args
from ajet.workflow import Task, WorkflowOutput

DEFAULT_WEIGHTS = {"format": 0.1, "tool_name": 0.2, "arg_names": 0.15, "arg_values": 0.25, "final": 0.3}


class ToolReferenceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    calls_key: str = Field("calls", description="task.answer[calls_key] holds the gold calls.")
    final_key: str = Field("final", description="task.answer[final_key] holds the gold final value.")
    weights: dict[str, float] = Field(default_factory=dict, description="Part weights; missing keys keep defaults.")
    rel_tol: float = Field(1e-2, ge=0, description="final: a number within rel_tol * |gold| of the gold number "
                           "counts (the answer may round).")

    @field_validator("weights")
    @classmethod
    def _known_parts(cls, value: dict[str, float]) -> dict[str, float]:
        return check_weights(value, DEFAULT_WEIGHTS, "part")


class ToolReferenceJudge(Judge):
    """Format, tool name, argument names, argument values and final value, scored separately."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = parse_args(ToolReferenceArgs, kwargs, "tool_reference")
        self.weights = {**DEFAULT_WEIGHTS, **self.args.weights}

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        gold = expected_calls(task, self.args.calls_key)
        answer = task.answer if isinstance(task.answer, dict) else {}
        if gold is None or self.args.final_key not in answer:
            raise JudgeError(f"tool_reference: task {task.task_id!r} has no reference: task.answer must be "
                             f"{{{self.args.calls_key!r}: [calls], {self.args.final_key!r}: value}}, got {task.answer!r}")
        predicted, malformed = predicted_calls(output)
        tools = tool_specs(output, task)
        gold, predicted = without_defaults(gold, tools), without_defaults(predicted, tools)
        metrics, notes = call_metrics(predicted, gold, parse_failures(output) + malformed, None)
        parts = {
            "format": metrics["parse_rate"],
            "tool_name": metrics["func_name_accuracy"],
            "arg_names": name_f1([(c.name, k) for c in predicted for k in c.arguments],
                                 [(c.name, k) for c in gold for k in c.arguments]),
            "arg_values": metrics["param_f1"],
            "final": float(states_value(answer_text(output), answer[self.args.final_key], self.args.rel_tol)),
        }
        if parts["final"] < 1:
            notes.append(f"the answer does not state {answer[self.args.final_key]!r}")
        total = sum(self.weights[k] * parts[k] for k in parts) / sum(self.weights.values())
        return Reward(total=total, parts=parts, feedback="; ".join(notes) or None,
                      is_success=parts["final"] == 1 and parts["arg_values"] == 1,
                      turn_rewards=turn_rewards(output.messages, gold, parts["final"], self.args.rel_tol, tools)
                      or None)


def turn_rewards(messages: list[dict[str, Any]], gold: list[Call], final: float, rel_tol: float,
                 tools: dict[str, dict[str, Any]] | None = None) -> list[float]:
    """One reward per assistant message: the share of its tool calls that match a gold call not matched by
    an earlier one (a malformed call matches nothing), or `final` for a message without tool calls.
    `gold` is compared as given; each message's calls lose their arguments at a default of `tools`."""
    unmatched = list(gold)
    out = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        raw = message.get("tool_calls") or []
        if not raw:
            out.append(float(final))
            continue
        hits = 0
        for item in raw:
            call = to_call(item.get("function", item) if isinstance(item, dict) else item)
            if call is not None:
                call = without_defaults([call], tools)[0]
            match = next((g for g in unmatched if call is not None and g.name == call.name
                          and values_match(call.arguments, g.arguments, rel_tol)), None)
            if match is not None:
                unmatched.remove(match)
                hits += 1
        out.append(hits / len(raw))
    return out


def name_f1(got: list[tuple[str, str]], want: list[tuple[str, str]]) -> float:
    """F1 of two multisets of pairs; 1.0 when both are empty."""
    if not got and not want:
        return 1.0
    hits = sum((Counter(got) & Counter(want)).values())
    return 2 * hits / (len(got) + len(want))


def states_value(text: str, value: Any, rel_tol: float) -> bool:
    """Whether `text` states `value`: a number anywhere in it within tolerance, or the value's text."""
    if isinstance(value, list):
        return any(states_value(text, v, rel_tol) for v in value)
    number = parse_number(value)
    if number is not None:
        return any(abs(found - number) <= rel_tol * abs(number) + 1e-12 for found in numbers_in(text))
    if isinstance(value, bool) or value is None:
        return str(value).casefold() in text.casefold()
    return str(value).strip().casefold() in text.casefold()
