"""How the viewer opens a file of a run folder: a regular file inside that folder, or a refusal saying why.

A run folder is data from anywhere (copied from a cluster, shared by a colleague), and every request of
`ajet view` reads it. A FIFO named episodes.jsonl blocked `/api/runs` forever (opening it waits for a
writer; the server then ignored SIGTERM), a symlink to /dev/zero grew the reader's memory until
MemoryError, and a symlink to /etc/... would serve any file the viewer's user can read. So a file is
opened without blocking, checked on its open descriptor (no window between check and read), and refused
unless it is a regular file whose real path lies inside the run folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO


class RefusedFile(OSError):
    """A run-folder file the viewer will not read; str() says why."""


def open_regular(path: Path, root: Path) -> BinaryIO:
    """`path` opened for binary reading; RefusedFile when it is not a regular file inside `root`
    (FileNotFoundError when it does not exist)."""
    real = os.path.realpath(path)
    inside = os.path.realpath(root)
    if os.path.commonpath([real, inside]) != inside:
        raise RefusedFile(f"{path.name} is a link to {real}, outside the run folder: not read")
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a folder" if stat.S_ISDIR(mode) else "not a file")
        raise RefusedFile(f"{path.name} is {kind}, not a regular file: not read")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_small(path: Path, root: Path, max_bytes: int) -> bytes:
    """The whole of a small file (config.yaml, eval.json); RefusedFile when it is larger than max_bytes."""
    with open_regular(path, root) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise RefusedFile(f"{path.name} is larger than {max_bytes:,} bytes: not read")
    return data
