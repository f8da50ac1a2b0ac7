"""A byte-offset index of a JSON Lines file that a live run may still be appending to.

`refresh()` reads only the bytes appended since the last call, one line at a time, and keeps for each
line its offset, its length and a small summary (what the episode table filters and sorts on); a
full row is read back from disk by its offset when it is asked for. So a run of thousands of
episodes is never held in memory, and a growing file costs only its new lines.

A line that is not a JSON object is kept as corrupt; a last line without its newline (a writer
caught mid-write, or killed) is shown as half-written and read again on the next refresh. A file
that shrank or was replaced (a resumed run rewrites its logs) is indexed again from the start.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEXT_SHOWN = 200  # characters of a corrupt line shown to the user


@dataclass
class Line:
    number: int  # 1-based, as an editor shows it
    offset: int
    length: int  # bytes, newline included when there is one
    summary: dict[str, Any] | None  # None: the line is corrupt
    error: str | None = None


def corrupt_record(number: int, raw: bytes, reason: str) -> dict[str, Any]:
    """What the viewer shows for a line it cannot read."""
    text = raw.decode("utf-8", errors="replace").rstrip("\n")
    return {"corrupt": True, "line": number, "text": text[:TEXT_SHOWN], "reason": reason}


def parse_line(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(row, None) for a JSON object; (None, why not) otherwise."""
    try:
        row = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(row, dict):
        return None, f"not a JSON object but a {type(row).__name__}"
    return row, None


class JsonlIndex:
    """Incremental index of one JSONL file; thread-safe (the API serves requests from a thread pool)."""

    def __init__(self, path: Path, summarize: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.path = path
        self.summarize = summarize
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._complete: list[Line] = []  # lines that ended with a newline: never read again
        self._tail: Line | None = None  # the last line while it has no newline yet
        self._end = 0  # byte offset after the last complete line
        self._seen = 0  # complete lines read, blank ones included (line numbers count them)
        self._identity: tuple[int, int] | None = None  # (device, inode)
        self._size = -1

    def refresh(self) -> None:
        """Index whatever was appended since the last call."""
        with self._lock:
            try:
                stat = os.stat(self.path)
            except OSError:
                self._reset()
                return
            identity = (stat.st_dev, stat.st_ino)
            if identity != self._identity or stat.st_size < self._end:
                self._reset()
                self._identity = identity
            if stat.st_size == self._size:
                return
            self._size = stat.st_size
            self._tail = None
            with open(self.path, "rb") as handle:
                handle.seek(self._end)
                offset = self._end
                for raw in handle:  # bytes up to and including each newline; the last may lack it
                    complete = raw.endswith(b"\n")
                    line = self._index_line(self._seen + 1, offset, raw, complete)
                    if not complete:
                        self._tail = line
                        break
                    self._seen += 1
                    offset += len(raw)
                    self._end = offset
                    if line is not None:  # blank lines are skipped, like the project's readers do
                        self._complete.append(line)

    def _index_line(self, number: int, offset: int, raw: bytes, complete: bool) -> Line | None:
        if not raw.strip():
            return None
        row, error = parse_line(raw)
        if row is None:
            reason = "half-written (no newline yet)" if not complete else error
            return Line(number, offset, len(raw), None, reason)
        try:
            summary = self.summarize(row)
        except Exception as exc:  # noqa: BLE001 - a row of an unexpected shape is shown, not fatal
            return Line(number, offset, len(raw), None, f"unexpected row: {type(exc).__name__}: {exc}")
        return Line(number, offset, len(raw), summary)

    def lines(self) -> list[Line]:
        """Every indexed line, the half-written tail last (a copy: safe to use while refreshing)."""
        with self._lock:
            return self._complete + ([self._tail] if self._tail else [])

    def line(self, number: int) -> Line | None:
        lines = self.lines()
        # blank lines are skipped, so line numbers have gaps: search instead of indexing
        lo, hi = 0, len(lines)
        while lo < hi:
            mid = (lo + hi) // 2
            if lines[mid].number < number:
                lo = mid + 1
            else:
                hi = mid
        return lines[lo] if lo < len(lines) and lines[lo].number == number else None

    def read(self, line: Line) -> dict[str, Any]:
        """The full row of an indexed line, or its corrupt record."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(line.offset)
                raw = handle.read(line.length)
        except OSError as exc:
            return {"corrupt": True, "line": line.number, "text": "", "reason": f"unreadable: {exc}"}
        if line.summary is None:
            return corrupt_record(line.number, raw, line.error or "corrupt")
        row, error = parse_line(raw)
        if row is None:  # the file changed under us (a resume rewrote it): say so, never a 500
            return corrupt_record(line.number, raw, f"changed since indexed: {error}")
        return row
