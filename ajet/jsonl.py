"""JSONL files ajet writes whole or appends to: `write_jsonl` (all or nothing, a temp file renamed),
`JsonlAppender` (every row flushed as it is written, so a crash or Ctrl-C loses nothing already written,
and a later run reads the file back to resume), `read_rows`. Beside safejson.py, below everything that
writes data (the MCP generator, the tutorials' data scripts, the swift backbone's datasets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ajet.errors import ConfigError


class JsonlAppender:
    """`with JsonlAppender(path) as out: out.write(row)`; rows already in the file are in `existing`."""

    def __init__(self, path: Path, fresh: bool = False) -> None:
        self.path = Path(path)
        if fresh and self.path.exists():
            self.path.unlink()
        _drop_partial_line(self.path)
        try:
            self.existing = read_rows(self.path)
        except ConfigError as error:
            raise ConfigError(f"{error} (or pass --fresh to start over)") from None
        self.written = 0
        self._file: Any = None

    def __enter__(self) -> JsonlAppender:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def write(self, row: dict[str, Any]) -> None:
        self._file.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._file.flush()
        self.written += 1


def _drop_partial_line(path: Path) -> None:
    """Cut a last line that a crash left without its newline, so appending starts on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file (none when it does not exist). A last line cut off by a
    crash is ignored; a bad line elsewhere is an error naming it, since resuming would skip it."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if number == len(lines):
                continue  # the line being written when the previous run stopped
            raise ConfigError(f"{path}:{number} is not a JSON line; fix or delete the file") from None
        if isinstance(row, dict):
            rows.append(row)
    return rows


def dropped_path(out: Path) -> Path:
    """Where the rows dropped on the way to `out` are kept, with their reasons."""
    return out.with_name(out.name + ".dropped.jsonl")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as a JSONL file, written whole or not at all (a temp file renamed over `path`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)


def write_jsonl_files(out_dir: Path, files: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """Each list of `files` as `<out_dir>/<name>.jsonl` (a tutorial's train, val and sft files); the
    row count of each."""
    for name, rows in files.items():
        write_jsonl(Path(out_dir) / f"{name}.jsonl", rows)
    return {name: len(rows) for name, rows in files.items()}
