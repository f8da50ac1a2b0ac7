"""The tutorials end to end: `ajet eval` on both (tiny model, fast; real SmolLM2, slow), and the whole
tool path (gateway → parsed tool call → real MCP server → tool result → answer → judge) driven by the
replay engine, with the resulting samples checked token by token."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.engine.factory import build_engine
from ajet.rollout.stack import RolloutStack, load_tokenizer, settings_for
from ajet.task_reader import read_tasks

ROOT = Path(__file__).resolve().parents[2]
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
MATH_YAML = ROOT / "tutorial" / "example_math_agent" / "math_agent.yaml"


def _eval(yaml: Path, out: Path, *overrides: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "ajet.cli", "eval", "--conf", str(yaml), f"output_dir={out}",
                           *overrides], capture_output=True, text=True, timeout=1200, cwd="/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reward mean" in proc.stdout and "success rate" in proc.stdout
    return json.loads((out / "eval.json").read_text())


@pytest.mark.parametrize("yaml", [TOOL_YAML, MATH_YAML], ids=["tool", "math"])
def test_ajet_eval_on_the_tiny_model(yaml, tmp_path):
    report = _eval(yaml, tmp_path, "model.path=tiny-random", "eval.limit=3", "rollout.max_tokens_per_turn=16")
    assert report["tasks"] == 3 and report["episodes"] == 3 and report["failed"] == 0
    assert report["merge"]["llm_calls"] >= 3
    lines = (tmp_path / "eval_episodes.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["llm_calls"] for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize("yaml", [TOOL_YAML, MATH_YAML], ids=["tool", "math"])
def test_ajet_eval_on_the_real_smollm2(yaml, tmp_path):
    report = _eval(yaml, tmp_path, "eval.limit=3", "rollout.max_tokens_per_turn=64")
    assert report["episodes"] == 3 and report["failed"] == 0
    assert report["tokens_per_episode"] > 5  # the real model says something


async def test_tool_path_with_replayed_completions_scores_full_marks(tmp_path):
    """Each val task's expected calls, replayed as model output, run on the real MCP server and score 1."""
    val = [json.loads(line) for line in (TOOL_YAML.parent / "val.jsonl").read_text().splitlines()[:4]]
    script, texts = [], []
    for row in val:
        turns = [f"<tool_call>\n{json.dumps({'name': c['name'], 'arguments': c['arguments']})}\n</tool_call>"
                 for c in row["answer"]["calls"]]
        turns.append(f"The answer is {row['answer']['final']}.")
        texts.append(turns)
        script += [{"text": t} for t in turns]
    (tmp_path / "script.json").write_text(json.dumps(script))
    (tmp_path / "val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in val))
    cfg = load_config(TOOL_YAML, ["model.path=tiny-random", "engine.type=replay",
                                  f"engine.replay_file={tmp_path / 'script.json'}",
                                  f"task_reader.val={tmp_path / 'val.jsonl'}", "rollout.concurrency=1",
                                  f"output_dir={tmp_path}"])
    tokenizer = load_tokenizer(cfg)
    engine = build_engine(cfg, tokenizer)
    tasks = read_tasks(cfg.task_reader, "val", cfg.base_dir).tasks
    async with RolloutStack(cfg, engine, tokenizer, tmp_path) as stack:
        batch = await stack.runner.run(tasks, settings_for(cfg, "val"), show_progress=False)
    eos = tokenizer.eos_token
    for episode, turns in zip(batch.episodes, texts):
        assert episode.error is None and episode.reward.total == pytest.approx(1.0), episode.reward
        assert episode.reward.parts["calls"] == 1.0 and episode.reward.parts["answer"] == 1.0
        results = [c for c in episode.output.tool_calls if "result" in c]
        assert len(results) == len(turns) - 1  # every call ran on the MCP server
        assert len(episode.calls) == len(turns) and len(episode.samples) == 1
        sample, calls = episode.samples[0], episode.calls
        assert sample.input_ids == calls[-1].tokens
        expected_mask = [0] * len(sample.input_ids)
        for call, text in zip(calls, turns):
            start = len(call.prompt_ids)
            span = sample.input_ids[start:start + len(call.completion_ids)]
            assert tokenizer.decode(span) == text + eos  # the generated turn, untouched, EOS included
            expected_mask[start:start + len(span)] = [1] * len(span)
            # the tool result the MCP server returned is in the next prompt, as context (mask 0)
        assert sample.loss_mask == expected_mask
    summary = batch.summary()
    assert summary["merge"]["samples"] == 4 and summary["merge"]["llm_calls"] == sum(len(t) for t in texts)
    assert summary["tool_call_parse_failures"] == 0
