"""Reach any MCP server: connect, list its tools as OpenAI function specs, run a call.

`server` (the `mcp_agent` workflow's `workflow_args.server`, and what `ajet generate` reads) is one of:

    tools/server.py                a Python file defining a `fastmcp.FastMCP` object: loaded into
                                   this process and reached in memory (no subprocess, no port)
    python tools/server.py --x     any other text with a space, or a bare executable: a command that
                                   starts a stdio server (`python` is the interpreter running ajet),
                                   run in the YAML's folder
    http://127.0.0.1:8765/mcp      a running streamable-HTTP (or SSE, path ending in /sse) server
    mcp_config.json                a file in the MCP hosts' format, {"mcpServers": {name: {"command",
                                   "args", "env", "cwd"} or {"url"}}}; with several servers their
                                   tools are named `<server>_<tool>`

Every tool failure (bad JSON arguments, unknown tool, a tool that raises or hangs, a transport
error) comes back from `call_tool` as a `ToolOutcome` with `error` set and content "Error: ...",
which the agent shows to the model; it never raises. A result that is error-shaped
(`ajet.tool_results`: `{"error": ...}`, "Error: ...", empty) is shown as the tool wrote it and has
`error` set too. What the model sees is text: a result longer than `max_chars` is cut with a visible
marker, and an image, audio or binary resource becomes a placeholder naming its type and size.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastmcp
from fastmcp.client.transports import StdioTransport

from ajet.errors import ConfigError
from ajet.tool_results import DEFAULT_MAX_RESULT_CHARS, ids_after_names, not_shown, result_error, truncate_text

SERVER_FORMS = ("a Python file defining a fastmcp.FastMCP object (server.py), a command that starts a stdio "
                "server ('python server.py'), an http(s):// URL, or an MCP config JSON file (mcp_config.json)")


def open_client(server: str, base_dir: str | Path | None = None) -> fastmcp.Client:
    """A (not yet connected) MCP client for `server`; use it as `async with open_client(...) as c`.
    Relative paths and stdio commands resolve against `base_dir` (the YAML's folder)."""
    if not isinstance(server, str) or not server.strip():
        raise ConfigError(f"workflow_args.server is {server!r}; it must be {SERVER_FORMS}")
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    server = server.strip()
    if server.startswith(("http://", "https://")):
        return fastmcp.Client(server)
    path = Path(server).expanduser()
    path = path if path.is_absolute() else base / path
    if " " not in server and server.endswith(".py"):
        return fastmcp.Client(_load_server_object(path))
    if " " not in server and server.endswith(".json"):
        return fastmcp.Client(_read_mcp_config(path))
    command, *args = shlex.split(server)
    if command in ("python", "python3"):
        command = sys.executable  # the interpreter running ajet, with fastmcp installed
    return fastmcp.Client(StdioTransport(command, args, cwd=str(base)))


def _load_server_object(path: Path) -> Any:
    if not path.is_file():
        raise ConfigError(f"MCP server file {str(path)!r} does not exist; workflow_args.server must be {SERVER_FORMS}")
    module_name = f"ajet_mcp_server_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"cannot import the MCP server file {str(path)!r}")
        module = importlib.util.module_from_spec(spec)
        folder = str(path.parent.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)  # the server may import its siblings
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise ConfigError(f"importing the MCP server file {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
        sys.modules[module_name] = module
    servers = [v for v in vars(module).values() if isinstance(v, fastmcp.FastMCP)]
    if len(servers) != 1:
        found = "none" if not servers else f"{len(servers)}"
        raise ConfigError(
            f"MCP server file {str(path)!r} defines {found} fastmcp.FastMCP objects; it must define exactly one "
            f"to be reached in memory. To run it as a subprocess instead, set server: 'python {path.name}'")
    # The server now runs inside the rollout process: its log lines about the model's bad arguments
    # would cut through the progress display, and the agent sees them as tool errors anyway.
    logging.getLogger("fastmcp.server.server").setLevel(logging.ERROR)
    return servers[0]


def _read_mcp_config(path: Path) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"MCP config file {str(path)!r} does not exist") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"MCP config file {str(path)!r} is not valid JSON: {exc}") from None
    servers = config.get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise ConfigError(f"MCP config file {str(path)!r} has no 'mcpServers' object; expected "
                          '{"mcpServers": {"name": {"command": "python", "args": ["server.py"]}}}')
    for name, entry in servers.items():
        if isinstance(entry, dict) and "command" in entry:
            entry.setdefault("cwd", str(path.parent.resolve()))  # relative args resolve beside the JSON
            if entry["command"] in ("python", "python3"):
                entry["command"] = sys.executable
        elif not (isinstance(entry, dict) and "url" in entry):
            raise ConfigError(f"MCP config file {str(path)!r}: server {name!r} needs 'command' or 'url'")
    return config


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


def changes_state(tool: Any) -> bool | None:
    """What an MCP tool's annotations say of it: True when `readOnlyHint` is false (a commit, a
    checkout, a booking), False when it is true, None when the tool does not say."""
    annotations = getattr(tool, "annotations", None)
    # MCP SDK v2 names the field read_only_hint; v1 readOnlyHint
    name = "read_only_hint" if hasattr(annotations, "read_only_hint") else "readOnlyHint"
    hint = getattr(annotations, name, None)
    return None if hint is None else not hint


