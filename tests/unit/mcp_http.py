"""An MCP server script run over streamable HTTP in a subprocess, for the tests that check the HTTP form."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_mcp_server(script: str, cwd: Path, timeout_s: float = 120) -> Iterator[str]:
    """`python <script> --http PORT` in `cwd`; yields its http://127.0.0.1:PORT/mcp once it accepts connections."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, script, "--http", str(port)], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s  # a loaded machine starts subprocesses slowly
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, f"{script} --http did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
