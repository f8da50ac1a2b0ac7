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
"""

from __future__ import annotations

import json
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
