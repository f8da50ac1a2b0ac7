"""(query, tool name) training pairs from demonstrations (SFT rows) or generated tasks.

    SFT row:  {"messages": [{"role": "user", "content": Q}, {"role": "assistant", "tool_calls": [...]}, ...]}
    task:     {"query": Q, "answer": {"calls": [{"name": ...}, ...]}}

Each tool a row calls gives one pair with the row's (first) user message. Rows with no query or no
call are counted and skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ajet.errors import ConfigError


@dataclass
class Pairs:
    pairs: list[tuple[str, str]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)  # the tools SFT rows carry, first seen first
    skipped: int = 0


def reference_tools(answer: Any) -> list[str]:
    """Tool names of a task's reference calls (`answer: {calls: [{name, ...}]}`); [] when it has none."""
    calls = answer.get("calls") if isinstance(answer, dict) else None
    return [c["name"] for c in calls or [] if isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"]]


def row_pairs(row: Any) -> list[tuple[str, str]]:
    """The (query, tool) pairs of one SFT row or task; [] when it has no query or no call."""
    if not isinstance(row, dict):
        return []
    if isinstance(row.get("messages"), list):
        msgs = [m for m in row["messages"] if isinstance(m, dict)]
        query = next((m.get("content") for m in msgs if m.get("role") == "user"), None)
        names = [(c.get("function") or {}).get("name") for m in msgs if m.get("role") == "assistant"
                 for c in (m.get("tool_calls") or []) if isinstance(c, dict)]
    else:
        query, names = row.get("query"), reference_tools(row.get("answer"))
    if not isinstance(query, str) or not query.strip():
        return []
    return [(query, n) for n in dict.fromkeys(names) if isinstance(n, str) and n]


def read_pairs(path: str | Path) -> Pairs:
    """Every pair in a JSON Lines file of SFT rows and/or tasks; a missing or pair-less file is a ConfigError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"train-retriever: --pairs {path} does not exist")
    out, seen_tools = Pairs(), set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            out.skipped += 1
            continue
        found = row_pairs(row)
        if not found:
            out.skipped += 1
        out.pairs.extend(found)
        for tool in (row.get("tools") or []) if isinstance(row, dict) else []:
            name = (tool.get("function") or tool).get("name") if isinstance(tool, dict) else None
            if name and name not in seen_tools:
                seen_tools.add(name)
                out.tools.append(tool)
    if not out.pairs:
        raise ConfigError(f"train-retriever: {path} has no (query, tool) pair ({out.skipped} rows skipped); expected "
                          "SFT rows (messages with assistant tool_calls) or tasks (query + answer.calls)")
    return out
