"""The appworld tutorial end to end on the tiny model: SFT on the demonstrations, one GRPO step
whose episodes each keep their own world, scored on the apps' final state."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.e2e.cli import run_ajet
ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "tutorial" / "example_appworld" / "appworld.yaml"
sys.path.insert(0, str(YAML.parent))
from appworld_env import INITIAL  # noqa: E402


def test_appworld_trains_on_the_tiny_model_and_judges_the_final_state(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_ajet("--conf", str(YAML), "model=tiny-random", "sft.epochs=0.2", "sft.batch_size=8",
         "trainer.steps=1", "rollout.batch_tasks=2", "rollout.group_size=2", "rollout.max_tokens_per_turn=16",
         f"output_dir={out}")
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


async def test_replayed_reference_calls_change_the_state_and_score_full_marks(tmp_path: Path) -> None:
    """Each val task's reference calls, replayed as model output through the gateway (parsed tool
    calls), run on the episode's own world; the judge finds exactly the expected changes. A wrong
    contact id in one episode costs only that episode."""
    from ajet.config.loader import load_config
    from ajet.engine.factory import build_engine
    from ajet.rollout.stack import RolloutStack, load_tokenizer, settings_for
    from ajet.task_reader import read_tasks

    val = [json.loads(line) for line in (YAML.parent / "val.jsonl").read_text().splitlines()]
    rows = [next(r for r in val if r["metadata"]["category"] == c) for c in ("pay", "meet", "cancel")]
    wrong = json.loads(json.dumps(rows[0]))
    wrong["task_id"] += "-wrong"
    script = []
    for row in [*rows, wrong]:
        for call in row["answer"]["calls"]:
            args = dict(call["arguments"])
            if row is wrong and "contact_id" in args:
                args["contact_id"] = "c08" if args["contact_id"] != "c08" else "c07"
            script.append({"text": f"<tool_call>\n{json.dumps({'name': call['name'], 'arguments': args})}\n</tool_call>"})
        script.append({"text": "Done."})
    (tmp_path / "script.json").write_text(json.dumps(script))
    (tmp_path / "val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*rows, wrong]))
    cfg = load_config(YAML, ["model.path=tiny-random", "engine.type=replay", f"engine.replay_file={tmp_path / 'script.json'}",
                             f"task_reader.val={tmp_path / 'val.jsonl'}", "rollout.concurrency=1", f"output_dir={tmp_path}"])
    tokenizer = load_tokenizer(cfg)
    engine = build_engine(cfg, tokenizer)
    tasks = read_tasks(cfg.task_reader, "val", cfg.base_dir).tasks
    async with RolloutStack(cfg, engine, tokenizer, tmp_path) as stack:
        batch = await stack.runner.run(tasks, settings_for(cfg, "val"), show_progress=False)
    *right, bad = batch.episodes
    for episode in right:
        assert episode.error is None and episode.reward.total == 1.0 and episode.reward.is_success, episode.reward
        assert all("result" in c for c in episode.output.tool_calls) and len(episode.samples) == 1
    assert bad.reward.total == 0.0 and bad.reward.parts == {"missing": 1.0, "extra": 1.0}
    assert batch.summary()["tool_call_parse_failures"] == 0
