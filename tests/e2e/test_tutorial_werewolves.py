"""The werewolves tutorial end to end on the tiny model: SFT on the scripted village, one GRPO step
of real games against the frozen opponent (a second tiny model behind an in-process endpoint), and
only the trained side's calls in the samples."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.cli import run_ajet
ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "tutorial" / "example_werewolves" / "werewolves.yaml"
VILLAGE = {"seer", "villager1", "villager2"}


def test_werewolves_trains_only_the_village_on_the_tiny_model(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_ajet("--conf", str(YAML), "model=tiny-random",
         "workflow_args.frozen_model=tiny-random", "sft.epochs=0.05", "trainer.steps=1", "rollout.batch_tasks=2",
         "rollout.group_size=2", "rollout.max_tokens_per_turn=6", "workflow_args.max_tokens=6", f"output_dir={out}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["stage"] for r in rows] == ["sft", "grpo"]
    assert rows[0]["loss"] > 0 and rows[1]["episodes"] == 4
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 4 and not any(e["error"] for e in episodes)
    for e in episodes:
        meta = e["metadata"]
        calls = e["llm_calls"]
        # the gateway saw only the village's calls, all trained; the wolves' went to the frozen model
        assert calls and {c["agent"] for c in calls} <= VILLAGE and all(c["trained"] for c in calls)
        assert len(calls) == e["metrics"]["calls_trained"] and e["metrics"]["calls_frozen"] > 0
        # one merged sample per village agent that acted: its whole game is one growing conversation
        agents = [s["agent"] for s in e["samples"]]
        assert sorted(agents) == sorted({c["agent"] for c in calls})
        assert meta["winner"] in ("village", "wolves") and set(meta["agents"].values()) == VILLAGE | {"wolf1", "wolf2"}
        # random weights never write a valid action line: every one is counted, none crashes the game
        assert sum(meta["invalid"].values()) == sum(meta["actions"].values())
        assert e["reward"] == -0.5 and e["success"] is False
