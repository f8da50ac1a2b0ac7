"""One run per folder: a lock file in the run folder, and unique time-named folders.

Two processes writing one run folder interleave their metrics, episodes and checkpoints (a run exits
0 with steps [1, 1, 2, 3]; the other crashes reading a half-written checkpoint). So a run (training,
`--resume`, `ajet eval` writing a folder) holds `<run folder>/.ajet.lock` while it works:

- the lock is the OS's (`fcntl.flock`), so two runs starting together cannot both take it, and it is
  released by the kernel when its process dies, even by kill -9;
- the file holds the holder's pid, host, start time and command, for the message a second run gets:
  it is refused at once (`ConfigError`, exit 2) naming the folder and that pid;
- a file left by a process that is gone (no one holds its flock) is taken over, with a note.

Default run names are `runs/<project>/<YYYYmmdd-HHMMSS>`: two runs started in the same second would
share one. `claim_new_folder` creates the folder exclusively and, when it exists, takes `<name>-2`,
`<name>-3`, ... instead.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from ajet.errors import ConfigError

LOCK_NAME = ".ajet.lock"


class RunLock:
    """`with RunLock(run_dir):` or `lock = RunLock(run_dir).acquire(); ...; lock.release()`."""

    def __init__(self, run_dir: str | Path, what: str = "run") -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self.what = what
        self.note: str | None = None  # set when a stale lock was taken over
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        if self.run_dir.exists() and not self.run_dir.is_dir() or any(p.is_file() for p in self.run_dir.parents):
            raise ConfigError(
                f"output_dir {str(self.run_dir)!r} is a file (or lies under one), not a folder: the {self.what} writes "
                "its config, metrics, episodes and checkpoints into a folder. Set output_dir to a new folder (or to "
                "a run folder, with --resume).")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise ConfigError(_busy_message(self.run_dir, holder, self.what)) from None
        except OSError:
            os.close(fd)
            raise
        previous = _read(fd)
        if previous.get("pid"):  # written by a process that no longer holds the lock: gone, or killed
            self.note = (f"{self.run_dir}: took over the lock of a previous {previous.get('what', 'run')} "
                         f"(pid {previous['pid']} on {previous.get('host', '?')}, started "
                         f"{previous.get('started', '?')}), which is no longer running")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "what": self.what,
                "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)[:500]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Empty the file and drop the lock. The file stays: removing it would let a run that opened it
        just before lock a file no one else sees, beside a newer one."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        value = json.loads(data.decode("utf-8")) if data.strip() else {}
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def _busy_message(run_dir: Path, holder: dict[str, Any], what: str) -> str:
    who = (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}, a {holder.get('what', 'run')} started "
           f"{holder.get('started', '?')}" if holder else "a process that has not written its pid yet")
    return (f"output_dir {str(run_dir)!r} is in use by another live run ({who}). Two runs writing one folder "
            f"corrupt each other's metrics, episodes and checkpoints, so this {what} is refused. Wait for it to "
            "finish (or stop it), or set output_dir to another folder.")


def claim_new_folder(path: str | Path) -> str:
    """Create the folder `path` exclusively and return it; when it exists (a run started in the same
    second), create and return `<path>-2`, `<path>-3`, ... instead."""
    base = Path(path)
    base.parent.mkdir(parents=True, exist_ok=True)
    candidate, n = base, 1
    while True:
        try:
            os.mkdir(candidate)
            return str(candidate)
        except FileExistsError:
            n += 1
            candidate = base.with_name(f"{base.name}-{n}")
