"""`workflow_args.tool_retrieval` of the mcp_agent workflow: offer the model only the top_k tools.

    workflow_args:
      tool_retrieval: {top_k: 8, retriever: bm25}   # or the folder `ajet train-retriever` wrote

The retriever loads and indexes the server's tools on the first episode and again only when the
server's tool list changes; each episode then offers the top_k tools for the task's query. The
workflow runs `select` in a thread (`asyncio.to_thread`): loading an encoder and encoding a thousand
tools takes seconds, which on the event loop would stall every other episode and the gateway.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ajet.retrieval.base import Retriever, check_tools
from ajet.retrieval.load import load_retriever, select_tools


class ToolRetrievalArgs(BaseModel):
    """The `workflow_args.tool_retrieval` of the mcp_agent workflow."""

    model_config = ConfigDict(extra="forbid")

    top_k: int = Field(8, ge=1, description="Tools offered to the model per task (all of them when the server "
                       "has no more).")
    retriever: str = Field("bm25", description="'bm25' (lexical, no training) or the folder of a retriever "
                           "trained by `ajet train-retriever` (relative paths resolve against the YAML).")
    include_reference: bool = Field(False, description="Evaluation only: the task's reference tools "
                                    "(answer.calls names) always among the top_k, each missing one in place of "
                                    "the lowest ranked: the oracle that shows what retrieval misses cost the agent.")


class ToolRetrieval:
    """One per workflow: the retriever, indexed once per distinct tool list."""

    def __init__(self, args: ToolRetrievalArgs) -> None:
        self.args = args
        self._retriever: Retriever | None = None
        self._indexed: tuple[str, ...] | None = None
        # episodes select from worker threads: the first ones must not load and index side by side
        self._lock = threading.Lock()

    def select(self, tools: list[dict[str, Any]], query: str, base_dir: str | Path | None,
               reference: list[str] | None = None) -> list[dict[str, Any]]:
        """The top_k specs of `tools` for `query`, best first (with the `reference` tool names when
        include_reference is on). Blocking (it may load and index): call it from a thread."""
        names = tuple(check_tools(tools))
        with self._lock:
            if self._retriever is None:
                self._retriever = load_retriever(self.args.retriever, base_dir)
            if self._indexed != names:
                self._retriever.index(tools)
                self._indexed = names
            include = reference if self.args.include_reference else None
            return select_tools(self._retriever, tools, query, self.args.top_k, include)
