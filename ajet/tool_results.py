"""What a tool result means to ajet: the one definition of an error-shaped result, and how a result
too large to show is cut. Workflows (what they count and show the model), judges (exec rate, clean
tool use) and `ajet generate` (which episodes and calls to keep) all read it from here, so they
cannot disagree. Standard library only: any layer may import it.

A call FAILED when its record carries an `error` (the call raised, timed out, had bad arguments, or
the MCP server flagged `isError`), or when its result is error-shaped:

    None, "" or whitespace           an empty result: the call returned nothing to work with
    {"error": <anything truthy>}     an error written as a plain result (also as JSON text)
    "Error: ..." / "error: ..."      text that says it is an error (any case, leading spaces ignored)

Anything else is a result, including `[]`, `{}`, `0` and `{"error": null, ...}`: an empty list is a
legitimate answer ("no orders"), and an `error` field that is null says there was none.

`ids_after_names` rewrites a JSON result so that each record's id fields (`id`, `room_id`, `roomId`)
come right after its first text field (`{"name": "Dock", "room_id": "rm-104", ...}`): the same data,
in the order a small model can copy from. It reads forward: after the name it matched, the next
tokens are the id it must send on. Servers mostly write the id first, where the model would have to
look back, and a 135M model then sends the first id of the list instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: The default cut of a tool result shown to the model (characters). A 5 MB result once made the
#: next LLM call a 413; 8,000 characters of dense data are ~3.4k SmolLM2 tokens, so one cut result
#: still fits the default prompt budget (rollout.max_prompt_tokens 4096; 16,000 did not).
DEFAULT_MAX_RESULT_CHARS = 8_000


def result_error(result: Any) -> str | None:
    """Why `result` is error-shaped (see the module docstring), or None when it is a real result."""
    if result is None:
        return "empty result"
    if isinstance(result, str):
        text = result.strip()
        if not text:
            return "empty result"
        if text[:6].casefold() == "error:":
            return text[6:].strip() or "error with no message"
        if text.startswith("{") and text.endswith("}"):
            try:
                parsed = json.loads(text)
            except ValueError:
                return None
            return result_error(parsed) if isinstance(parsed, dict) else None
        return None
    if isinstance(result, Mapping):
        error = result.get("error")
        if error:
            return error if isinstance(error, str) else json.dumps(error, default=str, ensure_ascii=False)
    return None


def record_error(record: Any) -> str | None:
    """Why one tool-call record (`{"name", "arguments", "result"?, "error"?}`, as workflows report
    them in `WorkflowOutput.tool_calls`) failed, or None. A record with neither key (a call read
    from the conversation, never run by ajet) is not counted as failed: nothing says it did."""
    if not isinstance(record, Mapping):
        return None
    error = record.get("error")
    if error is not None and error is not False:
        return str(error) or "error with no message"
    if "result" in record:
        return result_error(record["result"])
    return None


def truncate_text(text: str, max_chars: int) -> tuple[str, bool]:
    """`text` cut to its first `max_chars` characters with a visible marker, and whether it was cut.
    The marker says how much there was, so the model (and whoever reads the episode) knows."""
    if len(text) <= max_chars:
        return text, False
    marker = f"\n... [truncated: {len(text):,} characters, showing the first {max_chars:,}]"
    return text[:max_chars] + marker, True


def not_shown(kind: str, size: int | None, unit: str = "bytes") -> str:
    """The placeholder of a result the model cannot read as text (an image, audio, a binary file):
    `[image/png result: 12,345 bytes, not shown]`."""
    amount = f": {size:,} {unit}" if size is not None else ""
    return f"[{kind} result{amount}, not shown]"


_ID_KEY = re.compile(r"(?:.+[_\s-])?(?:id|Id|ID)|.*[a-z]I[dD]")  # id, room_id, Room ID, roomId


def ids_after_names(text: str) -> str:
    """`text` with every record's id fields moved right after its first text field, when `text` is
    JSON (laid out as it was: compact, spaced or indented); any other text as it is."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return text
    try:
        data = json.loads(stripped)
    except ValueError:
        return text
    moved = _ids_after_names(data)
    if json.dumps(moved) == json.dumps(data):  # nothing moved: the text exactly as the server wrote it
        return text
    ascii_only = "\\u" in stripped
    for layout in ({"separators": (",", ":")}, {}, {"indent": 2}):
        if json.dumps(data, ensure_ascii=ascii_only, **layout) == stripped:
            return json.dumps(moved, ensure_ascii=ascii_only, **layout)
    spaced = re.search(r'":\s', stripped) is not None
    return json.dumps(moved, ensure_ascii=ascii_only, **({} if spaced else {"separators": (",", ":")}))


def _ids_after_names(data: Any) -> Any:
    """`data` with its dicts' id keys (str or int values) placed after their first text field."""
    if isinstance(data, list):
        return [_ids_after_names(item) for item in data]
    if not isinstance(data, dict):
        return data
    items = {key: _ids_after_names(value) for key, value in data.items()}
    ids = [k for k, v in items.items() if _ID_KEY.fullmatch(str(k)) and isinstance(v, (str, int))
           and not isinstance(v, bool)]
    name = next((k for k, v in items.items() if k not in ids and isinstance(v, str)
                 and re.search(r"[^\W\d_]", v)), None)
    if not ids or name is None:
        return items
    order = [k for k in items if k not in ids]
    at = order.index(name) + 1
    order[at:at] = ids
    return {k: items[k] for k in order}
