"""The real SmolLM2 learns on CPU: SFT on the tool-agent demonstrations lowers the loss and makes it
emit well-formed tool calls on val tasks where the base model made none; then 2 GRPO steps run and
their checkpoint exports (--merge) to a model transformers loads. Slow: minutes on 2 cores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.backbone.registry import run_backbone as run
from ajet.config.loader import load_config
from ajet.eval.run import run_eval

ROOT = Path(__file__).resolve().parents[2]
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
SHORT = ["rollout.max_tokens_per_turn=64", "rollout.max_turns=2", "eval.limit=6"]

pytestmark = pytest.mark.slow


def test_sft_teaches_tool_calls_then_grpo_and_export(tmp_path):
    base = run_eval(load_config(TOOL_YAML, SHORT + [f"output_dir={tmp_path / 'base'}"]))
    assert base["tool_calls_parsed"] == 0  # the base model never calls a tool

    cfg = load_config(TOOL_YAML, SHORT + [
        f"output_dir={tmp_path / 'run'}", "algorithm=[sft,grpo]", "sft.epochs=0.5", "sft.batch_size=8",
        "sft.lr=1e-3", "trainer.steps=2", "rollout.batch_tasks=2", "rollout.group_size=2", "trainer.save_every=0"])
    result = run(cfg)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    sft = [r["loss"] for r in rows if r["stage"] == "sft"]
    assert sft[-1] < sft[0] * 0.7, sft  # the SFT loss fell
    assert [r["stage"] for r in rows[-2:]] == ["grpo", "grpo"] and result["steps"] == len(rows)

    after = run_eval(load_config(TOOL_YAML, SHORT + [f"output_dir={tmp_path / 'after'}"]), model=str(tmp_path / "run"))
    assert after["tool_calls_parsed"] > 0, after  # well-formed calls where the base model made none
    assert after["tool_calls_parsed"] > after["tool_call_parse_failures"]

    ckpt = sorted((tmp_path / "run" / "checkpoints").glob("step-*"))[-1]
    out = tmp_path / "merged"
    proc = subprocess.run([sys.executable, "-m", "ajet.cli", "export", "--checkpoint", str(ckpt), "--out", str(out),
                           "--merge"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.config.num_hidden_layers == 30 and tokenizer.chat_template
