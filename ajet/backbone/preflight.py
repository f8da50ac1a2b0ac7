"""Check a run's inputs before anything heavy starts (weights, a backend's environment).

A missing workflow file, a workflow class that does not take its `workflow_args`, an unreadable
task file, SFT or preference data without a usable row, or a judge plugin that does not load is
reported in seconds, not after the model has loaded. Every backbone and `ajet eval` call
`check_inputs` first; the later steps read the same sources again, so this only ever fails early.
"""

from __future__ import annotations

from typing import Literal

from ajet.config.schema import AjetConfig
from ajet.errors import TaskReaderError
from ajet.judge import build_judge
from ajet.rollout.stack import workflow_class
from ajet.task_reader import read_tasks


def check_inputs(cfg: AjetConfig, purpose: Literal["train", "eval"] = "train") -> None:
    """Raise the error a later step would raise about this config's inputs, now."""
    needs_rollouts = purpose == "eval" or any(s in ("grpo", "ppo") or (s == "dpo" and not cfg.dpo.data) for s in cfg.stages)
    if needs_rollouts:
        workflow_class(cfg)
        build_judge(cfg.judge, cfg.base_dir)
    if purpose == "eval" or cfg.trainer.eval_every:
        if not read_tasks(cfg.task_reader, "val", cfg.base_dir).tasks:
            raise TaskReaderError("the val split has no tasks: set task_reader.val or task_reader.split_ratio")
    if purpose == "train" and needs_rollouts:
        read_tasks(cfg.task_reader, "train", cfg.base_dir)
    if purpose == "train":
        from ajet.trainer.sft_data import parse_conversation, parse_preference, read_jsonl

        if "sft" in cfg.stages and cfg.sft.data:
            read_jsonl(cfg.sft.data, parse_conversation)
        if "dpo" in cfg.stages and cfg.dpo.data:
            read_jsonl(cfg.dpo.data, parse_preference)
