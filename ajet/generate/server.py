"""Which MCP server `ajet generate` works on: the config's `workflow_args.server` (the `mcp_agent`
workflow's), resolved against the YAML's folder by `ajet.mcp_client.open_client`."""

from __future__ import annotations

from ajet.config.schema import AjetConfig
from ajet.errors import GenerateError


def server_of(cfg: AjetConfig) -> str:
    """`workflow_args.server`, or a GenerateError saying what to set."""
    server = cfg.workflow_args.get("server")
    if not server:
        raise GenerateError("ajet generate reads the tools of workflow_args.server, which is not set; use the "
                            "mcp_agent workflow and name the MCP server (a .py file, a command, a URL or an MCP "
                            "config JSON)")
    return str(server)
