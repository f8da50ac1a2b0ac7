"""Loading a retriever by name ('bm25') or folder, and picking the top_k tool specs for a query."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ajet.errors import ConfigError
from ajet.retrieval.base import Retriever, tool_name


def load_retriever(spec: str, base_dir: str | Path | None = None) -> Retriever:
    """'bm25', or the folder a trained retriever was saved to (relative paths resolve against base_dir)."""
    if spec == "bm25":
        from ajet.retrieval.bm25 import BM25Retriever

        return BM25Retriever()
    path = Path(spec)
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    if not (path / "retriever.json").is_file():
        raise ConfigError(f"tool retrieval: retriever = {spec!r} is neither 'bm25' nor a trained retriever folder "
                          f"({path / 'retriever.json'} does not exist); train one with `ajet train-retriever`")
    from ajet.retrieval.embedding import EmbeddingRetriever

    return EmbeddingRetriever.load(path)


def select_tools(retriever: Retriever, tools: list[dict[str, Any]], query: str, k: int) -> list[dict[str, Any]]:
    """The specs of the k tools best for `query`, best first (all of them when there are no more than k)."""
    if len(tools) <= k:
        return list(tools)
    by_name = {tool_name(t): t for t in tools}
    return [by_name[name] for name in retriever.top_k(query, k)]