async def server_tools(server: str, base_dir: str | Path | None = None, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """Connect once and list the tools as OpenAI specs; a server that does not start or answer is a
    ConfigError."""
    return [tool_to_openai(tool) for tool in await server_tool_list(server, base_dir, timeout_s)]


async def server_tool_list(server: str, base_dir: str | Path | None = None, timeout_s: float = 60.0) -> list[Any]:
    """Connect once and list the MCP `Tool`s as the server sends them (annotations and all)."""
    client = open_client(server, base_dir)

    async def listed() -> list[Any]:
        async with client:
            return await client.list_tools()

    try:
        tools = await asyncio.wait_for(listed(), timeout_s)
    except ConfigError:
        raise
    except Exception as exc:  # TimeoutError, a dead subprocess, a refused connection, ...
        reason = f"no answer within {timeout_s:g} s" if isinstance(exc, asyncio.TimeoutError) else f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"the MCP server {server!r} did not start or answer ({reason}); check the command, URL "
                          "or file, and run it on its own to see its error") from None
    if not tools:
        raise ConfigError(f"the MCP server {server!r} lists no tools")
    return tools


@dataclass
class ToolOutcome:
    """The result of one tool call: `content` is what goes into the `tool` message. `truncated`: the
    result was cut to the size limit; `not_shown`: content blocks replaced by a placeholder."""

    name: str
    arguments: Any
    content: str
    result: Any = None
    error: str | None = None
    truncated: bool = False
    not_shown: int = 0

    def record(self) -> dict[str, Any]:
        """The entry for `WorkflowOutput.tool_calls`: the result, and the error when the call failed
        (an error-shaped result keeps both)."""
        entry: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.result is not None or self.error is None:
            entry["result"] = self.result
        if self.error is not None:
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


def _mime(block: Any, default: str) -> str:
    # MCP SDK v2 renamed mimeType to mime_type; read whichever this version has
    for attr in ("mime_type", "mimeType"):
        value = block.__dict__.get(attr) if hasattr(block, "__dict__") else None
        if isinstance(value, str) and value:
            return value
    return default


def _base64_bytes(data: Any) -> int | None:
    """The decoded size of base64 text, without decoding it."""
    if not isinstance(data, str):
        return None
    data = data.strip()
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def _block_text(block: Any) -> tuple[str, bool]:
    """One content block as text, and whether it is a placeholder (the model cannot see the block)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text or "", False
    if kind in ("image", "audio"):
        return not_shown(_mime(block, kind), _base64_bytes(getattr(block, "data", None))), True
    if kind == "resource":
        resource = block.resource
        if getattr(resource, "text", None) is not None:
            return resource.text, False
        return not_shown(_mime(resource, "binary resource"), _base64_bytes(getattr(resource, "blob", None))), True
    if kind == "resource_link":
        return not_shown(f"{_mime(block, 'resource')} link to {block.uri}", None), True
    return not_shown(str(kind or type(block).__name__), None), True


def _text_of(result: Any) -> tuple[str, int]:
    """The result's content as the text the model sees, and how many blocks are placeholders."""
    parts = [_block_text(block) for block in result.content or []]
    # Pydantic validation errors end each item with a docs link: noise for a small model.
    lines = "\n".join(text for text, _ in parts).splitlines()
    text = "\n".join(line for line in lines if not line.strip().startswith("For further information visit"))
    return text, sum(1 for _, placeholder in parts if placeholder)


async def call_tool(client: fastmcp.Client, name: str, arguments: str | dict | None,
                    timeout_s: float | None = None, max_chars: int = DEFAULT_MAX_RESULT_CHARS,
                    reorder_ids: bool = False) -> ToolOutcome:
    """Run one call. Bad JSON, unknown tools, bad arguments, tool errors and calls that take longer
    than `timeout_s` come back as an outcome with `error` set (content "Error: ..."), never raise;
    so do error-shaped results (content as the tool wrote it). Content longer than `max_chars` is
    cut (`truncated`); so is the recorded result, which is then the text the model saw. With
    `reorder_ids`, a JSON result's records show their ids after their names (`ids_after_names`)."""
    try:
        args = parse_arguments(arguments)
    except ValueError as exc:
        return ToolOutcome(name, arguments, content=f"Error: {exc}", error=str(exc))
    try:
        raw = await asyncio.wait_for(client.call_tool_mcp(name, args), timeout_s)
    except asyncio.TimeoutError:
        message = f"tool {name!r} did not answer within {timeout_s:g} s"
        return ToolOutcome(name, args, content=f"Error: {message}", error=message)
    except Exception as exc:  # a transport or protocol failure: report it to the agent, keep going
        message, _ = truncate_text(f"{type(exc).__name__}: {exc}", max_chars)
        return ToolOutcome(name, args, content=f"Error: {message}", error=message)
    text, placeholders = _text_of(raw)
    if reorder_ids and not raw.is_error:
        text = ids_after_names(text)
    shown, truncated = truncate_text(text, max_chars)
    if raw.is_error:
        message = shown.strip() or "the tool reported an error with no message"
        return ToolOutcome(name, args, content=f"Error: {message}", error=message, truncated=truncated,
                           not_shown=placeholders)
    result = raw.structured_content
    if isinstance(result, dict) and set(result) == {"result"}:
        result = result["result"]  # fastmcp wraps non-object return values as {"result": ...}
    if result is None or truncated:
        result = shown  # no structure, or too large to keep: the record holds what the model saw
    problem = result_error(result)
    error = truncate_text(problem, max_chars)[0] if problem is not None else None
    return ToolOutcome(name, args, content=shown, result=result, error=error, truncated=truncated,
                       not_shown=placeholders)
