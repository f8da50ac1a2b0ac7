"""Training (not only eval) of the math tutorial on the tiny model: every stage runs, writes its
metrics and checkpoint, and the trained adapter differs from the untrained one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
MATH_YAML = ROOT / "tutorial" / "example_math_agent" / "math_agent.yaml"


def test_math_tutorial_trains_sft_then_grpo_on_the_tiny_model(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "ajet.cli", "--conf", str(MATH_YAML), "model=tiny-random", "algorithm=[sft,grpo]",
         "sft.epochs=0.25", "trainer.steps=2", "rollout.batch_tasks=2", "rollout.group_size=2",
         "rollout.max_tokens_per_turn=16", "rollout.temperature=1.5", "trainer.lr=1e-2", f"output_dir={out}"],
        capture_output=True, text=True, timeout=900, cwd="/")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    stages = [r["stage"] for r in rows]
    assert stages[0] == "sft" and stages[-2:] == ["grpo", "grpo"]
    assert all(r["loss"] > 0 for r in rows if r["stage"] == "sft")
    assert all(r["episodes"] == 4 for r in rows if r["stage"] == "grpo")
    # stdout is a pipe here: one plain progress line per step
    assert sum(line.startswith(("sft step ", "grpo step ")) for line in proc.stdout.splitlines()) == len(rows)
    checkpoints = sorted((out / "checkpoints").iterdir())
    assert checkpoints[-1].name == f"step-{len(rows):06d}"
    adapter = load_file(next(checkpoints[-1].rglob("adapter_model.safetensors")))
    lora_b = [v for k, v in adapter.items() if "lora_B" in k]
    assert lora_b and any(bool(v.abs().sum() > 0) for v in lora_b)  # LoRA B starts at zero: training moved it
    assert (out / "config.yaml").is_file() and (out / "episodes.jsonl").is_file()
