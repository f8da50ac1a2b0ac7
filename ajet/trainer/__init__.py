"""The debug backbone's trainer: policy loading, micro-batching, logprobs, updates, checkpoints, export.

    policy = load_policy(cfg.model)                       # the one model the engine also samples from
    optimizer = build_optimizer(policy.model.parameters(), cfg.trainer)
    scheduler = build_scheduler(optimizer, cfg.trainer)
    stats = train_step(policy, optimizer, scheduler, samples, advantages, cfg.trainer, grpo=cfg.grpo)
    save_checkpoint(run_dir, step, policy, optimizer, scheduler, {"data_position": ...})
"""

from ajet.trainer.batching import BatchPlan, MicroBatch, pack_micro_batches, split_mini_batches
from ajet.trainer.checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    read_state,
    resolve_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from ajet.trainer.export import export_checkpoint
from ajet.trainer.logprobs import full_token_logprobs, sequence_logprobs, token_logprobs
from ajet.trainer.optim import build_optimizer, build_scheduler, clip_gradients, lr_factor
from ajet.trainer.policy import Policy, load_policy
from ajet.trainer.step import train_step

__all__ = [
    "BatchPlan",
    "MicroBatch",
    "Policy",
    "build_optimizer",
    "build_scheduler",
    "clip_gradients",
    "export_checkpoint",
    "full_token_logprobs",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "load_policy",
    "lr_factor",
    "pack_micro_batches",
    "prune_checkpoints",
    "read_state",
    "resolve_checkpoint",
    "save_checkpoint",
    "sequence_logprobs",
    "split_mini_batches",
    "token_logprobs",
    "train_step",
    "verify_checkpoint",
]
