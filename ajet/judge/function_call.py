"""`function_call`: score the tool calls of an episode against the expected calls (seed 003's metrics).

    parse_rate          parsed calls / (parsed calls + calls that failed to parse)
    func_name_accuracy  multiset overlap of called and expected names / max(#called, #expected)
    param_f1            F1 over (name, key, value) argument pairs, values compared leniently; an
                        argument at its schema default counts as left out, on both sides
    schema_hit_rate     called tools that exist in the tool schema with valid arguments / #called
    exec_rate           calls that ran without an error / #called; a call whose result is error-shaped
                        ({"error": ...}, "Error: ...", empty: ajet.tool_results) did not run cleanly

The total is the weighted mean of the metrics (`weights`). Each metric is defined with a worked
example in docs/judges.md. `predicted_calls`, `expected_calls` and `parse_failures` are shared
with the `composite` judge's penalties.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ajet.errors import JudgeError
from ajet.judge.base import Judge, Reward
from ajet.judge.registry import check_weights, parse_args
from ajet.tool_results import record_error
from ajet.workflow import Task, WorkflowOutput

DEFAULT_WEIGHTS = {
    "parse_rate": 0.1,
    "func_name_accuracy": 0.3,
    "param_f1": 0.3,
    "schema_hit_rate": 0.1,
    "exec_rate": 0.2,
}


@dataclass
class Call:
    """One tool call: its name, its arguments, and why it failed when run (an error, or an error-shaped
    result; None: it ran fine or was never run)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class FunctionCallArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expected_key: str = Field("calls", description="task.answer[expected_key] holds the expected calls.")
    weights: dict[str, float] = Field(default_factory=dict, description="Metric weights; missing keys keep defaults.")
    tools: list[dict[str, Any]] | None = Field(
        None, description="Tool schema used when neither output.metadata nor task.metadata has 'tools'."
    )
    num_rel_tol: float = Field(1e-6, ge=0, description="Relative tolerance when argument values are numbers.")

    @field_validator("weights")
    @classmethod
    def _known_metrics(cls, value: dict[str, float]) -> dict[str, float]:
        return check_weights(value, DEFAULT_WEIGHTS, "metric")


