"""An MCP server exposing the synthetic benchmark tools (ajet/retrieval/synthetic.py) with fastmcp.

    python -m ajet.retrieval.server [--commodities 10 --measures 10 --scopes 10]   # stdio, 1,000 tools

Every tool answers a deterministic figure derived from its name and arguments, so an agent's call
can be checked by name alone.
"""

from __future__ import annotations

import argparse
import inspect
import zlib
from typing import Any

from fastmcp import FastMCP

from ajet.retrieval.synthetic import build_tools


def _tool_function(name: str, param: str) -> Any:
    def answer(**kwargs: Any) -> dict[str, Any]:
        place = str(kwargs.get(param, ""))
        value = zlib.crc32(f"{name}|{place}".encode()) % 10000 / 100  # stable across runs, unlike hash()
        return {"tool": name, param: place, "value": value}

    # fastmcp reads the parameters from the signature: give each tool its own scope parameter
    answer.__signature__ = inspect.Signature([
        inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, annotation=str),
        inspect.Parameter("date", inspect.Parameter.KEYWORD_ONLY, annotation=str, default=""),
    ])
    answer.__annotations__ = {param: str, "date": str, "return": dict[str, Any]}
    return answer


def build_server(commodities: int = 10, measures: int = 10, scopes: int = 10) -> FastMCP:
    mcp = FastMCP("synthetic_tools", instructions="Energy and utility figures by place (benchmark tools).")
    for spec in build_tools(commodities, measures, scopes):
        fn = spec["function"]
        param = fn["parameters"]["required"][0]
        mcp.tool(_tool_function(fn["name"], param), name=fn["name"], description=fn["description"])
    return mcp


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for key in ("commodities", "measures", "scopes"):
        parser.add_argument(f"--{key}", type=int, default=10)
    a = parser.parse_args()
    build_server(a.commodities, a.measures, a.scopes).run(show_banner=False)
