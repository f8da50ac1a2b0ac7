"""The one optimizer-update helper and the frame of a trainer call, on a 2x2 linear layer by hand."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ajet.config.schema import TrainerConfig
from ajet.trainer.optim import apply_update, build_optimizer, build_scheduler, training_call


def layer() -> nn.Linear:
    model = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2))
    return model


def test_apply_update_clips_steps_and_drops_the_gradients():
    model = layer()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model.weight.grad = torch.tensor([[3.0, 0.0], [0.0, 4.0]])  # norm 5
    norm, applied = apply_update(optimizer, model.parameters(), max_norm=1.0, loss=0.5)
    assert (norm, applied) == (pytest.approx(5.0), True)
    # clipped to norm 1: grad (0.6, 0.8) on the diagonal; SGD at lr 1 subtracts it
    torch.testing.assert_close(model.weight.detach(), torch.tensor([[0.4, 0.0], [0.0, 0.2]]))
    assert model.weight.grad is None


def test_apply_update_skips_a_non_finite_step():
    model = layer()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model.weight.grad = torch.tensor([[float("nan"), 0.0], [0.0, 1.0]])
    _, applied = apply_update(optimizer, model.parameters(), max_norm=1.0, loss=0.5)
    assert applied is False and model.weight.grad is None
    torch.testing.assert_close(model.weight.detach(), torch.eye(2))
    model.weight.grad = torch.ones(2, 2)
    assert apply_update(optimizer, model.parameters(), max_norm=10.0, loss=float("inf"))[1] is False
    torch.testing.assert_close(model.weight.detach(), torch.eye(2))


def test_training_call_frames_one_call():
    model = layer().eval()
    cfg = TrainerConfig(lr=1.0, warmup_steps=0, lr_schedule="linear", steps=4)
    optimizer = build_optimizer(model.parameters(), cfg)
    scheduler = build_scheduler(optimizer, cfg)
    model.weight.grad = torch.ones(2, 2)  # left over from elsewhere: must not leak into the update
    with training_call(model, optimizer, scheduler):
        assert model.training and model.weight.grad is None
        model.weight.grad = torch.ones(2, 2)
        assert apply_update(optimizer, model.parameters(), max_norm=1.0, loss=0.1)[1]
    assert not model.training and model.weight.grad is None
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.75)  # linear: step 1 of 4 -> lr * (1 - 1/4)
    with pytest.raises(RuntimeError), training_call(model, optimizer, scheduler):
        raise RuntimeError("forward failed")
    assert not model.training and optimizer.param_groups[0]["lr"] == pytest.approx(0.75)  # not stepped
