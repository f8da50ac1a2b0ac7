"""The live step line: its ETA follows the pace of the stage running now."""

from __future__ import annotations

from pathlib import Path

import pytest

from ajet.backbone import monitor as monitor_module
from ajet.backbone.monitor import Monitor


def test_eta_follows_the_current_stages_pace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    clock = iter([0.0, 10.0, 20.0, 30.0, 90.0, 150.0])  # start, then 2 SFT steps of 10 s, GRPO steps of 60 s
    monkeypatch.setattr(monitor_module.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(monitor_module, "interactive", lambda: False)
    run = Monitor(tmp_path, total_steps=6)
    for step, stage in enumerate(["sft", "sft", "sft", "grpo", "grpo"], 1):
        run.log(step, stage, {"loss": 1.0})
    etas = [line.rsplit("ETA ", 1)[1] for line in capsys.readouterr().out.splitlines() if "ETA" in line]
    # SFT: 10 s a step; GRPO: 60 s a step, so 2 and 1 GRPO steps left are 2m00s and 1m00s
    assert etas[:3] == ["50 s", "40 s", "30 s"] and etas[3:] == ["2m00s", "1m00s"]


def test_eta_names_the_stages_whose_pace_is_not_known_yet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """An SFT step says nothing of a GRPO step's cost: until GRPO runs, the ETA covers SFT and names
    the GRPO steps still to come, instead of pricing them as SFT steps (issue 18: 29 min shown, 40 taken)."""
    clock = iter([0.0, 10.0, 20.0, 30.0, 90.0, 150.0])
    monkeypatch.setattr(monitor_module.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(monitor_module, "interactive", lambda: False)
    run = Monitor(tmp_path, total_steps=6, stages=[("sft", 3), ("grpo", 3)])
    for step, stage in enumerate(["sft", "sft", "sft", "grpo", "grpo"], 1):
        run.log(step, stage, {"loss": 1.0})
    etas = [line.rsplit("ETA ", 1)[1] for line in capsys.readouterr().out.splitlines() if "ETA" in line]
    assert etas == ["20 s + 3 grpo steps", "10 s + 3 grpo steps", "0 s + 3 grpo steps", "2m00s", "1m00s"]


def test_the_first_eta_leaves_out_the_runs_set_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The first step is priced by its own clock (time_s, plus rollout_seconds for an RL step), not by the
    time since the run began, which holds the model's loading: 25 s of set-up before a 10 s first step
    showed 35 s a step for the quickstart's first ETA."""
    clock = iter([0.0, 35.0, 45.0, 55.0])  # set-up 25 s, then SFT steps of 10 s
    monkeypatch.setattr(monitor_module.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(monitor_module, "interactive", lambda: False)
    run = Monitor(tmp_path, total_steps=4)
    for step in range(1, 4):
        run.log(step, "sft", {"loss": 1.0, "time_s": 10.0})
    etas = [line.rsplit("ETA ", 1)[1] for line in capsys.readouterr().out.splitlines() if "ETA" in line]
    assert etas == ["30 s", "20 s", "10 s"]
    clock = iter([0.0, 70.0])  # an RL first step: 20 s set-up, 30 s rollout, 20 s update
    (tmp_path / "rl").mkdir()
    run = Monitor(tmp_path / "rl", total_steps=3)
    run.log(1, "grpo", {"rollout_seconds": 30.0, "time_s": 20.0})
    assert capsys.readouterr().out.rsplit("ETA ", 1)[1].strip() == "1m40s"
