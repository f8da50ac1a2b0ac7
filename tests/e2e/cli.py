"""Running the installed CLI the way the tutorial tests do."""

from __future__ import annotations

import os
import subprocess
import sys


def run_ajet(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m ajet.cli ARGS` from `/` (so relative paths resolve against the YAML, not the
    repository); asserts it exited 0, showing the output's tail when not."""
    # The tiny model gains nothing from more threads; on a busy machine extra ones only spin.
    proc = subprocess.run([sys.executable, "-m", "ajet.cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd="/", env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc
