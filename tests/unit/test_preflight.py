"""Inputs are checked before anything heavy starts, and progress shows as plain lines in a log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.backbone.preflight import check_inputs
from ajet.config.loader import load_config
from ajet.errors import ConfigError, PluginError, TaskReaderError

REPO = Path(__file__).resolve().parents[2]
MATH = REPO / "tutorial" / "example_math_agent"


def conf(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def base(extra: str = "") -> str:
    return ("ajet:\n  model: {path: tiny-random}\n  workflow: " + str(MATH / "agent.py") + ":MathAgent\n"
            f"  task_reader: {{type: jsonl, train: {MATH / 'train.jsonl'}, val: {MATH / 'val.jsonl'}}}\n"
            f"  judge: {{type: math_boxed}}\n{extra}")


@pytest.mark.parametrize(("command", "purpose"), [([], "train"), (["eval"], "eval")])
def test_missing_workflow_fails_before_torch_is_imported(tmp_path: Path, command: list[str], purpose: str) -> None:
    path = conf(tmp_path, base().replace("agent.py:MathAgent", "nothere.py:MathAgent"))
    probe = ("import sys; from ajet.cli import main; "
             f"rc = main({[*command, '--conf', str(path)]!r}); print(rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["2", "False"], out.stderr
    assert f"error: ajet.workflow = '{MATH / 'nothere.py'}:MathAgent': plugin file" in out.stderr


def test_workflow_args_that_do_not_fit(tmp_path: Path) -> None:
    cfg = load_config(conf(tmp_path, base()), ["workflow=chat", "+workflow_args.system=x"])
    with pytest.raises(ConfigError, match=r"ajet.workflow_args do not fit ChatWorkflow: got an unexpected keyword "
                                          r"argument 'system'"):
        check_inputs(cfg, "eval")


def test_missing_val_and_sft_data(tmp_path: Path) -> None:
    cfg = load_config(conf(tmp_path, base()), [f"task_reader.val={tmp_path / 'none.jsonl'}"])
    with pytest.raises(TaskReaderError, match="none.jsonl"):
        check_inputs(cfg, "eval")
    check_inputs(cfg, "train")  # training without eval_every does not need val
    cfg = load_config(conf(tmp_path, base()), ["algorithm=[sft,grpo]", f"sft.data={tmp_path / 'sft.jsonl'}"])
    with pytest.raises(TaskReaderError, match=r"data file .*sft.jsonl' does not exist"):
        check_inputs(cfg, "train")
    (tmp_path / "sft.jsonl").write_text(json.dumps({"not": "a conversation"}) + "\n")
    with pytest.raises(TaskReaderError, match=r"sft.jsonl has no usable rows"):
        check_inputs(cfg, "train")


def test_judge_plugin_that_does_not_load(tmp_path: Path) -> None:
    cfg = load_config(conf(tmp_path, base()), [f"judge.type={tmp_path / 'judge.py'}:J"])
    with pytest.raises(PluginError, match=r"judge.py"):
        check_inputs(cfg, "eval")


def test_plain_progress_lines_when_stdout_is_not_a_terminal(tmp_path: Path, capsys, monkeypatch) -> None:
    from ajet.backbone.monitor import Monitor

    monkeypatch.delenv("AJET_PROGRESS", raising=False)
    monitor = Monitor(tmp_path, total_steps=3)
    monitor.log(1, "sft", {"loss": 0.5, "train_tokens_per_s": 1234.0})
    monitor.log(2, "grpo", {"reward_mean": 0.25, "rollout_tokens_per_s": 88.0, "failed": 1})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("sft step 1/3 · loss 0.5000 · train tok/s 1234 · elapsed ")
    assert lines[1].startswith("grpo step 2/3 · reward 0.250 · rollout tok/s 88 · failed 1 · elapsed ")
    assert all(" · ETA " in line for line in lines)
