"""The retriever interface and the text a tool is searched by."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any

from ajet.errors import ConfigError

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")


def tool_spec(tool: dict[str, Any]) -> dict[str, Any]:
    """{name, description, parameters} of an OpenAI function spec or of a plain tool dict."""
    spec = tool.get("function", tool) if tool.get("type") == "function" else tool
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise ConfigError(f"tool retrieval: a tool needs a non-empty 'name'; got {str(tool)[:120]!r}")
    return spec


def tool_name(tool: dict[str, Any]) -> str:
    return tool_spec(tool)["name"]


def split_name(name: str) -> str:
    """`getGasPrice_city` -> 'get gas price city': names are searched as words."""
    return " ".join(_CAMEL.sub(" ", name).replace("_", " ").replace("-", " ").replace(".", " ").split())


def tool_text(tool: dict[str, Any]) -> str:
    """What a tool is searched by: its split name, description, and parameter names and descriptions."""
    spec = tool_spec(tool)
    parts = [split_name(spec["name"]), str(spec.get("description") or "")]
    props = (spec.get("parameters") or {}).get("properties") or {}
    for key, schema in props.items():
        parts.append(split_name(str(key)))
        if isinstance(schema, dict) and schema.get("description"):
            parts.append(str(schema["description"]))
    return ". ".join(p for p in parts if p)


def words(text: str) -> list[str]:
    """Lower-case alphanumeric words, camelCase and snake_case split."""
    return _WORD.findall(split_name(text).lower())


def check_tools(tools: list[dict[str, Any]]) -> list[str]:
    """The tools' names; an empty list or a repeated name is a ConfigError."""
    if not tools:
        raise ConfigError("tool retrieval: the tool list is empty; the server (or --tools file) offers no tool to index")
    names = [tool_name(t) for t in tools]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"tool retrieval: tool name {name!r} appears twice; names must be unique")
        seen.add(name)
    return names


def check_k(k: int) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"tool retrieval: top_k = {k!r}; it must be an integer >= 1")
    return k


class Retriever(ABC):
    """Ranks a fixed tool set for a query: `index(tools)` once, then `top_k(query, k)` per task."""

    names: list[str]

    @abstractmethod
    def index(self, tools: list[dict[str, Any]]) -> None:
        """Prepare to rank these tools (OpenAI specs or plain {name, description, parameters})."""

    @abstractmethod
    def scores(self, query: str) -> list[float]:
        """One score per indexed tool, in index order; higher is better."""

    def top_k(self, query: str, k: int) -> list[str]:
        """The k best tool names for `query`, best first (ties keep index order)."""
        check_k(k)
        if not getattr(self, "names", None):
            raise ConfigError("tool retrieval: top_k before index(tools); index the tool list first")
        return self._best(self.scores(query), k)

    def top_k_many(self, queries: list[str], k: int) -> list[list[str]]:
        """top_k for each query (an encoder batches them)."""
        check_k(k)
        return [self.top_k(q, k) for q in queries]

    def _best(self, scores: list[float], k: int) -> list[str]:
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [self.names[i] for i in order[:k]]
