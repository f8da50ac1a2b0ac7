"""The appworld tutorial end to end on the tiny model: SFT on the demonstrations, one GRPO step
whose episodes each keep their own world, scored on the apps' final state."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "tutorial" / "example_appworld" / "appworld.yaml"
sys.path.insert(0, str(YAML.parent))
from appworld_env import INITIAL  # noqa: E402


def test_appworld_trains_on_the_tiny_model_and_judges_the_final_state(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "ajet.cli", "--conf", str(YAML), "model=tiny-random", "sft.epochs=0.2",
         "trainer.steps=1", "rollout.batch_tasks=2", "rollout.group_size=2", "rollout.max_tokens_per_turn=16",
         f"output_dir={out}"],
        capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["stage"] for r in rows] == ["sft", "sft", "grpo"]
    assert all(r["loss"] > 0 for r in rows[:2]) and rows[2]["episodes"] == 4
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 4 and not any(e["error"] for e in episodes)
    for e in episodes:
        # random weights make no tool call: every world ends as it began, and the judge says so
        # from the state (the task's changes are missing), whatever the reply's text
        assert e["metadata"]["final_state"] == INITIAL
        assert e["reward"] == 0.0 and e["reward_parts"]["missing"] >= 1 and e["success"] is False
        assert len(e["samples"]) == 1 and e["samples"][0]["agent"] == "assistant"
