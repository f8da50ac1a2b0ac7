"""The Python math tutorial end to end on the tiny model: a short SFT + GRPO run, and an `ajet eval` whose
completions are replayed (a correct program, an infinite loop, a fork bomb, a gigabyte of output), so the
real gateway, tool-call parser, sandbox and judge run and every containment is counted in its episode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ajet.sandbox import bwrap
from tests.e2e.cli import run_ajet

# The tutorial's workflow refuses to start without bubblewrap (sandbox: bwrap).
pytestmark = pytest.mark.skipif(bwrap.unavailable() is not None, reason=f"no OS sandbox: {bwrap.unavailable()}")
ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tutorial" / "example_math_python"
YAML = FOLDER / "math_python.yaml"


def test_trains_sft_then_grpo_on_the_tiny_model(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_ajet("--conf", str(YAML), "model=tiny-random", "algorithm=[sft,grpo]", "sft.epochs=0.125", "sft.batch_size=8",
             "trainer.steps=1", "rollout.batch_tasks=2", "rollout.group_size=2", "rollout.max_tokens_per_turn=16",
             "rollout.max_turns=2", f"output_dir={out}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["stage"] for r in rows] == ["sft", "grpo"] and rows[0]["loss"] > 0 and rows[1]["episodes"] == 4
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert all("code_runs" in e["metrics"] for e in episodes)  # counted even when no code ran
    assert (out / "checkpoints" / "step-000002").is_dir()


def _call(code: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"


def test_bad_programs_are_contained_and_counted_per_episode(tmp_path: Path) -> None:
    val = [json.loads(line) for line in (FOLDER / "val.jsonl").read_text().splitlines()[:4]]
    first = val[0]
    programs = [first["metadata"]["code"], "while True:\n    pass", "import os\nwhile True:\n    os.fork()",
                "while True:\n    print('x' * 1000000)"]
    script = []
    for i, code in enumerate(programs):
        script += [{"text": _call(code)}, {"text": f"The answer is \\boxed{{{first['answer'] if i == 0 else -1}}}."}]
    (tmp_path / "script.json").write_text(json.dumps(script))
    (tmp_path / "val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in val))
    run_ajet("eval", "--conf", str(YAML), "model.path=tiny-random", "engine.type=replay",
          f"engine.replay_file={tmp_path / 'script.json'}", f"task_reader.val={tmp_path / 'val.jsonl'}",
          "rollout.concurrency=1", "workflow_args.wall_s=1.5", f"output_dir={tmp_path / 'eval'}")
    episodes = [json.loads(line) for line in (tmp_path / "eval" / "eval_episodes.jsonl").read_text().splitlines()]
    assert [e["error"] for e in episodes] == [None] * 4  # nothing crashed the run
    assert [e["reward"] for e in episodes] == [1.0, 0.0, 0.0, 0.0]
    counted = [{k: v for k, v in e["metrics"].items() if v} for e in episodes]
    assert counted == [{"code_runs": 1, "code_ok": 1}, {"code_runs": 1, "code_timeout": 1},
                       {"code_runs": 1, "code_blocked": 1}, {"code_runs": 1, "code_output_limit": 1}]
    tool_replies = [next(m["content"] for m in e["messages"] if m["role"] == "tool") for e in episodes]
    assert tool_replies[0] == str(first["answer"])
    assert "time limit" in tool_replies[1] and "not allowed" in tool_replies[2] and "printed too much" in tool_replies[3]
    assert len(tool_replies[3]) < 400  # a gigabyte was asked for; a few hundred characters reach the model
