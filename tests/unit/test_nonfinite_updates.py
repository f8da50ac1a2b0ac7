"""A non-finite loss or gradient never reaches the weights: the update is skipped and counted, and the
debug backbone stops after `trainer.max_nonfinite_updates` skipped in a row (tiny model)."""

from __future__ import annotations

import math

import pytest
import torch

from ajet.backbone.debug.state import RunState, track_nonfinite
from ajet.config.schema import DpoConfig, TrainerConfig
from ajet.errors import TrainingError
from ajet.trainer.optim import build_optimizer
from ajet.trainer.preference import dpo_step
from ajet.trainer.step import train_step
from tests.unit.test_trainer_step import PROMPT, completion_sample, make_policy, snapshot


def test_a_nan_advantage_skips_the_update_and_keeps_weights_and_optimizer_clean():
    policy = make_policy()
    samples = [completion_sample(policy, PROMPT, " Paris."), completion_sample(policy, PROMPT, " Lyon.")]
    cfg = TrainerConfig(lr=1e-2, updates_per_step=2)
    optimizer = build_optimizer(policy.trainable_parameters(), cfg)
    before = snapshot(policy)
    # updates_per_step=2 splits the two samples: the first update sees NaN, the second is fine.
    stats = train_step(policy, optimizer, None, samples, [float("nan"), 1.0], cfg, algo="grpo")
    assert (stats["updates"], stats["nonfinite_updates"], stats["nonfinite_tail"]) == (1.0, 1.0, 0.0)
    after = policy.model.state_dict()
    assert all(torch.isfinite(v).all() for v in after.values())
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the finite update was applied
    for state in optimizer.state.values():
        assert all(torch.isfinite(t).all() for t in state.values() if torch.is_tensor(t))

    before = snapshot(policy)
    stats = train_step(policy, optimizer, None, samples[:1], [math.inf], TrainerConfig(lr=1e-2), algo="grpo")
    assert (stats["updates"], stats["nonfinite_updates"], stats["nonfinite_tail"]) == (0.0, 1.0, 1.0)
    assert all(torch.equal(before[k], v) for k, v in policy.model.state_dict().items())


def test_a_non_finite_dpo_update_is_skipped():
    policy = make_policy()
    pair = (completion_sample(policy, PROMPT, " Paris."), completion_sample(policy, PROMPT, " Lyon."))
    optimizer = build_optimizer(policy.trainable_parameters(), TrainerConfig())
    before = snapshot(policy)
    nan_beta = DpoConfig.model_construct(beta=math.nan)  # past validation, as a bug upstream would be
    stats = dpo_step(policy, optimizer, None, [pair], TrainerConfig(), nan_beta)
    assert (stats["updates"], stats["nonfinite_updates"]) == (0.0, 1.0)
    assert all(torch.equal(before[k], v) for k, v in policy.model.state_dict().items())


def test_the_streak_counts_skipped_updates_in_a_row_across_steps():
    state = RunState()
    track_nonfinite(state, {"updates": 2, "nonfinite_updates": 1, "nonfinite_tail": 1}, limit=3)
    track_nonfinite(state, {"updates": 0, "nonfinite_updates": 1, "nonfinite_tail": 1}, limit=3)
    assert state.nonfinite_streak == 2
    track_nonfinite(state, {}, limit=3)  # a step without any update (equal rewards) leaves it as it is
    track_nonfinite(state, {"updates": 1, "nonfinite_updates": 0, "nonfinite_tail": 0}, limit=3)
    assert state.nonfinite_streak == 0  # an applied update ends the streak
    for _ in range(2):
        track_nonfinite(state, {"updates": 0, "nonfinite_updates": 1, "nonfinite_tail": 1}, limit=3)
    with pytest.raises(TrainingError, match=r"non-finite \(NaN or inf\) in 3 optimizer updates in a row") as info:
        track_nonfinite(state, {"updates": 0, "nonfinite_updates": 1, "nonfinite_tail": 1}, limit=3)
    assert info.value.exit_code == 1
    assert RunState.from_dict(state.to_dict()).nonfinite_streak == 3  # kept in checkpoints
