"""A byte-offset index of a JSON Lines file that a live run may still be appending to.

`refresh()` reads only the bytes appended since the last call, one line at a time, and keeps for each
line its offset, its length and a small summary (what the episode table filters and sorts on); a
full row is read back from disk by its offset when it is asked for. So a run of thousands of
episodes is never held in memory, and a growing file costs only its new lines.

A line that is not a JSON object is kept as corrupt; a last line without its newline (a writer
caught mid-write, or killed) is shown as half-written and read again on the next refresh. A file
that shrank or was replaced (a resumed run rewrites its logs) is indexed again from the start.

Everything is bounded, since a run folder may come from anywhere: only a regular file inside the run
folder is read (ajet/view/safe_open.py); a line longer than `MAX_LINE_BYTES` is a corrupt row, skipped
without being held in memory; a line nested deeper than `MAX_DEPTH` (or so deep that the parser gives up)
is a corrupt row; and one refresh reads at most `MAX_REFRESH_BYTES`, the next request going on from there.
Whatever fails on one line, the lines after it are still indexed.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ajet.safejson import find_problem
from ajet.view.safe_open import open_regular

TEXT_SHOWN = 200  # characters of a corrupt line shown to the user
MAX_LINE_BYTES = 32 * 1024 * 1024  # an episode of a hundred 8k-token calls is ~5 MB
MAX_DEPTH = 200  # episodes nest a dozen levels; a workflow's metadata may add some
MAX_REFRESH_BYTES = 256 * 1024 * 1024  # read by one request; the next one goes on
_CHUNK = 1024 * 1024


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
    except RecursionError:
        return None, f"nested deeper than {MAX_DEPTH} levels (the parser gave up)"
    if not isinstance(row, dict):
        return None, f"not a JSON object but a {type(row).__name__}"
    if find_problem(row, max_depth=MAX_DEPTH, strings=False):
        return None, f"nested deeper than {MAX_DEPTH} levels"
    return row, None


class JsonlIndex:
    """Incremental index of one JSONL file; thread-safe (the API serves requests from a thread pool)."""

    def __init__(self, path: Path, summarize: Callable[[dict[str, Any]], dict[str, Any]],
                 root: Path | None = None) -> None:
        self.path = path
        self.root = root if root is not None else path.parent  # the run folder: nothing outside it is read
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
        self.problem: str | None = None  # why the file is not read (a FIFO, a link out of the folder, ...)
        self.behind = 0  # bytes not indexed yet (a refresh reads at most MAX_REFRESH_BYTES)

    def refresh(self) -> None:
        """Index whatever was appended since the last call (at most MAX_REFRESH_BYTES of it)."""
        with self._lock:
            try:
                handle = open_regular(self.path, self.root)
            except FileNotFoundError:
                self._reset()
                return
            except OSError as exc:  # RefusedFile, or unreadable: say why, read nothing
                self._reset()
                self.problem = str(exc) if exc.filename is None else f"{self.path.name}: {exc.strerror}"
                return
            with handle:
                stat = os.fstat(handle.fileno())
                identity = (stat.st_dev, stat.st_ino)
                if identity != self._identity or stat.st_size < self._end:
                    self._reset()
                    self._identity = identity
                if stat.st_size == self._size:
                    return
                self._tail = None
                self._read_from(handle, stat.st_size)

    def _read_from(self, handle, size: int) -> None:
        handle.seek(self._end)
        offset, budget = self._end, MAX_REFRESH_BYTES
        while budget > 0:
            raw = handle.readline(MAX_LINE_BYTES + 1)  # bytes up to and including the newline, bounded
            if not raw:
                break
            length = len(raw)
            if length > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                skipped, complete = _skip_line(handle)  # too long to hold: count it, keep only what is shown
                length += skipped
                line: Line | None = Line(self._seen + 1, offset, length, None,
                                         f"a line of {length:,} bytes, over the viewer's limit of {MAX_LINE_BYTES:,}")
            else:
                complete = raw.endswith(b"\n")
                line = self._index_line(self._seen + 1, offset, raw, complete)
            if not complete:
                self._tail = line
                break
            self._seen += 1
            offset += length
            budget -= length
            self._end = offset
            if line is not None:  # blank lines are skipped, like the project's readers do
                self._complete.append(line)
        self.behind = max(size - self._end - (self._tail.length if self._tail else 0), 0)
        self._size = size if self.behind == 0 else -1  # not at the end yet: the next refresh goes on

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
            with open_regular(self.path, self.root) as handle:
                handle.seek(line.offset)
                # a corrupt line is shown by its head only: it may be a line of gigabytes
                raw = handle.read(line.length if line.summary is not None else min(line.length, 4 * TEXT_SHOWN))
        except OSError as exc:
            return {"corrupt": True, "line": line.number, "text": "", "reason": f"unreadable: {exc}"}
        if line.summary is None:
            return corrupt_record(line.number, raw, line.error or "corrupt")
        row, error = parse_line(raw)
        if row is None:  # the file changed under us (a resume rewrote it): say so, never a 500
            return corrupt_record(line.number, raw, f"changed since indexed: {error}")
        return row


def _skip_line(handle) -> tuple[int, bool]:
    """Read past the rest of an over-long line in chunks, holding none of it: (bytes skipped, whether
    it ended with a newline)."""
    skipped = 0
    while True:
        chunk = handle.readline(_CHUNK)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped, chunk.endswith(b"\n")
