"""The countdown tutorial end to end on the tiny model: the unmodified AgentScope agent trains through
the gateway (SFT then GRPO), streams through it, sends exactly the prompt the SFT demonstrations
hold, and an agent that raises, hangs or never calls the model is counted, not fatal."""

from __future__ import annotations

import json
from pathlib import Path

from ajet.plugins import load_object
from tests.e2e.cli import run_ajet
ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tutorial" / "example_countdown"
YAML = FOLDER / "countdown.yaml"
FAULTS = Path(__file__).resolve().parent / "countdown_faults.py"


def test_countdown_trains_the_agentscope_agent_on_the_tiny_model(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_ajet("--conf", str(YAML), "model=tiny-random", "sft.epochs=0.1", "trainer.steps=1", "rollout.batch_tasks=2",
          "rollout.group_size=2", "rollout.max_tokens_per_turn=8", f"output_dir={out}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["stage"] for r in rows][0] == "sft" and rows[-1]["stage"] == "grpo"
    assert rows[-1]["episodes"] == 4
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 4 and all(e["error"] is None for e in episodes)
    # every call was the AgentScope agent's, under its own agent name, and trained
    calls = [c for e in episodes for c in e["llm_calls"]]
    assert len(calls) == 4 and all(c["agent"] == "solver" and c["trained"] for c in calls)
    assert all(e["reward_parts"].keys() == {"solved", "format"} for e in episodes)  # the plugin judge scored them


def test_streaming_the_sft_prompt_and_bad_agents_on_the_gateway(tmp_path: Path, tiny_tokenizer) -> None:
    # By file path: every tutorial has a make_data.py, and another test may have imported its own first.
    demonstration = load_object(f"{FOLDER / 'make_data.py'}:search_demonstration")  # the YAML's style

    from ajet.render import ChatRenderer

    run_ajet("eval", "--conf", str(YAML), "model=tiny-random", "eval.limit=5", f"workflow={FAULTS}:FaultyCountdown",
          "workflow_args.stream=true", "rollout.retries=0", "rollout.episode_timeout_s=5",
          "rollout.max_tokens_per_turn=8", f"output_dir={tmp_path}")
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["episodes"] == 5 and report["failed"] == 2 and report["timed_out"] == 1
    assert report["errors"] == {"RuntimeError": 1, "TimeoutError": 1}
    episodes = {e["task"]["task_id"][-3:]: e for e in map(json.loads, (tmp_path / "eval_episodes.jsonl").read_text().splitlines())}
    silent = episodes["003"]
    assert silent["error"] is None and silent["llm_calls"] == [] and silent["reward"] == 0.0  # judged, scored 0
    for key in ("000", "004"):  # the real agent, streamed through the gateway
        episode = episodes[key]
        assert episode["error"] is None and len(episode["llm_calls"]) == 1
        # AgentScope's request renders to exactly the prompt of the SFT demonstration of that puzzle
        demo = demonstration(episode["task"])
        rendered = ChatRenderer(tiny_tokenizer).encode_conversation(demo["messages"], None)
        prompt_ids = episode["llm_calls"][0]["prompt_ids"]
        trained_from = next(i for i, s in enumerate(rendered.segments) if s.author == "llm")
        assert rendered.token_ids[:len(prompt_ids)] == prompt_ids
        assert sum(len(s.token_ids) for s in rendered.segments[:trained_from]) == len(prompt_ids)
