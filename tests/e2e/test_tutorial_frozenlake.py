"""The FrozenLake tutorial end to end on the tiny model: SFT on the shortest-path episodes, then GRPO
on multi-turn episodes whose calls merge into one sample each; the random model's invalid moves are
counted per episode and never stop the run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.cli import run_ajet
YAML = Path(__file__).resolve().parents[2] / "tutorial" / "example_frozenlake" / "frozenlake.yaml"


def test_frozenlake_trains_long_episodes_merged_into_one_sample_each(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_ajet("--conf", str(YAML), "model=tiny-random", "sft.epochs=0.25",
         "trainer.steps=1", "rollout.batch_tasks=2", "rollout.group_size=2", "rollout.max_turns=5",
         "rollout.max_tokens_per_turn=8", f"output_dir={out}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["stage"] == "sft" and rows[-1]["stage"] == "grpo" and rows[-1]["episodes"] == 4
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 4 and all(e["error"] is None for e in episodes)
    for e in episodes:
        calls, metrics = e["llm_calls"], e["metrics"]
        assert len(calls) == metrics["turns"] and all(c["agent"] == "player" for c in calls)
        # the whole episode is one sample (token merge), training every move it made
        assert e["merge"]["samples"] == 1 and e["merge"]["forks"] == {}
        assert e["merge"]["trained_tokens"] == e["tokens"]["generated"]
        # a random model's moves: every reply is counted as a move, a bump or an invalid action
        events = e["metadata"]["events"]
        assert metrics["invalid_actions"] == events.count("invalid") and len(events) == metrics["turns"]
        assert e["reward"] == metrics["goal"]  # the episode's return is the reward
    assert any(len(e["llm_calls"]) == 5 for e in episodes)  # at least one ran out the turn budget