class FunctionCallJudge(Judge):
    """Seed 003's function-calling metrics as named parts; total is their weighted mean."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = parse_args(FunctionCallArgs, kwargs, "function_call")
        self.weights = {**DEFAULT_WEIGHTS, **self.args.weights}

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        expected = expected_calls(task, self.args.expected_key)
        if expected is None:
            raise JudgeError(
                f"function_call: task {task.task_id!r} has no expected calls: task.answer is {task.answer!r}; "
                f"give it a list of calls or a dict with key {self.args.expected_key!r} "
                "(or set judge.args.expected_key)"
            )
        predicted, malformed = predicted_calls(output)
        tools = tool_specs(output, task, self.args.tools)
        parts, notes = call_metrics(
            without_defaults(predicted, tools), without_defaults(expected, tools),
            parse_failures(output) + malformed, tools, self.args.num_rel_tol,
        )
        used = {name: self.weights[name] for name in parts}
        total_weight = sum(used.values())
        if total_weight <= 0:  # only schema_hit_rate weighted and no schema: nothing to grade
            raise JudgeError("function_call: every metric with a positive weight is unavailable (no tool schema)")
        total = sum(used[name] * parts[name] for name in parts) / total_weight
        return Reward(total=total, parts=parts, feedback="; ".join(notes) or None)


def call_metrics(
    predicted: list[Call],
    expected: list[Call],
    failures: int,
    tools: dict[str, dict[str, Any]] | None,
    num_rel_tol: float = 1e-6,
) -> tuple[dict[str, float], list[str]]:
    """The five metrics (schema_hit_rate only when `tools` is known) and notes on what went wrong."""
    notes: list[str] = []
    # Per-call rates when nothing was called: full marks if nothing was expected, none otherwise.
    vacuous = 1.0 if not expected else 0.0
    attempts = len(predicted) + failures
    parts = {"parse_rate": len(predicted) / attempts if attempts else vacuous}
    if failures:
        notes.append(f"{failures} call(s) failed to parse")

    overlap = sum((Counter(c.name for c in predicted) & Counter(c.name for c in expected)).values())
    most = max(len(predicted), len(expected))
    parts["func_name_accuracy"] = overlap / most if most else 1.0

    got_pairs, want_pairs = _pairs(predicted), _pairs(expected)
    if got_pairs or want_pairs:
        hits = _matched_pairs(got_pairs, want_pairs, num_rel_tol)
        parts["param_f1"] = 2 * hits / (len(got_pairs) + len(want_pairs))
    else:  # no arguments on either side: nothing beyond the names to compare
        parts["param_f1"] = parts["func_name_accuracy"]

    if tools is not None:
        hits = 0
        for i, call in enumerate(predicted):
            problem = schema_problem(call, tools)
            if problem:
                notes.append(f"call {i + 1} {call.name!r}: {problem}")
            hits += problem is None
        parts["schema_hit_rate"] = hits / len(predicted) if predicted else vacuous

    ran = sum(1 for call in predicted if not call.error)
    parts["exec_rate"] = ran / len(predicted) if predicted else vacuous
    return parts, notes


def predicted_calls(output: WorkflowOutput) -> tuple[list[Call], int]:
    """The calls the episode made, and how many were malformed (no name, arguments not a JSON object).

    Read from `output.tool_calls`; when that is empty, from the OpenAI `tool_calls` of the
    assistant messages in `output.messages` (no error information there).
    """
    raw: list[Any] = list(output.tool_calls)
    if not raw:
        for message in output.messages:
            if message.get("role") == "assistant":
                for call in message.get("tool_calls") or []:
                    function = call.get("function", call) if isinstance(call, dict) else call
                    raw.append(function)
    calls, malformed = [], 0
    for item in raw:
        call = to_call(item)
        if call is None:
            malformed += 1
        else:
            calls.append(call)
    return calls, malformed


def expected_calls(task: Task, expected_key: str = "calls") -> list[Call] | None:
    """The expected calls of `task`, or None when the task names none."""
    answer = task.answer
    if isinstance(answer, dict):
        answer = answer.get(expected_key)
    if not isinstance(answer, list):
        return None
    calls = []
    for item in answer:
        call = to_call(item)
        if call is None:
            raise JudgeError(
                f"task {task.task_id!r}: expected call {item!r} is not {{'name': str, 'arguments': dict}}"
            )
        calls.append(call)
    return calls


def parse_failures(output: WorkflowOutput) -> int:
    """Tool calls the gateway could not parse (`output.metadata['ajet']['tool_call_parse_failures']`)."""
    stats = output.metadata.get("ajet") or {}
    try:
        return max(0, int(stats.get("tool_call_parse_failures", 0) or 0))
    except (TypeError, ValueError):
        return 0


def tool_specs(output: WorkflowOutput, task: Task, fallback: list[dict] | None = None) -> dict[str, dict] | None:
    """Tool name -> JSON schema of its parameters, from output.metadata, task.metadata or `fallback`."""
    for source in (output.metadata.get("tools"), task.metadata.get("tools"), fallback):
        if isinstance(source, list):
            return parameters_by_name(source)
    return None


def parameters_by_name(tools: list[Any]) -> dict[str, dict]:
    """Tool name -> JSON schema of its parameters, from OpenAI tool specs or bare ones (MCP's `inputSchema`)."""
    specs = {}
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        spec = tool.get("function", tool)  # OpenAI {"type": "function", "function": {...}} or bare
        params = spec.get("parameters") or spec.get("inputSchema") or spec.get("input_schema") or {}
        if isinstance(spec.get("name"), str):
            specs[spec["name"]] = params
    return specs


def without_defaults(calls: list[Call], tools: dict[str, dict[str, Any]] | None) -> list[Call]:
    """`calls` with each argument that equals its tool's schema default left out. Sending an option at its
    default and leaving it out make the same call, so a reference and an answer that differ only there
    compare equal (either side may spell the default). Unchanged where the tools are unknown."""
    if not tools:
        return calls
    out = []
    for call in calls:
        properties = (tools.get(call.name) or {}).get("properties") or {}
        kept = {key: value for key, value in call.arguments.items()
                if not (isinstance(properties.get(key), dict) and "default" in properties[key]
                        and values_match(value, properties[key]["default"]))}
        out.append(call if len(kept) == len(call.arguments) else replace(call, arguments=kept))
    return out


def schema_problem(call: Call, tools: dict[str, dict[str, Any]]) -> str | None:
    """Why `call` does not fit the tool schema, or None when it does."""
    if call.name not in tools:
        return "not in the tool schema"
    schema = tools[call.name]
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in call.arguments:
            return f"missing required parameter {name!r}"
    extra_ok = bool(schema.get("additionalProperties", False))
    for key, value in call.arguments.items():
        if key not in properties:
            if not extra_ok:
                return f"unknown parameter {key!r}"
            continue
        if not _type_ok(value, properties[key]):
            declared = properties[key].get("type", properties[key].get("enum"))
            return f"parameter {key!r} = {value!r} does not match {declared}"
    return None


def values_match(got: Any, want: Any, rel_tol: float = 1e-6) -> bool:
    """Lenient equality: strings case-insensitive, numbers within tolerance (a numeric string matches a
    number), lists element-wise, dicts key-wise, booleans exactly."""
    if isinstance(got, bool) or isinstance(want, bool):
        return got is want
    if isinstance(got, str) and isinstance(want, str):
        return got.strip().casefold() == want.strip().casefold()
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(values_match(got[k], want[k], rel_tol) for k in want)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(values_match(g, w, rel_tol) for g, w in zip(got, want))
    got_num, want_num = _number(got), _number(want)
    if got_num is not None and want_num is not None:
        return math.isclose(got_num, want_num, rel_tol=rel_tol, abs_tol=1e-9)
    return got == want


def to_call(item: Any) -> Call | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        return None
    arguments = item.get("arguments")
    if arguments is None or arguments == "":
        arguments = {}
    elif isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return Call(name=item["name"], arguments=arguments, error=record_error(item))


def _pairs(calls: list[Call]) -> list[tuple[str, str, Any]]:
    return [(call.name, key, value) for call in calls for key, value in call.arguments.items()]


def _matched_pairs(got: list[tuple], want: list[tuple], rel_tol: float) -> int:
    """Size of a one-to-one matching of equal pairs (greedy; equality is lenient, not hashable)."""
    free = list(got)
    hits = 0
    for name, key, value in want:
        for i, (g_name, g_key, g_value) in enumerate(free):
            if g_name == name and g_key == key and values_match(g_value, value, rel_tol):
                del free[i]
                hits += 1
                break
    return hits


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


_JSON_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _type_ok(value: Any, schema: Any) -> bool:
    if not isinstance(schema, dict):
        return True
    if "enum" in schema and value not in schema["enum"]:
        return False
    declared = schema.get("type")
    if declared is None:
        return True  # anyOf / $ref / untyped: not checked
    types = declared if isinstance(declared, list) else [declared]
    return any(_JSON_TYPES.get(t, lambda v: True)(value) for t in types)
