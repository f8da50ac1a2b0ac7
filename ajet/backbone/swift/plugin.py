"""ajet's plugin inside ms-swift (`--external_plugins`): the user's workflow and judge in swift's GRPO.

The swift backbone writes, for each run, `<run>/swift/grpo/ajet_plugin.py`, which calls `install()`
with that run's spec (`ajet_run.json`: the resolved config, the run folder, the RL step size).
`install()` registers

- the chat template `ajet` (`ajet.backbone.swift.template`): rows are rendered by ajet's renderer;
- the multi-turn scheduler `ajet_workflow` (`ajet.backbone.swift.scheduler`): one episode of the user's
  workflow per trajectory, returned whole (every LLM turn trained, tool results masked);
- the reward function `ajet_judge` (`AjetJudge` below): the run's judge scores the batch's episodes
  (groups together for group judges); failed episodes and judge errors are counted, get their group's
  mean reward (advantage 0) and train nothing;

and patches two functions of swift's GRPO trainer (ms-swift 4.6, pinned in `ajet.backbone.swift.env`):
`encode_sample` encodes ajet's trajectories as the exact ids and mask the episode recorded (swift
would re-render them from messages), and `_infer_single_or_multi_turn` runs the scheduler's `run()`
for every trajectory of a batch when rolling out with transformers (swift's colocate loop drives
schedulers turn by turn through `step()`, which cannot host a workflow that owns its own loop).
Each RL step appends to `<run>/episodes.jsonl` and `<run>/swift/grpo/rollouts.jsonl`, which the
parent merges into `metrics.jsonl`.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from swift.rewards import AsyncORM, orms
from swift.rollout.multi_turn import multi_turns

import ajet.backbone.swift.template  # noqa: F401  (registers --template ajet)
from ajet.backbone.swift.scheduler import SCHEDULER_NAME, WorkflowScheduler
from ajet.backbone.swift.scoring import neutral_fill, score_group
from ajet.config.schema import AjetConfig
from ajet.judge import build_judge
from ajet.judge.base import Reward, success_of

REWARD_NAME = "ajet_judge"
_RUN: dict[str, Any] = {}
_LOCK = threading.Lock()


def install(spec_path: str | Path) -> None:
    """Register ajet's scheduler and reward function for the run described by `spec_path`."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    cfg = AjetConfig.model_validate(spec["config"])
    cfg._base_dir = Path(spec["base_dir"])
    _RUN.update(spec, cfg=cfg, stage_dir=Path(spec_path).parent, rank=int(os.environ.get("RANK", "0")),
                recorded=set())
    WorkflowScheduler.cfg = cfg
    multi_turns[SCHEDULER_NAME] = WorkflowScheduler
    orms[REWARD_NAME] = AjetJudge
    _patch_trainer()


class AjetJudge(AsyncORM):
    """`--reward_funcs ajet_judge`: the run's ajet judge on the episodes of the batch."""

    async def __call__(self, completions: list[Any], **kwargs: Any) -> list[float]:
        infos = [(r or {}).get("ajet") or {} for r in kwargs.get("rollout_infos") or [{}] * len(completions)]
        groups: dict[str, list[int]] = defaultdict(list)
        for i, prompt_id in enumerate(kwargs.get("prompt_id") or range(len(infos))):
            groups[str(prompt_id)].append(i)
        cfg: AjetConfig = _RUN["cfg"]
        judge = build_judge(cfg.judge, cfg.base_dir)
        rewards: list[Reward | None] = [None] * len(infos)
        errors: list[str | None] = [None] * len(infos)
        try:
            await asyncio.gather(*(score_group(judge, infos, members, rewards, errors) for members in groups.values()))
        finally:
            await judge.aclose()
        _record(_rl_step(kwargs.get("trainer_state")), infos, rewards, errors, judge.success_threshold)
        return neutral_fill(rewards, list(groups.values()))


def _rl_step(state: Any) -> int:
    """The ajet RL step of this batch: swift steps `updates_per_step` optimizer steps per rollout."""
    global_step = int(getattr(state, "global_step", 0) or 0)
    return global_step // int(_RUN.get("updates_per_step", 1)) + 1


