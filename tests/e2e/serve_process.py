"""`ajet serve` in a real subprocess for end-to-end tests: a free port on 127.0.0.1, output to a log file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
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
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"ajet serve exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"ajet serve did not answer /health within 60 s:\n{log.read_text()}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
