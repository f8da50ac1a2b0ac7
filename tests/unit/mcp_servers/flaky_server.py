"""A small MCP server for tests: a tool that works, one that raises, one that hangs.

    python flaky_server.py               # stdio
    python flaky_server.py --http PORT   # streamable HTTP on 127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import asyncio
import sys

from fastmcp import FastMCP

mcp = FastMCP("flaky")


@mcp.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


@mcp.tool
async def hang(seconds: float) -> str:
    """Answers after `seconds`."""
    await asyncio.sleep(seconds)
    return "late"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
    else:
        mcp.run(show_banner=False)
