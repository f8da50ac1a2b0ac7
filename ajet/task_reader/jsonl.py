"""The `jsonl` task reader: one JSON object per line; bad lines are skipped with file:line.

A UTF-8 byte-order mark at the start of the file (Windows editors write one) is not part of the
first row. Lines nested deeper than `ajet.safejson.MAX_DEPTH` or holding text that is not valid
Unicode are bad lines like any other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ajet import safejson
from ajet.errors import TaskReaderError
from ajet.task_reader.base import RELATIVE_PATHS_HINT, TaskBuilder, TaskSet, resolve_path


def read_jsonl_source(cfg: Any, which: str, base_dir: str | Path | None, limit: int | None) -> TaskSet:
    """Read the `which` ('train' or 'val') file named in `cfg` (a TaskReaderConfig)."""
    name = cfg.train if which == "train" else cfg.val
    if name is None:
        raise TaskReaderError(f"task_reader.{which} is not set; name the {which} JSONL file")
    return read_jsonl_file(resolve_path(name, base_dir), cfg.fields, limit, key=f"task_reader.{which}")


def read_jsonl_file(path: Path, fields: Any, limit: int | None = None, key: str = "task_reader.train") -> TaskSet:
    """Map every line of `path` to a Task with `fields`; stop after `limit` good tasks."""
    if not path.exists():
        raise TaskReaderError(f"{key}: task file {str(path)!r} does not exist; check the path "
                              f"({RELATIVE_PATHS_HINT})")
    if not path.is_file():
        raise TaskReaderError(f"{key}: {str(path)!r} is not a file; name a .jsonl file")
    file = str(path)
    builder = TaskBuilder(fields, source=f"jsonl:{file}")
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, 1):
            try:
                text = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                builder.skip(file, line_no, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
                continue
            if not text.strip():
                continue  # blank lines (a trailing newline, spacing) are not rows
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                builder.skip(file, line_no, f"invalid JSON: {exc.msg} (column {exc.colno})")
                continue
            except RecursionError:
                builder.skip(file, line_no, f"invalid JSON: nested deeper than {safejson.MAX_DEPTH} levels")
                continue
            except ValueError as exc:  # e.g. an integer of more than 4300 digits
                builder.skip(file, line_no, f"invalid JSON: {exc}")
                continue
            builder.add_row(row, file, line_no)
            if limit is not None and len(builder.tasks) >= limit:
                break
    return builder.finish()
