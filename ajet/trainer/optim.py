"""Optimizer and learning-rate schedule of the debug trainer.

AdamW over the trainable parameters (LoRA adapters, or every weight under full fine-tuning). Weight
decay applies to matrices only: decaying norms and biases towards zero hurts and is not what
people mean by weight decay; nor do the trained embedding rows of `model.lora.train_tokens`, which hold
values, not updates. The schedule is over RL steps (`trainer.steps`), not optimizer
updates: the scheduler steps once per `train_step` call, whatever `updates_per_step` is.

    warmup   step s < warmup_steps: lr * (s + 1) / warmup_steps   (the first step already trains)
    constant lr
    linear   lr * (1 - p),  p = (s - warmup) / (steps - warmup), so the last step trains at lr / n
    cosine   lr * 0.5 * (1 + cos(pi * p))
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR, LRScheduler

from ajet.config.schema import TrainerConfig


def build_optimizer(params: Iterable[nn.Parameter], cfg: TrainerConfig) -> torch.optim.AdamW:
    """AdamW at `cfg.lr` over the parameters that require grad; decay on matrices only."""
    trainable = [p for p in params if p.requires_grad]
    if not trainable:
        raise ValueError("no trainable parameters: is the model frozen (for_training=False)?")
    decayed = [p.ndim >= 2 and not getattr(p, "ajet_no_decay", False) for p in trainable]  # token rows: values
    decay = [p for p, d in zip(trainable, decayed) if d]
    no_decay = [p for p, d in zip(trainable, decayed) if not d]
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


@contextmanager
def training_call(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: LRScheduler | None) -> Iterator[None]:
    """The frame of one trainer call (`train_step`, `dpo_step`): inside, the model is in train() mode
    with no gradients left over; after, whatever happened, the gradients are dropped and the model is
    back in eval() for the engine that shares it; the scheduler steps once, when the call finished."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    try:
        yield
    finally:
        optimizer.zero_grad(set_to_none=True)
        model.eval()
    if scheduler is not None:
        scheduler.step()


def apply_update(optimizer: torch.optim.Optimizer, params: Iterable[nn.Parameter], max_norm: float,
                 loss: float) -> tuple[float, bool]:
    """One optimizer update from the accumulated gradients: clip, step, drop the gradients; returns
    (norm before clipping, applied). When the loss or the gradient norm is NaN or inf the step is
    skipped, so no weight and no optimizer moment ever takes a non-finite value."""
    norm = clip_gradients(params, max_norm)
    applied = math.isfinite(loss) and math.isfinite(norm)
    if applied:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)  # the next update accumulates from zero
    return norm, applied


def clip_gradients(params: Iterable[nn.Parameter], max_norm: float) -> float:
    """Clip the global gradient norm to `max_norm`; returns the norm before clipping."""
    grads = [p for p in params if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.nn.utils.clip_grad_norm_(grads, max_norm))
