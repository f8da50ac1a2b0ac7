"""`ajet serve` in a real subprocess for end-to-end tests: a free port on 127.0.0.1, output to a log file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def ajet_serve(model: str, log: Path, *flags: str, served_name: str | None = "tiny",
               env: dict[str, str] | None = None) -> Iterator[str]:
    """`ajet serve --model MODEL --served-model-name NAME FLAGS...` (None: served as MODEL); yields its
    /v1 URL once /health answers (open with or without an API key), and stops the process at the end.
    The output goes to `log` (a pipe nobody reads could fill and block the server). env: extra
    environment variables (VLLM_API_KEY)."""
    port = free_port()
    # The tiny model gains nothing from more threads; an API key of the caller's shell must not leak in.
    env = {**{k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}, "OMP_NUM_THREADS": "1", **(env or {})}
    name = ["--served-model-name", served_name] if served_name else []
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ajet.cli", "serve", "--model", model, "--port", str(port),
                                 *name, "--dtype", "float32", *flags],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(proc, log, lambda: httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200,
                   "ajet serve")
        yield url
    finally:
        stop(proc)


def wait_ready(proc: subprocess.Popen, log: Path, ready: Callable[[], bool], what: str, timeout_s: float = 60,
               poll_s: float = 0.2) -> None:
    """Poll `ready()` (an HTTP error counts as not yet) until it is true; raise with the process's log
    when the process exits first or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if ready():
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout_s:g} s:\n{log.read_text()}")
        time.sleep(poll_s)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
