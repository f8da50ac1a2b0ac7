"""The Python tutorial's tool: the model's code runs in `ajet.sandbox`, its output comes back as the tool
message. Shared by the agent and the data script.

Every way a program can end becomes text the model can read (its output, or `Error: ...` with the last
lines of its traceback, or why it was stopped), and a status the agent counts per episode.
"""

from __future__ import annotations

import json
from typing import Any

from ajet.sandbox import Isolation, SandboxLimits, SandboxResult, run_python_async

SYSTEM_PROMPT = (
    "You solve math problems by writing Python. Call the python tool with a short program that prints "
    "the answer, then give the final answer as \\boxed{N}."
)

PYTHON_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run a Python program and return what it prints. No network, no files outside a temp folder.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "For example 'print(sum(range(1, 11)))'."}},
            "required": ["code"],
        },
    },
}

#: How a run ended -> the per-episode counter it adds to (WorkflowOutput.metrics).
STATUSES = ("ok", "error", "timeout", "memory", "output_limit", "blocked")


def tool_message(result: SandboxResult, max_chars: int = 1000) -> str:
    """What the model reads back: the output, or an `Error:` line saying what went wrong."""
    out = result.stdout.strip()
    if result.status == "ok":
        return _clip(out, max_chars) if out else "(the program printed nothing; print the answer)"
    if result.status == "timeout":
        return f"Error: the program ran longer than the time limit and was stopped. Output so far: {_clip(out, 200)!r}"
    if result.status == "output_limit":
        return f"Error: the program printed too much and was stopped. Start of its output: {_clip(out, 200)!r}"
    if result.status == "blocked":
        return f"Error: not allowed in the sandbox ({', '.join(sorted(set(result.blocked)))}); compute the answer directly."
    tail = "\n".join(result.stderr.strip().splitlines()[-3:])
    return _clip(f"Error: {tail}", max_chars)


async def run_python_call(arguments: str | dict | None, limits: SandboxLimits,
                          isolation: Isolation = "bwrap") -> tuple[str, dict[str, Any]]:
    """One `python` tool call: (tool message content, the call's record with 'status'). Never raises."""
    record: dict[str, Any] = {"name": "python", "arguments": arguments}
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else (arguments or {})
    except json.JSONDecodeError as exc:
        record.update(error=f"arguments are not valid JSON ({exc.msg})", status="bad_call")
        return f"Error: {record['error']}", record
    if not isinstance(args, dict) or not isinstance(args.get("code"), str) or not args["code"].strip():
        record.update(error='arguments must be a JSON object like {"code": "print(6 * 7)"}', status="bad_call")
        return f"Error: {record['error']}", record
    record["arguments"] = args
    result = await run_python_async(args["code"], limits, isolation)
    record["status"] = result.status
    content = tool_message(result)
    record["result" if result.ok else "error"] = content
    return content, record


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
