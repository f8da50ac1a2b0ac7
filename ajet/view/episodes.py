"""The episode table: what one line of episodes.jsonl is summarised to, and how the table filters,
searches and sorts those summaries (pure functions over the index, no file access)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ajet.view.jsonl_index import Line

SNIPPET = 200  # characters of query and answer kept for the table and its search box
SORT_KEYS = ("line", "step", "task_id", "reward", "success", "turns", "tool_calls", "tokens", "seconds", "failure",
             "stop")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def failure_reason(row: dict[str, Any]) -> str | None:
    """The kind of failure: the error's class ('TimeoutError', 'ValueError'), 'judge: <kind>', or None."""
    if row.get("error"):
        return _text(row["error"]).split(":")[0].strip() or "error"
    if row.get("judge_error"):
        return "judge: " + _text(row["judge_error"]).split(":")[0].strip()
    if row.get("write_error"):
        return "write_error"
    return None


def stop_reason(row: dict[str, Any]) -> str | None:
    """Why the episode ended: the workflow's own `metadata.stop_reason` (the MCP agent sets one), else
    the last LLM call's finish reason ('stop', 'length')."""
    metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    if metadata.get("stop_reason"):
        return _text(metadata["stop_reason"])
    calls = row.get("llm_calls") or []
    if calls and isinstance(calls[-1], dict) and calls[-1].get("finish_reason"):
        return _text(calls[-1]["finish_reason"])
    return None


def summarize_episode(row: dict[str, Any]) -> dict[str, Any]:
    """The few fields of an episode the table shows, filters and sorts on."""
    task = row.get("task") if isinstance(row.get("task"), dict) else {}
    calls = row.get("llm_calls") if isinstance(row.get("llm_calls"), list) else []
    tokens = row.get("tokens") if isinstance(row.get("tokens"), dict) else {}
    forks = (row.get("merge") or {}).get("forks") if isinstance(row.get("merge"), dict) else {}
    return {
        "episode_id": _text(row.get("episode_id")),
        "task_id": _text(task.get("task_id") or row.get("task_id")),
        "group_id": _text(row.get("group_id")),
        "repeat": row.get("repeat"),
        "step": row.get("step") if isinstance(row.get("step"), int) else None,
        "reward": _number(row.get("reward")),
        "success": bool(row.get("success")),
        "failure": failure_reason(row),
        "stop": stop_reason(row),
        "turns": len(calls),
        "tool_calls": len(row.get("tool_calls") or []),
        "tokens": _number(tokens.get("generated")),
        "seconds": _number(row.get("seconds")),
        "samples": len(row.get("samples") or []),
        "forks": sorted(forks) if isinstance(forks, dict) else [],
        "query": _text(task.get("query"))[:SNIPPET],
        "answer": _text(row.get("answer"))[:SNIPPET],
        "error": _text(row.get("error") or row.get("judge_error"))[:SNIPPET],
    }


@dataclass
class EpisodeFilter:
    """The table's filters; None means 'any'."""

    step: int | None = None
    task: str | None = None  # substring of the task id
    group: str | None = None  # exact GRPO group id
    query: str | None = None  # the search box: task, query, answer, error, episode id
    reward_min: float | None = None
    reward_max: float | None = None
    success: bool | None = None
    failure: str | None = None  # a failure kind, 'none' (no failure) or 'any' (some failure)
    stop: str | None = None
    turns_min: int | None = None
    turns_max: int | None = None
    tools_min: int | None = None
    tools_max: int | None = None

    def narrows(self) -> bool:
        return any(v is not None for v in vars(self).values())

    def keeps(self, s: dict[str, Any]) -> bool:  # noqa: C901 - one plain test per filter
        if self.step is not None and s["step"] != self.step:
            return False
        if self.task and self.task.lower() not in s["task_id"].lower():
            return False
        if self.group is not None and s["group_id"] != self.group:
            return False
        if self.query:
            haystack = " ".join((s["task_id"], s["episode_id"], s["query"], s["answer"], s["error"])).lower()
            if self.query.lower() not in haystack:
                return False
        if self.reward_min is not None and (s["reward"] is None or s["reward"] < self.reward_min):
            return False
        if self.reward_max is not None and (s["reward"] is None or s["reward"] > self.reward_max):
            return False
        if self.success is not None and s["success"] != self.success:
            return False
        if self.failure == "none" and s["failure"] is not None:
            return False
        if self.failure == "any" and s["failure"] is None:
            return False
        if self.failure not in (None, "none", "any") and s["failure"] != self.failure:
            return False
        if self.stop is not None and s["stop"] != self.stop:
            return False
        for value, low, high in ((s["turns"], self.turns_min, self.turns_max),
                                 (s["tool_calls"], self.tools_min, self.tools_max)):
            if (low is not None and value < low) or (high is not None and value > high):
                return False
        return True


def _sort_value(line: Line, key: str) -> tuple[int, Any]:
    if key == "line":
        return (0, line.number)
    value = line.summary.get(key) if line.summary else None
    if value is None:
        return (1, 0)  # missing values sort last either way round (see select)
    return (0, value if not isinstance(value, str) else value.lower())


def select(lines: list[Line], flt: EpisodeFilter, sort: str, descending: bool) -> list[Line]:
    """Lines kept by the filter, sorted; corrupt lines stay visible (last) while nothing narrows."""
    keyed = [(_sort_value(ln, sort), ln) for ln in lines if ln.summary is not None and flt.keeps(ln.summary)]
    present = [(value, ln) for (absent, value), ln in keyed if not absent]
    missing = [ln for (absent, _), ln in keyed if absent]
    present.sort(key=lambda pair: pair[0], reverse=descending)  # stable: ties stay in line order
    corrupt = [] if flt.narrows() else [ln for ln in lines if ln.summary is None]
    return [ln for _, ln in present] + missing + corrupt


def facets(lines: list[Line]) -> dict[str, Any]:
    """The values the filter menus offer, and counts shown above the table."""
    good = [ln.summary for ln in lines if ln.summary is not None]
    return {
        "steps": sorted({s["step"] for s in good if s["step"] is not None}),
        "failures": sorted({s["failure"] for s in good if s["failure"]}),
        "stops": sorted({s["stop"] for s in good if s["stop"]}),
        "tasks": len({s["task_id"] for s in good}),
        "corrupt": sum(1 for ln in lines if ln.summary is None),
        "episodes": len(good),
    }
