"""What every task reader shares: the `TaskSet` it returns, row -> `Task` mapping with the
configured field names, bad-row bookkeeping, stable unique ids, and the train/val split.

A reader yields raw rows with their location (file, line); `TaskBuilder` turns each into a `Task`
or a `SkippedRow`, and `finish` refuses a source with no good row at all.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ajet import safejson
from ajet.errors import TaskReaderError
from ajet.workflow import Task

logger = logging.getLogger("ajet.task_reader")

_MISSING = object()
_LOGGED_PER_SOURCE = 20  # warnings beyond this are summarised, so a broken file does not flood the log


@dataclass
class SkippedRow:
    """A row that was not turned into a task: where it is and why."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class TaskSet:
    """The tasks of one split, the rows skipped on the way, and where they came from."""

    tasks: list[Task] = field(default_factory=list)
    skipped: list[SkippedRow] = field(default_factory=list)
    source: str = ""

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self):
        return iter(self.tasks)


def get_path(row: Any, path: str) -> Any:
    """`row[path]`, or walk a dotted path (`info.question`, `messages.0.content`); `_MISSING` if absent."""
    if isinstance(row, dict) and path in row:
        return row[path]
    value = row
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


class TaskBuilder:
    """Maps rows to tasks with `fields` (an `ajet.config.schema.FieldMapping`) and keeps ids unique."""

    def __init__(self, fields: Any, source: str) -> None:
        self.fields = fields
        self.source = source
        self.tasks: list[Task] = []
        self.skipped: list[SkippedRow] = []
        self._ids: dict[str, str] = {}  # id -> where it was first seen

    def add_row(self, row: Any, file: str, line: int) -> Task | None:
        """Map one raw row; a bad row is recorded in `skipped` and None is returned."""
        if isinstance(row, Task):
            problem = safejson.find_problem(row.model_dump(), root="task")
            if problem is not None:
                return self.skip(file, line, problem)
            return self._keep(row, explicit=True, file=file, line=line)
        if not isinstance(row, dict):
            return self.skip(file, line, f"row is a {type(row).__name__}, expected a JSON object")
        problem = safejson.find_problem(row, root="row")
        if problem is not None:  # too deep to render or store, or text no tokenizer or file can take
            return self.skip(file, line, problem)
        query = get_path(row, self.fields.query)
        if query is _MISSING:
            keys = ", ".join(sorted(map(str, row))[:12])
            return self.skip(file, line, f"missing query field {self.fields.query!r} (row has: {keys}); "
                                         "set task_reader.fields.query")
        if not isinstance(query, str):
            kind = type(query).__name__
            return self.skip(file, line, f"query field {self.fields.query!r} is a {kind}, expected a string")
        if not query.strip():
            return self.skip(file, line, f"query field {self.fields.query!r} is empty")
        answer = None
        if self.fields.answer is not None:
            value = get_path(row, self.fields.answer)
            answer = None if value is _MISSING else value
        raw_id = get_path(row, self.fields.task_id) if self.fields.task_id is not None else _MISSING
        metadata = self._metadata(row)
        if raw_id is _MISSING or raw_id is None or raw_id == "":
            task = Task(task_id=Task.stable_id(query, answer, metadata), query=query, answer=answer, metadata=metadata)
            return self._keep(task, explicit=False, file=file, line=line)
        if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool):
            return self.skip(file, line, f"task_id field {self.fields.task_id!r} is a {type(raw_id).__name__}, "
                                         "expected a string or an integer")
        task = Task(task_id=str(raw_id), query=query, answer=answer, metadata=metadata)
        return self._keep(task, explicit=True, file=file, line=line)

    def skip(self, file: str, line: int, reason: str) -> None:
        row = SkippedRow(file=file, line=line, reason=reason)
        self.skipped.append(row)
        if len(self.skipped) <= _LOGGED_PER_SOURCE:
            logger.warning("skipped task row %s", row)
        return None

    def finish(self) -> TaskSet:
        """The TaskSet; raises TaskReaderError when the source gave no usable row."""
        if len(self.skipped) > _LOGGED_PER_SOURCE:
            logger.warning("%s: %d bad rows skipped in all", self.source, len(self.skipped))
        if not self.tasks:
            if not self.skipped:
                raise TaskReaderError(f"{self.source}: no rows found; the source is empty")
            problems = "\n  ".join(str(s) for s in self.skipped[:5])
            more = f"\n  ... and {len(self.skipped) - 5} more" if len(self.skipped) > 5 else ""
            raise TaskReaderError(
                f"{self.source}: no usable task rows ({len(self.skipped)} bad). First problems:\n  {problems}{more}\n"
                "Fix the rows or the field mapping (task_reader.fields)."
            )
        return TaskSet(tasks=self.tasks, skipped=self.skipped, source=self.source)

    def _metadata(self, row: dict[str, Any]) -> dict[str, Any]:
        if self.fields.metadata is not None:
            picked = {}
            for path in self.fields.metadata:
                value = get_path(row, path)
                if value is not _MISSING:
                    picked[path.rsplit(".", 1)[-1]] = value
            return picked
        mapped = {self.fields.query, self.fields.answer, self.fields.task_id}
        metadata = {k: v for k, v in row.items() if k not in mapped and k != "metadata"}
        if isinstance(row.get("metadata"), dict) and "metadata" not in mapped:
            metadata.update(row["metadata"])  # a row's own `metadata` object is merged, not nested
        elif "metadata" in row and "metadata" not in mapped:
            metadata["metadata"] = row["metadata"]
        return metadata

    def _keep(self, task: Task, *, explicit: bool, file: str, line: int) -> Task | None:
        where = f"{file}:{line}"
        if task.task_id in self._ids:
            if explicit:
                first = self._ids[task.task_id]
                return self.skip(file, line, f"duplicate task_id {task.task_id!r} (first at {first})")
            # Identical rows without ids: distinct ids, so their episode groups never merge.
            base, n = task.task_id, 2
            while f"{base}-{n}" in self._ids:
                n += 1
            task = task.model_copy(update={"task_id": f"{base}-{n}"})
        self._ids[task.task_id] = where
        self.tasks.append(task)
        return task


def split_tasks(tasks: list[Task], ratio: float, seed: int) -> tuple[list[Task], list[Task]]:
    """Shuffle with `seed` and cut: the first `round(n * ratio)` tasks train, the rest validate.

    Both sides keep at least one task when there are two or more; the original order is kept
    inside each side, so adding `limit` later does not reshuffle.
    """
    n = len(tasks)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    cut = round(n * ratio)
    if n >= 2:
        cut = min(max(cut, 1), n - 1)
    else:
        cut = n
    train_idx, val_idx = sorted(order[:cut]), sorted(order[cut:])
    return [tasks[i] for i in train_idx], [tasks[i] for i in val_idx]


# Where a relative path was taken from depends on who set it (ajet.config.loader): say both, since the
# message cannot tell which one the user wrote.
RELATIVE_PATHS_HINT = ("a relative path in the YAML resolves against the YAML's folder, one given on the command "
                       "line against the current directory")


def resolve_path(path: str, base_dir: str | Path | None) -> Path:
    """`path` made absolute against `base_dir` (the YAML's folder) when relative."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    return p.resolve()
