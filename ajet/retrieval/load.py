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


def select_tools(retriever: Retriever, tools: list[dict[str, Any]], query: str, k: int,
                 include: list[str] | None = None) -> list[dict[str, Any]]:
    """The specs of the k tools best for `query`, best first (all of them when there are no more than k).
    include: tool names that must be among the k (the task's reference tools, for an oracle comparison):
    each one missing takes the place of the lowest ranked, the others keep their order."""
    if len(tools) <= k:
        return list(tools)
    by_name = {tool_name(t): t for t in tools}
    names = retriever.top_k(query, k)
    wanted = [n for n in dict.fromkeys(include or []) if n in by_name][:k]
    if wanted:
        kept = [n for n in names if n not in wanted][: k - len(wanted)]
        names = [n for n in names if n in kept or n in wanted] + [n for n in wanted if n not in names]
    return [by_name[name] for name in names]
