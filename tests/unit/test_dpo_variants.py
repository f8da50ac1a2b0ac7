"""The DPO variants inside a real update on the tiny model: the loss dpo_step reports is the variant's
formula on the model's own sequence logprobs, and SimPO / reference-free DPO skip the reference pass."""

from __future__ import annotations

import contextlib

import pytest
import torch

from ajet.algorithm.losses import dpo_loss
from ajet.config.schema import DpoConfig, TrainerConfig
from ajet.trainer import preference
from ajet.trainer.optim import build_optimizer
from ajet.trainer.preference import dpo_step, needs_reference
from tests.unit.test_trainer_step import PROMPT, completion_sample, make_policy, snapshot


@pytest.mark.parametrize("settings", [
    {"loss_type": "sigmoid"},
    {"loss_type": "sigmoid", "reference_free": True},
    {"loss_type": "ipo", "beta": 0.5},
    {"loss_type": "simpo", "beta": 2.0, "simpo_gamma": 1.0, "label_smoothing": 0.1},
])
def test_dpo_step_reports_the_variants_loss_and_updates(settings: dict) -> None:
    policy = make_policy()
    pairs = [(completion_sample(policy, PROMPT, " Paris."), completion_sample(policy, PROMPT, " Lyon is big.")),
             (completion_sample(policy, PROMPT, " Paris, of course."), completion_sample(policy, PROMPT, " Rome."))]
    dpo = DpoConfig(**settings)
    with torch.no_grad():
        logps, counts = preference._chunk_logps(policy.model, pairs, policy)
        ref = None
        if needs_reference(dpo):
            with policy.base_model_context() as reference:
                ref, _ = preference._chunk_logps(reference, pairs, policy)
    expected, _ = dpo_loss(logps[:2], logps[2:], None if ref is None else ref[:2], None if ref is None else ref[2:],
                           dpo.beta, dpo.label_smoothing, loss_type=dpo.loss_type, chosen_tokens=counts[:2],
                           rejected_tokens=counts[2:], simpo_gamma=dpo.simpo_gamma)

    entered = []
    real_context = policy.base_model_context

    @contextlib.contextmanager
    def counting_context():
        entered.append(1)
        with real_context() as model:
            yield model

    policy.base_model_context = counting_context
    optimizer = build_optimizer(policy.trainable_parameters(), TrainerConfig(lr=1e-2))
    before = snapshot(policy)
    stats = dpo_step(policy, optimizer, None, pairs, TrainerConfig(lr=1e-2), dpo)
    assert stats["loss"] == pytest.approx(float(expected), rel=1e-4)
    assert stats["updates"] == 1.0
    assert any(not torch.equal(before[k], v) for k, v in policy.model.state_dict().items())
    assert bool(entered) == (dpo.loss_type != "simpo" and not dpo.reference_free)
