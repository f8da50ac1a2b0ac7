"""benchmarks/rl_gain.py end to end in --quick mode on the tiny model: every phase runs as a subprocess of
the CLI, the row lands in the results file, the summary's last line is there, and a second call with the
same --work reuses every finished phase; a third asking for one more RL step extends each RL run (ajet
--resume) and evaluates it again, the 1-step evals kept beside; a fourth scores the same runs on another
held-out file (--heldout)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_rl_gain_quick_on_the_tiny_model(tmp_path: Path) -> None:
    out, work = tmp_path / "rl_gain.jsonl", tmp_path / "work"
    command = [sys.executable, str(ROOT / "benchmarks" / "rl_gain.py"), "--task", "countdown", "--quick",
               "--set", "model.path=tiny-random", "--work", str(work), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    row = json.loads(out.read_text())
    assert row["task"] == "countdown" and row["quick"] and row["seeds"] == [1, 2] and row["tasks"] == 6
    assert row["measure"] == "success_rate" and len(row["rl"]) == 2 and row["heldout_tasks"] == 128
    assert {p.name for p in work.iterdir()} >= {"sft", "sft-model", "eval-sft", "rl-seed1", "rl-seed2",
                                               "eval-rl-seed1", "eval-rl-seed2"}
    # the random model solves nothing, before RL or after: a gain of 0, its interval [0, 0], not counted
    assert (row["gain_points"], row["ci_low"], row["ci_high"], row["significant"]) == (0.0, 0.0, 0.0, False)
    # a --set run is a variant: listed under its task, not counted in the last line
    assert "variant (not counted below): --set model.path=tiny-random" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "rl_gain_points_mean=0.0 tasks_with_gain=0/0"
    again = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert again.returncode == 0 and len(out.read_text().splitlines()) == 2
    assert json.loads(out.read_text().splitlines()[1])["phase_minutes"]["rl"] < 0.1  # nothing trained again
    longer = subprocess.run([*command, "--set", "trainer.steps=2"], capture_output=True, text=True, timeout=900,
                            cwd=ROOT)
    assert longer.returncode == 0, longer.stdout[-3000:] + longer.stderr[-3000:]
    row = json.loads(out.read_text().splitlines()[2])
    assert row["task"] == "countdown" and row["reused"]["rl-seed1"] == ["extended from step 1", "+trainer.steps=2"]
    assert "resumed from" in (work / "rl-seed1.log").read_text()
    for seed in (1, 2):
        assert (work / f"rl-seed{seed}" / "checkpoints" / "step-000002").is_dir()
        assert (work / f"eval-rl-seed{seed}-step1" / "eval.json").is_file()
        assert (work / f"eval-rl-seed{seed}" / "eval.json").is_file()
    # a second held-out file: the trained runs reused, the models scored on it into folders named after it
    fresh = subprocess.run([*command, "--set", "trainer.steps=2", "--heldout", "heldout2.jsonl"], capture_output=True,
                           text=True, timeout=900, cwd=ROOT)
    assert fresh.returncode == 0, fresh.stdout[-3000:] + fresh.stderr[-3000:]
    row = json.loads(out.read_text().splitlines()[3])
    assert row["heldout_file"] == "heldout2.jsonl" and row["heldout_tasks"] == 128 and row["phase_minutes"]["rl"] < 0.1
    assert (work / "eval-sft-heldout2" / "eval.json").is_file() and (work / "eval-rl-seed2-heldout2" / "eval.json").is_file()
    assert "--heldout heldout2.jsonl" in fresh.stdout