def _record(step: int, infos: list[dict], rewards: list, errors: list, threshold: float) -> None:
    rows, totals, parts = [], [], defaultdict(list)
    for info, reward, judge_error in zip(infos, rewards, errors):
        output = info.get("output") or {}
        success = False
        if reward is not None:
            totals.append(reward.total)
            for k, v in reward.parts.items():
                parts[k].append(v)
            success = success_of(reward, threshold, output.get("is_success"))
        task = json.loads(info["task"]) if info.get("task") else None
        rows.append({
            "episode_id": info.get("episode_id"), "step": step, "backbone": "swift", "task": task,
            "reward": reward.total if reward else None, "reward_parts": reward.parts if reward else {},
            "feedback": reward.feedback if reward else None, "success": success, "error": info.get("error"),
            "judge_error": judge_error, "attempts": info.get("attempts"), "seconds": info.get("seconds"),
            "answer": output.get("answer"), "messages": output.get("messages", []),
            "tool_calls": output.get("tool_calls", []), "metrics": output.get("metrics", {}),
            "counters": info.get("counters", {}), "merge": info.get("merge", {}),
            "llm_calls": info.get("calls", []), "samples": info.get("samples", 0),
            "dropped_samples": info.get("dropped_samples", 0),
        })
    n = max(len(infos), 1)
    mean = sum(totals) / len(totals) if totals else 0.0
    summary = {
        "step": step, "episodes": len(infos),
        "failed": sum(1 for i in infos if i.get("error")), "judge_failed": sum(1 for e in errors if e),
        "reward_mean": mean,
        "reward_std": (sum((t - mean) ** 2 for t in totals) / len(totals)) ** 0.5 if len(totals) > 1 else 0.0,
        "success_rate": sum(1 for r in rows if r["success"]) / n,
        "turns_per_episode": sum(len(i.get("calls", [])) for i in infos) / n,
        "samples_per_episode": sum(i.get("samples", 0) for i in infos) / n,
        "dropped_samples": sum(i.get("dropped_samples", 0) for i in infos),
        "tool_call_parse_failures": sum((i.get("counters") or {}).get("tool_call_parse_failures", 0) for i in infos),
        "generated_tokens": sum(i.get("generated_tokens", 0) for i in infos),
        **{f"reward/{k}": sum(v) / len(v) for k, v in sorted(parts.items())},
    }
    rank = _RUN.get("rank", 0)
    run_dir = Path(_RUN["run_dir"])
    _append(run_dir / ("episodes.jsonl" if rank == 0 else f"episodes.rank{rank}.jsonl"), rows)
    if rank == 0:
        _append(_RUN["stage_dir"] / "rollouts.jsonl", [summary])


def _append(path: Path, rows: list[dict]) -> None:
    with _LOCK, path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")


# ---------------------------------------------------------------------- swift trainer patches
def _patch_trainer() -> None:
    from swift.rlhf_trainers import grpo_trainer, rollout_mixin

    mixin = rollout_mixin.RolloutTrainerMixin
    if getattr(mixin, "_ajet_patched", False):
        return
    for module, name in ((grpo_trainer, "encode_sample"), (mixin, "_infer_single_or_multi_turn")):
        if not hasattr(module, name):  # only the pinned ms-swift is supported
            raise RuntimeError(f"ajet's swift plugin needs {name} of ms-swift 4.6; this ms-swift has none")
    original_encode = grpo_trainer.encode_sample
    original_infer = mixin._infer_single_or_multi_turn

    def encode_sample(sample: Any, template: Any, *, encode_prompt_only: bool = False) -> dict[str, Any]:
        info = (getattr(sample, "rollout_infos", None) or {}).get("ajet")
        if not info or "input_ids" not in info or encode_prompt_only:
            return original_encode(sample, template, encode_prompt_only=encode_prompt_only)
        ids, mask = info["input_ids"], info["loss_mask"]
        encoded = {"input_ids": list(ids), "labels": [t if m else -100 for t, m in zip(ids, mask)], "length": len(ids)}
        _record_trained(info, encoded)
        return encoded

    def infer(self: Any, samples: list, request_config: Any, is_global_inputs: bool = False) -> list:
        scheduler = self.multi_turn_scheduler
        if not isinstance(scheduler, WorkflowScheduler) or self.use_fast_infer:
            return original_infer(self, samples, request_config, is_global_inputs)
        requests = self.samples2requests(samples)
        scheduler.infer_engine = self.engine  # colocate: swift builds the scheduler without an engine
        model = self.engine.model
        training = model.training
        model.eval()
        try:
            outputs = asyncio.run(scheduler.run_batch(requests))
        finally:
            model.train(training)
        return self._postprocess_rollout_outputs(samples, outputs)

    grpo_trainer.encode_sample = encode_sample
    mixin._infer_single_or_multi_turn = infer
    mixin._ajet_patched = True


def _record_trained(info: dict[str, Any], encoded: dict[str, Any]) -> None:
    """With `record_samples`, keep the exact ids and labels swift trains on (once per episode)."""
    if not _RUN.get("record_samples") or info.get("episode_id") in _RUN["recorded"]:
        return
    _RUN["recorded"].add(info.get("episode_id"))
    row = {"episode_id": info.get("episode_id"), "input_ids": encoded["input_ids"], "labels": encoded["labels"],
           "calls": info.get("calls", []), "error": info.get("error")}
    _append(_RUN["stage_dir"] / "trained_samples.jsonl", [row])
