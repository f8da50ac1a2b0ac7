"""`grounded`: a reference-free check that a tool agent's answer rests on what its tools returned.

An episode scores 1 when all of these hold, else 0 with the first failed rule as feedback:
- it made at least `min_tool_calls` tool calls, none of them failed (the workflow's `tool_calls`
  records, {"name", "arguments", "result"} or {..., "error"}; an error-shaped result such as
  {"error": "unknown sku"} is a failure too, see ajet.tool_results) and none was left unparsed;
- it ended with a non-empty final answer (`stop_reason`, when the workflow reports one, is 'answered');
- every number in the answer was returned by a tool or appears in the question (a value rounded
  to the precision the answer writes it with counts), and at least one does;
- when the tools returned no numbers, the answer contains one of the text values they returned.

No reference answer is needed, so it filters teacher or self-generated demonstrations
(`ajet generate demos`) and rewards GRPO on generated tasks.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ajet.judge.base import Judge, Reward
from ajet.judge.numbers import numbers_in, written_numbers
from ajet.judge.registry import parse_args
from ajet.tool_results import record_error
from ajet.workflow import Task, WorkflowOutput

class GroundedArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_tool_calls: int = Field(1, ge=0, description="Fewest tool calls an episode must make.")
    min_text_chars: int = Field(3, ge=1, description="Shortest text value of a tool result that counts as a mention.")


def leaves(value: Any) -> list[Any]:
    """Every scalar inside a tool result (dict values, list items, nested)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    return [value]


def _matches(number: tuple[float, int], pool: list[float]) -> bool:
    value, decimals = number
    tolerance = 0.5 * 10 ** -decimals + 1e-9
    return any(abs(value - v) <= tolerance for v in pool)


def tool_use_problem(output: WorkflowOutput, min_tool_calls: int = 1) -> str | None:
    """Why the episode's tool use is not clean (too few calls, a failed or unparsed call, no final
    answer), or None. Each reason starts with a short category and a colon."""
    calls = output.tool_calls or []
    if len(calls) < min_tool_calls:
        return f"too_few_tool_calls: made {len(calls)} tool call(s); at least {min_tool_calls} needed"
    # an error-shaped result ({"error": ...}, "Error: ...", empty) is a failed call too (ajet.tool_results)
    failed = [(c, error) for c in calls if (error := record_error(c)) is not None]
    if failed:
        call, error = failed[0]
        name = call.get("name") if isinstance(call, dict) else None
        return f"tool_error: tool call {name!r} failed: {error[:120]}"
    unparsed = (output.metadata.get("ajet") or {}).get("tool_call_parse_failures", 0)
    if unparsed:
        return f"unparsed_tool_call: {unparsed} tool call(s) the gateway could not parse"
    stop = output.metadata.get("stop_reason")
    if (stop is not None and stop != "answered") or not str(output.answer or "").strip():
        return f"no_answer: the episode ended without a final answer (stop_reason: {stop or 'empty answer'})"
    return None


def grounding_problem(task: Task, output: WorkflowOutput, min_tool_calls: int = 1, min_text_chars: int = 3) -> str | None:
    """Why the episode is not grounded, or None when it is ('category: detail')."""
    problem = tool_use_problem(output, min_tool_calls)
    if problem:
        return problem
    calls, answer = output.tool_calls, str(output.answer).strip()
    values = [v for c in calls for v in leaves(c.get("result"))]
    pool = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    pool += [n for v in values if isinstance(v, str) for n, _ in written_numbers(v)]
    question = numbers_in(task.query)
    stated = written_numbers(answer)
    for number in stated:
        if not _matches(number, pool) and not _matches(number, question):
            return f"ungrounded: the answer states {number[0]:g}, which no tool returned"
    if pool:
        if not any(_matches(number, pool) for number in stated):
            return "ungrounded: the answer states none of the numbers the tools returned"
        return None
    texts = [v for v in values if isinstance(v, str) and len(v.strip()) >= min_text_chars]
    if texts and not any(t.strip().casefold() in answer.casefold() for t in texts):
        return "ungrounded: the answer mentions none of the values the tools returned"
    return None


class GroundedJudge(Judge):
    """1 when the episode's answer is grounded in its tool results (see the module docstring), else 0.
    parts: {'grounded'}; feedback: the failed rule."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = parse_args(GroundedArgs, kwargs, "grounded")

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        problem = grounding_problem(task, output, self.args.min_tool_calls, self.args.min_text_chars)
        total = 0.0 if problem else 1.0
        return Reward(total=total, parts={"grounded": total}, feedback=problem or "grounded in the tool results")
