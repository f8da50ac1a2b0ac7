"""swift's logging.jsonl read while it grows, and turned into ajet's metrics rows."""

from __future__ import annotations

import json
from pathlib import Path

from ajet.backbone.swift.metrics import LogFollower, StageMetrics, ajet_row


def test_follower_returns_only_finished_lines(tmp_path: Path) -> None:
    path = tmp_path / "logging.jsonl"
    follower = LogFollower(path)
    assert follower.poll() == []  # swift has not written it yet
    with path.open("w") as handle:
        handle.write('{"a": 1}\n{"b": ')
    assert follower.poll() == [{"a": 1}]
    with path.open("a") as handle:
        handle.write('2}\nnot json\n')
    assert follower.poll() == [{"b": 2}]
    assert follower.poll() == []


def test_rows_are_renamed_and_grpo_steps_merged_with_the_rollout_account(tmp_path: Path) -> None:
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps({"step": 1, "reward_mean": 0.5, "failed": 1}) + "\n")
    stage = StageMetrics(updates_per_step=2, rollouts=rollouts)
    swift = [
        {"loss": 1.0, "grad_norm": 0.5, "learning_rate": 1e-5, "rewards/AjetJudge/mean": 0.5,
         "global_step/max_steps": "1/4", "elapsed_time": "3s"},
        {"loss": 3.0, "grad_norm": 1.5, "learning_rate": 1e-5, "global_step/max_steps": "2/4"},
        {"loss": 2.0, "global_step/max_steps": "3/4"},
    ]
    out = stage.feed(swift)
    assert out == [(1, {"loss": 2.0, "grad_norm": 1.0, "lr": 1e-5, "swift/rewards/AjetJudge/mean": 0.5,
                        "reward_mean": 0.5, "failed": 1})]
    # swift's closing row carries the checkpoint; a resumed stage's repeated rows are not logged twice
    assert stage.feed([{"loss": 9.0, "global_step/max_steps": "2/4"}, {"loss": 2.0, "global_step/max_steps": "4/4"},
                       {"train_runtime": 5.0, "global_step/max_steps": "4/4", "last_model_checkpoint": "/x/checkpoint-4"}]) \
        == [(2, {"loss": 2.0})]
    assert stage.final["last_model_checkpoint"] == "/x/checkpoint-4"


def test_only_numbers_are_kept() -> None:
    assert ajet_row({"loss": 1, "ok": True, "elapsed_time": "5s", "train_speed(s/it)": 2.5, "odd key!": 1}) == \
        {"loss": 1.0, "seconds_per_update": 2.5, "swift/odd_key": 1.0}
