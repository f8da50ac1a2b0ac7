"""Tool retrieval: offer an agent facing hundreds of tools only the few that fit the task.

    from ajet.retrieval import load_retriever
    retriever = load_retriever("bm25")            # or the folder `ajet train-retriever` wrote
    retriever.index(tools)                         # OpenAI function specs (or {name, description, parameters})
    retriever.top_k("gas price in Denver", 8)      # -> tool names, best first

`base` holds the interface and the text a tool is searched by, `load` picks a retriever, `bm25` the lexical baseline (pure
Python), `embedding` the contrastively trained encoder (torch, imported only when used), `pairs` reads
(query, tool) training pairs from demonstrations or tasks, `synthetic` builds the 1,000-tool benchmark.
"""

from __future__ import annotations

from ajet.retrieval.base import Retriever
from ajet.retrieval.load import load_retriever, select_tools

__all__ = ["Retriever", "load_retriever", "select_tools"]
