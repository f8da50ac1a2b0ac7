"""The result of one episode, and its line in `episodes.jsonl`."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ajet.judge.base import Reward
from ajet.samples import Sample
from ajet.tracker.merge import MergeStats
from ajet.tracker.timeline import LLMCall
from ajet.workflow import Task, WorkflowOutput


@dataclass
class EpisodeResult:
    episode_id: str
    task: Task
    repeat: int
    group_id: str
    output: WorkflowOutput | None = None
    reward: Reward | None = None
    success: bool = False
    error: str | None = None  # why the episode failed (workflow raised, timed out) after all attempts
    judge_error: str | None = None
    attempts: int = 0
    seconds: float = 0.0
    calls: list[LLMCall] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    merge: MergeStats = field(default_factory=MergeStats)
    counters: dict[str, Any] = field(default_factory=dict)  # parse failures, truncations, ...

    @property
    def ok(self) -> bool:
        """Finished and scored: the episode can be trained on."""
        return self.error is None and self.reward is not None

    @property
    def generated_tokens(self) -> int:
        return sum(len(c.completion_ids) for c in self.calls)

    def to_json(self) -> dict[str, Any]:
        out = self.output
        return {
            "episode_id": self.episode_id,
            "task": self.task.model_dump(),
            "repeat": self.repeat,
            "group_id": self.group_id,
            "reward": self.reward.total if self.reward else None,
            "reward_parts": self.reward.parts if self.reward else {},
            "feedback": self.reward.feedback if self.reward else None,
            "success": self.success,
            "error": self.error,
            "judge_error": self.judge_error,
            "attempts": self.attempts,
            "seconds": round(self.seconds, 3),
            "answer": _jsonable(out.answer) if out else None,
            "messages": _jsonable(out.messages) if out else [],
            "tool_calls": _jsonable(out.tool_calls) if out else [],
            "metrics": out.metrics if out else {},
            "metadata": _jsonable({k: v for k, v in out.metadata.items() if k != "tools"}) if out else {},
            "counters": self.counters,
            "tokens": {"generated": self.generated_tokens, "samples": sum(len(s.input_ids) for s in self.samples)},
            "merge": self.merge.to_dict(),
            "llm_calls": [c.to_dict() for c in self.calls],
            "samples": [{"tokens": len(s.input_ids), "trained": s.num_trained_tokens, "agent": s.agent,
                         "fork_reason": s.fork_reason, "calls": s.meta.get("calls")} for s in self.samples],
        }


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class EpisodeWriter:
    """Appends one JSON line per episode and flushes, so a crash loses nothing already finished.

    Whatever an episode holds, it gets its line: text that is not valid UTF-8 (a lone surrogate from
    a task or a workflow) is written \\u-escaped, and a row that cannot be serialised at all is
    written as its id and the reason."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, episode: EpisodeResult, **extra: Any) -> None:
        try:
            row = {**episode.to_json(), **extra}
            line = json.dumps(row, ensure_ascii=False, default=str)
            try:
                line.encode("utf-8")
            except UnicodeEncodeError:  # unpaired surrogates: \ud800 escapes are valid JSON
                line = json.dumps(row, ensure_ascii=True, default=str)
        except Exception as exc:  # noqa: BLE001 - a workflow's output too deep or too odd to serialise
            line = json.dumps({"episode_id": episode.episode_id, "task_id": episode.task.task_id,
                               "group_id": episode.group_id, "repeat": episode.repeat, "error": episode.error,
                               "reward": episode.reward.total if episode.reward else None,
                               "write_error": f"{type(exc).__name__}: {exc}"[:500], **extra},
                              ensure_ascii=True, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()
