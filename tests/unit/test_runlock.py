"""The run folder lock (ajet/runlock.py) against a real second process, and exclusive time-named folders."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.errors import ConfigError
from ajet.runlock import RunLock, claim_new_folder

ROOT = Path(__file__).resolve().parents[2]
HOLDER = "import sys, time; from ajet.runlock import RunLock; RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(120)"


def test_a_folder_held_by_a_live_process_is_refused_then_taken_over_once_it_dies(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError) as refused:
            RunLock(tmp_path, "eval").acquire()
        message = str(refused.value)
        assert message.startswith(f"output_dir {str(tmp_path)!r} is in use by another live run (pid {holder.pid} on ")
        assert "so this eval is refused. Wait for it to finish (or stop it), or set output_dir to another folder." in message
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # kill -9: the kernel drops its flock, its pid stays in the file
        holder.wait()
    with RunLock(tmp_path) as lock:
        assert lock.note is not None and f"pid {holder.pid}" in lock.note and "no longer running" in lock.note
        assert f'"pid": {os.getpid()}' in (tmp_path / ".ajet.lock").read_text()
    assert (tmp_path / ".ajet.lock").read_text() == ""
    with RunLock(tmp_path) as again:  # released cleanly: no note
        assert again.note is None


def test_the_same_process_cannot_hold_a_folder_twice(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(ConfigError, match=f"pid {os.getpid()}"):
            RunLock(tmp_path).acquire()


def test_claim_new_folder_never_returns_an_existing_folder(tmp_path):
    base = tmp_path / "runs" / "20250101-120000"
    assert [claim_new_folder(base) for _ in range(3)] == [str(base), f"{base}-2", f"{base}-3"]
