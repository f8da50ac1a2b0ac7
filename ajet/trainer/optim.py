"""Optimizer and learning-rate schedule of the debug trainer.

AdamW over the trainable parameters (LoRA adapters, or every weight under full fine-tuning). Weight
decay applies to matrices only: decaying norms and biases towards zero hurts and is not what
people mean by weight decay. The schedule is over RL steps (`trainer.steps`), not optimizer
updates: the scheduler steps once per `train_step` call, whatever `updates_per_step` is.

    warmup   step s < warmup_steps: lr * (s + 1) / warmup_steps   (the first step already trains)
    constant lr
    linear   lr * (1 - p),  p = (s - warmup) / (steps - warmup), so the last step trains at lr / n
    cosine   lr * 0.5 * (1 + cos(pi * p))
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from ajet.config.schema import TrainerConfig


def build_optimizer(params: Iterable[nn.Parameter], cfg: TrainerConfig) -> torch.optim.AdamW:
    """AdamW at `cfg.lr` over the parameters that require grad; decay on matrices only."""
    trainable = [p for p in params if p.requires_grad]
    if not trainable:
        raise ValueError("no trainable parameters: is the model frozen (for_training=False)?")
    decay = [p for p in trainable if p.ndim >= 2]
    no_decay = [p for p in trainable if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8)


def lr_factor(step: int, cfg: TrainerConfig, total_steps: int | None = None) -> float:
    """Multiplier of the peak lr at RL step `step` (0-based)."""
    total = cfg.steps if total_steps is None else total_steps
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "constant":
        return 1.0
    span = max(total - cfg.warmup_steps, 1)
    progress = min(max((step - cfg.warmup_steps) / span, 0.0), 1.0)
    if cfg.lr_schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))  # cosine


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainerConfig, total_steps: int | None = None) -> LambdaLR:
    """LR schedule over RL steps. total_steps: length of the schedule (default `cfg.steps`)."""
    return LambdaLR(optimizer, lambda step: lr_factor(step, cfg, total_steps))


def apply_update(optimizer: torch.optim.Optimizer, params: Iterable[nn.Parameter], max_norm: float,
                 loss: float) -> tuple[float, bool]:
    """Clip the gradients and step the optimizer; returns (norm before clipping, applied). When the
    loss or the gradient norm is NaN or inf the update is skipped and the gradients dropped, so no
    weight and no optimizer moment ever takes a non-finite value."""
    norm = clip_gradients(params, max_norm)
    if not (math.isfinite(loss) and math.isfinite(norm)):
        optimizer.zero_grad(set_to_none=True)
        return norm, False
    optimizer.step()
    return norm, True


def clip_gradients(params: Iterable[nn.Parameter], max_norm: float) -> float:
    """Clip the global gradient norm to `max_norm`; returns the norm before clipping."""
    grads = [p for p in params if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.nn.utils.clip_grad_norm_(grads, max_norm))
