"""`ajet export` killed with kill -9 leaves its staging folder; the next export into that folder removes it
(its pid is dead), never the staging folder of an export still running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ajet.trainer.checkpoint import save_checkpoint
from ajet.trainer.optim import build_optimizer
from ajet.config.schema import TrainerConfig
from tests.unit.test_export import trained_lora_policy

ROOT = Path(__file__).resolve().parents[2]


def test_kill_9_during_export_leaves_nothing_after_the_next_export(tmp_path):
    policy = trained_lora_policy()
    ckpt = save_checkpoint(tmp_path / "run", 1, policy, build_optimizer(policy.model.parameters(), TrainerConfig()), None)
    exports = tmp_path / "exports"
    killed = subprocess.Popen([sys.executable, "-m", "ajet.cli", "export", "--checkpoint", str(ckpt), "--out",
                               str(exports / "merged"), "--merge"], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.time() + 120
    while not (exports.is_dir() and any(p.name.startswith(".merged.tmp-") for p in exports.iterdir())):
        assert killed.poll() is None and time.time() < deadline, "the export ended before it could be killed"
        time.sleep(0.01)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    left = [p.name for p in exports.iterdir()]
    assert any(name.startswith(f".merged.tmp-{killed.pid}-") for name in left)

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # an export still at work
    try:
        busy = exports / f".other.tmp-{live.pid}-abc123"
        busy.mkdir()
        proc = subprocess.run([sys.executable, "-m", "ajet.cli", "export", "--checkpoint", str(ckpt), "--out",
                               str(exports / "adapter")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert sorted(p.name for p in exports.iterdir()) == sorted(["adapter", busy.name])
    finally:
        live.kill()
        live.wait()
