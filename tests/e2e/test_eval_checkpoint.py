"""`ajet eval --model RUN_FOLDER` on a debug-backbone run: its newest checkpoint is merged into a model
folder once (ajet.export.model_folder), evaluated, and the same merged folder is what the local
endpoint BFCL uses (ajet.serving.local.model_folder) would load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ajet.serving.local import model_folder

ROOT = Path(__file__).resolve().parents[2]
MATH_YAML = ROOT / "tutorial" / "example_math_agent" / "math_agent.yaml"


def _ajet(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "ajet.cli", *args], capture_output=True, text=True, timeout=600,
                          cwd="/", env={**os.environ, "COLUMNS": "1000"})  # rich wraps long paths otherwise
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def test_eval_merges_the_newest_checkpoint_of_a_run_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _ajet("--conf", str(MATH_YAML), "model=tiny-random", "algorithm=sft", "sft.epochs=0.25", f"output_dir={run}")
    (checkpoint,) = sorted((run / "checkpoints").iterdir())[-1:]
    out = tmp_path / "eval"
    proc = _ajet("eval", "--conf", str(MATH_YAML), "model=tiny-random", "--model", str(run), "eval.limit=2",
                 "rollout.max_tokens_per_turn=8", f"output_dir={out}")
    merged = out / f"model-{checkpoint.name}"
    assert f"evaluating checkpoint {checkpoint} (merged into {merged})" in proc.stdout
    assert (merged / "config.json").is_file() and not (merged / "adapter_config.json").exists()  # merged, not an adapter
    report = json.loads((out / "eval.json").read_text())
    assert report["model"] == str(merged) and report["episodes"] == 2
    assert model_folder(str(run), out) == str(merged)  # already merged: reused as is
    assert model_folder("tiny-random", out) == "tiny-random"  # a model name passes through
