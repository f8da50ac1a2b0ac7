"""Parse tool calls out of generated text: Hermes `<tool_call>{json}</tool_call>` blocks (what the
Hermes prompt and Qwen-style templates ask for), or, when the text has no such tag, the same JSON
written plainly: the whole reply one call object (or a list of them), or call objects in fenced
code blocks (```json ... ```). Qwen2.5-Coder-Instruct, offered tools by its own template, answers
in these plain forms; `ParsedOutput.form` tells which form the calls came in, so evaluation counts
them apart.

A tagged block that does not parse is a malformed call (counted, the text returned as content). Plain
JSON is a call only when it looks like one (an object with a string `name` and `arguments` or
`parameters`): other JSON and other code blocks are ordinary content. A call-shaped object that
names a tool nobody offered, or whose arguments are not an object, is malformed, as in a tag.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Literal

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_OPEN = "<tool_call>"
_FENCE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```", re.DOTALL | re.IGNORECASE)


@dataclass
class ParsedOutput:
    content: str  # text outside the tool-call blocks (the whole text when parsing failed)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # OpenAI tool_calls
    malformed: int = 0  # blocks that looked like calls but did not parse
    error: str | None = None  # why the last malformed block failed
    form: Literal["tagged", "json"] | None = None  # 'tagged' (<tool_call> blocks) or 'json' (plain or fenced JSON): the calls' form


def parse_tool_calls(text: str, tool_names: set[str] | None = None) -> ParsedOutput:
    """Split `text` into content and OpenAI `tool_calls`.

    A block whose JSON is invalid, lacks a string `name`, or names no offered tool (when
    `tool_names` is given) makes the whole output count as malformed: it is returned as plain
    text, so the agent sees what the model said, and the failure is counted.
    """
    if _OPEN not in text:
        return _parse_plain_json(text, tool_names)
    blocks = _BLOCK.findall(text)
    calls, problems = _calls_and_problems([_parse_block(raw, tool_names) for raw in blocks])
    unclosed = text.count(_OPEN) - len(blocks)
    if unclosed > 0:
        problems.append("a <tool_call> block is not closed")
    if problems:
        return ParsedOutput(content=text, malformed=len(problems), error=problems[-1])
    content = _BLOCK.sub("", text).strip()
    return ParsedOutput(content=content, tool_calls=_numbered(calls), form="tagged" if calls else None)


def _calls_and_problems(parsed: list[tuple[dict[str, Any], str | None]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The parsed calls apart from why the others failed."""
    return [call for call, problem in parsed if not problem], [problem for _, problem in parsed if problem]


def _numbered(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls with ids that sort in the order the model wrote them: some frameworks (smolagents) order
    parallel calls by id when they write them into the history. 12 hex digits, as OpenAI-like ids."""
    reply = secrets.token_hex(5)
    for i, call in enumerate(calls):
        call["id"] = f"call_{reply}{i:02x}"
    return calls


def _parse_plain_json(text: str, tool_names: set[str] | None) -> ParsedOutput:
    """Calls written as plain JSON: the whole text, else each fenced code block, holding call objects."""
    whole = _json_values(text)
    if whole is not None and _call_shaped(whole):
        pieces, content = [whole], ""
    else:
        pieces = []

        def take(block: re.Match[str]) -> str:
            """A fenced block of calls joins `pieces` and leaves the content; any other block stays."""
            values = _json_values(block.group(1))
            if values is None or not _call_shaped(values):
                return block.group(0)
            pieces.append(values)
            return ""

        content = _FENCE.sub(take, text)
    if not pieces:
        return ParsedOutput(content=text)
    calls, problems = _calls_and_problems([_parse_call(value, tool_names) for values in pieces for value in values])
    if problems:
        return ParsedOutput(content=text, malformed=len(problems), error=problems[-1])
    return ParsedOutput(content=content.strip(), tool_calls=_numbered(calls), form="json")


def _json_values(text: str) -> list[Any] | None:
    """The JSON values `text` holds back to back (a list's items count one by one); None when it
    holds anything else."""
    decoder, values, at, text = json.JSONDecoder(), [], 0, text.strip()
    while at < len(text):
        try:
            value, at = decoder.raw_decode(text, at)
        except ValueError:
            return None
        values += value if isinstance(value, list) else [value]
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
    return values or None


def _call_shaped(values: list[Any]) -> bool:
    """Every value an object with a string `name` and `arguments` (or `parameters`): what a call looks like."""
    return bool(values) and all(isinstance(v, dict) and isinstance(v.get("name"), str)
                                and ("arguments" in v or "parameters" in v) for v in values)


def _parse_block(raw: str, tool_names: set[str] | None) -> tuple[dict[str, Any], str | None]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return {}, f"tool call is not valid JSON ({exc.msg})"
    return _parse_call(data, tool_names)


def _parse_call(data: Any, tool_names: set[str] | None) -> tuple[dict[str, Any], str | None]:
    """One call's JSON value as an OpenAI tool call, or why it is not one."""
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
