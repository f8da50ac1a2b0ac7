"""OpenAI `tool_choice`, `parallel_tool_calls` and `response_format` as a `GuidedDecoding` constraint.

What each request field means here (the OpenAI chat API's definitions), and the constraint the
engine then enforces token by token (`ajet.engine.guided`):

    tool_choice "none"          no tools are rendered and no call is parsed: no constraint on calls
    tool_choice "auto" (default with tools)   free text; once the model writes `<tool_call>`, each
                                call must name an offered tool and its arguments must fit that tool's
                                JSON schema
    tool_choice "required"      one or more calls of offered tools, and nothing else
    tool_choice {"type": "function", "function": {"name": N}}   exactly one call of N
    parallel_tool_calls false   at most one call
    response_format {"type": "json_schema", "json_schema": {"schema": S}}   the reply is JSON fitting
                                S (with tools and "auto": either calls, or such a reply)
    response_format {"type": "json_object"}   the reply is a JSON object
    response_format {"type": "text"}          no constraint

Calls are written in the Hermes format the gateway parses (`ajet.gateway.tool_parser`) and the
renderer shows to the model: `<tool_call>\\n{"name": "N", "arguments": {...}}\\n</tool_call>`.
A request that contradicts itself (a named function that was not offered, "required" without
tools, a schema that does not compile) raises `GatewayError` (HTTP 400) with the reason.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ajet.engine.base import GuidedDecoding
from ajet.errors import GatewayError

TRIGGER = "<tool_call>"
CALL_END = "}\n</tool_call>"
_CHOICES = ("none", "auto", "required")


def call_begin(name: str) -> str:
    """The fixed text before a call's arguments (the arguments object follows, then `CALL_END`)."""
    return f'{TRIGGER}\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": '


def guided_decoding(
    tools: list[dict[str, Any]] | None,
    tool_choice: str | dict[str, Any] | None,
    response_format: dict[str, Any] | None = None,
    parallel_tool_calls: bool | None = None,
) -> GuidedDecoding | None:
    """The constraint a chat request asks for, or None when it asks for none."""
    choice = _tool_choice(tool_choice, tools)
    text_schema = _response_schema(response_format)
    if not tools or choice == "none":
        return _checked(GuidedDecoding("json_schema", text_schema)) if text_schema is not None else None
    functions = _functions(tools)
    max_calls = 1 if parallel_tool_calls is False else None
    if isinstance(choice, dict):  # a named function: exactly one call of it
        name = choice["function"]["name"]
        if name not in functions:
            raise GatewayError(f"tool_choice names the function {name!r}, which is not in tools "
                               f"(offered: {', '.join(functions)})")
        functions, max_calls = {name: functions[name]}, 1
    value: dict[str, Any] = {
        "tags": [{"begin": call_begin(n), "schema": schema, "end": CALL_END} for n, schema in functions.items()],
        "trigger": TRIGGER, "separator": "\n", "text_allowed": choice == "auto", "max_calls": max_calls,
    }
    if choice == "auto" and text_schema is not None:
        value["text_schema"] = text_schema
    return _checked(GuidedDecoding("structural_tag", value))


def _tool_choice(tool_choice: Any, tools: list[dict[str, Any]] | None) -> str | dict[str, Any]:
    if tool_choice is None:
        return "auto"
    if isinstance(tool_choice, str):
        if tool_choice not in _CHOICES:
            raise GatewayError(f"tool_choice is {tool_choice!r}; expected 'none', 'auto', 'required' or "
                               '{"type": "function", "function": {"name": ...}}')
        if tool_choice == "required" and not tools:
            raise GatewayError("tool_choice is 'required' but the request has no tools")
        return tool_choice
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise GatewayError("tool_choice.function.name must be a non-empty string")
        if not tools:
            raise GatewayError(f"tool_choice names the function {name!r} but the request has no tools")
        return {"type": "function", "function": {"name": name}}
    raise GatewayError(f"tool_choice {json.dumps(tool_choice)[:120]} is not supported; expected 'none', 'auto', "
                       '\'required\' or {"type": "function", "function": {"name": ...}}')


def _functions(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """name -> parameters schema of each offered function (an empty object schema when none)."""
    out: dict[str, Any] = {}
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise GatewayError(f"tools[{i}] has no function.name")
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise GatewayError(f"tools[{i}].function.parameters must be a JSON schema object")
        out[name] = parameters
    return out


def _response_schema(response_format: Any) -> dict[str, Any] | None:
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise GatewayError("response_format.json_schema.schema must be a JSON schema object")
        return schema
    raise GatewayError(f"response_format.type is {kind!r}; expected 'text', 'json_object' or 'json_schema'")


def _checked(spec: GuidedDecoding) -> GuidedDecoding:
    _check(json.dumps([spec.kind, spec.value], sort_keys=True))
    return spec


@lru_cache(maxsize=256)
def _check(key: str) -> None:
    """Compile the constraint once per distinct request shape, so a bad schema is a 400 here and
    not an engine failure later."""
    from ajet.engine.guided import GuidedDecodingError, check_spec

    kind, value = json.loads(key)
    try:
        check_spec(GuidedDecoding(kind, value))
    except GuidedDecodingError as exc:
        raise GatewayError(str(exc)) from None
