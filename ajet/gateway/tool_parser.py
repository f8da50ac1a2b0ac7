"""Parse Hermes-style `<tool_call>{json}</tool_call>` blocks out of generated text."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_OPEN = "<tool_call>"


@dataclass
class ParsedOutput:
    content: str  # text outside the tool-call blocks (the whole text when parsing failed)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # OpenAI tool_calls
    malformed: int = 0  # blocks that looked like calls but did not parse
    error: str | None = None  # why the last malformed block failed


def parse_tool_calls(text: str, tool_names: set[str] | None = None) -> ParsedOutput:
    """Split `text` into content and OpenAI `tool_calls`.

    A block whose JSON is invalid, lacks a string `name`, or names no offered tool (when
    `tool_names` is given) makes the whole output count as malformed: it is returned as plain
    text, so the agent sees what the model said, and the failure is counted.
    """
    if _OPEN not in text:
        return ParsedOutput(content=text)
    calls: list[dict[str, Any]] = []
    problems: list[str] = []
    blocks = _BLOCK.findall(text)
    for raw in blocks:
        call, problem = _parse_block(raw, tool_names)
        if problem:
            problems.append(problem)
        else:
            calls.append(call)
    unclosed = text.count(_OPEN) - len(blocks)
    if unclosed > 0:
        problems.append("a <tool_call> block is not closed")
    if problems:
        return ParsedOutput(content=text, malformed=len(problems), error=problems[-1])
    content = _BLOCK.sub("", text).strip()
    # Ids that sort in the order the model wrote the calls: some frameworks (smolagents) order
    # parallel calls by id when they write them into the history. 12 hex digits, as OpenAI-like ids.
    reply = secrets.token_hex(5)
    for i, call in enumerate(calls):
        call["id"] = f"call_{reply}{i:02x}"
    return ParsedOutput(content=content, tool_calls=calls)


def _parse_block(raw: str, tool_names: set[str] | None) -> tuple[dict[str, Any], str | None]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return {}, f"tool call is not valid JSON ({exc.msg})"
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return {}, "tool call JSON has no string 'name'"
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}, "tool call 'arguments' is a string that is not JSON"
    if not isinstance(arguments, dict):
        return {}, "tool call 'arguments' is not an object"
    if tool_names is not None and data["name"] not in tool_names:
        return {}, f"tool {data['name']!r} was not offered"
    call = {
        "id": "",  # set by parse_tool_calls
        "type": "function",
        "function": {"name": data["name"], "arguments": json.dumps(arguments, ensure_ascii=False)},
    }
    return call, None
