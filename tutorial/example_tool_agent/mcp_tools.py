"""MCP helpers shared by the agent and the data script: connect, list tools as OpenAI specs, call.

Both `agent.py` (at rollout time) and `make_data.py` (when writing demonstrations) go through
these functions, so the tool specs and tool-result texts the model trains on are exactly the ones
it sees when it runs.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastmcp
from fastmcp.client.transports import StdioTransport

SYSTEM_PROMPT = (
    "You are a natural gas expert. Answer the user's question by calling the tools; "
    "when you have the result, reply with one short sentence that states the number."
)

HERE = Path(__file__).resolve().parent


def open_client(server: str | None = None) -> fastmcp.Client:
    """A (not yet connected) MCP client; use it as `async with open_client(...) as client`.

    `server` None: the energy server in memory (no subprocess). An `http(s)://` URL: a running
    streamable-HTTP server. Anything else: a command line that starts a stdio server, run in this
    folder, e.g. "python energy_server.py".
    """
    if server is None:
        from energy_server import mcp  # a sibling module; this folder is on sys.path

        # The server now runs inside the rollout process: its warnings about the model's bad
        # arguments would cut through the progress display, and the agent sees them as tool errors.
        logging.getLogger("fastmcp.server.server").setLevel(logging.ERROR)
        return fastmcp.Client(mcp)
    if server.startswith(("http://", "https://")):
        return fastmcp.Client(server)
    command, *args = shlex.split(server)
    if command in ("python", "python3"):
        command = sys.executable  # the interpreter running ajet, with fastmcp installed
    return fastmcp.Client(StdioTransport(command, args, cwd=str(HERE)))


def _clean_schema(schema: Any) -> Any:
    """Drop JSON-schema keys that cost prompt tokens but tell the model nothing."""
    if isinstance(schema, dict):
        return {k: _clean_schema(v) for k, v in schema.items() if k not in ("title", "additionalProperties")}
    if isinstance(schema, list):
        return [_clean_schema(v) for v in schema]
    return schema


def tool_to_openai(tool: Any) -> dict[str, Any]:
    """One MCP `Tool` as an OpenAI function spec: {"type": "function", "function": {...}}."""
    parameters = _clean_schema(tool.input_schema or {"type": "object", "properties": {}})
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description or "", "parameters": parameters},
    }


async def list_openai_tools(client: fastmcp.Client) -> list[dict[str, Any]]:
    """The server's tools as OpenAI specs, in the server's order."""
    return [tool_to_openai(tool) for tool in await client.list_tools()]


@dataclass
class ToolOutcome:
    """The result of one tool call: `content` is what goes into the `tool` message."""

    name: str
    arguments: Any
    content: str
    result: Any = None
    error: str | None = None

    def record(self) -> dict[str, Any]:
        """The entry for `WorkflowOutput.tool_calls`."""
        entry: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.error is None:
            entry["result"] = self.result
        else:
            entry["error"] = self.error
        return entry


def parse_arguments(arguments: str | dict | None) -> dict[str, Any]:
    """OpenAI sends arguments as a JSON string; raise ValueError unless it is a JSON object."""
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc.msg}): {arguments[:200]}") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}: {arguments[:200]}")
    return value


def _text_of(result: Any) -> str:
    texts = [block.text for block in result.content or [] if getattr(block, "text", None) is not None]
    # Pydantic validation errors end each item with a docs link: noise for a small model.
    lines = "\n".join(texts).splitlines()
    return "\n".join(line for line in lines if not line.strip().startswith("For further information visit"))


async def call_tool(client: fastmcp.Client, name: str, arguments: str | dict | None) -> ToolOutcome:
    """Run one call. Bad JSON, unknown tools, bad arguments and tool errors come back as an
    outcome with `error` set (and content "Error: ..."), never as an exception."""
    try:
        args = parse_arguments(arguments)
    except ValueError as exc:
        return ToolOutcome(name, arguments, content=f"Error: {exc}", error=str(exc))
    try:
        raw = await client.call_tool_mcp(name, args)
    except Exception as exc:  # a transport or protocol failure: report it to the agent, keep going
        message = f"{type(exc).__name__}: {exc}"
        return ToolOutcome(name, args, content=f"Error: {message}", error=message)
    text = _text_of(raw)
    if raw.is_error:
        return ToolOutcome(name, args, content=f"Error: {text}", error=text)
    result = raw.structured_content
    if isinstance(result, dict) and set(result) == {"result"}:
        result = result["result"]  # fastmcp wraps non-object return values as {"result": ...}
    return ToolOutcome(name, args, content=text, result=result if result is not None else text)
