"""The debug backbone: SFT, GRPO, PPO and DPO in one process, on CPU or one GPU.

    policy (peft LoRA or full) ──shared object──▶ HFEngine ──▶ gateway ──▶ the user's workflow
        ▲                                                                     │
        └── train_step / dpo_step ◀── samples, advantages ◀── tracker, judge ◀┘

With `engine.type: remote` rollouts run on a vLLM-protocol server instead, and each weight change
reaches it as a new LoRA adapter (publish.py).

Stages (`algorithm: [sft, grpo]`) run in order; each starts from the weights the last one left.
Every step appends to metrics.jsonl; checkpoints are written every `trainer.save_every` steps, at the
end of each stage and at the end (atomically); `--resume` continues from the newest one with the same
stage, step, optimizer, scheduler, RNG and data position.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from rich.console import Console

from ajet.algorithm.online_dpo import online_pairs
from ajet.backbone.debug.publish import AdapterPublisher, check_engine, rollout_engine
from ajet.backbone.debug.rl import grpo_batch, ppo_batch, signal_groups
from ajet.backbone.debug.state import (
    DataOrder, RunState, check_resume_config, epochs_to_steps, find_resume_dir, track_nonfinite,
)
from ajet.backbone.monitor import Monitor, plot_curves, print_summary, read_metrics, truncate_run_logs
from ajet.backbone.reporters import Reporters, check_installed
from ajet.backbone.sample_log import write_samples
from ajet.backbone.stop import check as check_stop
from ajet.backbone.stop import run_async
from ajet.config.loader import save_resolved_config
from ajet.config.schema import AjetConfig
from ajet.errors import CheckpointError, ConfigError
from ajet.memory import return_freed_memory
from ajet.rollout.validation import evaluate
from ajet.render import ChatRenderer
from ajet.gateway.episodes import derive_seed
from ajet.rollout.runner import BatchResult
from ajet.rollout.seeds import batch_seed
from ajet.rollout.stack import RolloutStack, settings_for
from ajet.runlock import RunLock
from ajet.task_reader import read_tasks
from ajet.trainer.curation import weighted_mix
from ajet.trainer.checkpoint import latest_checkpoint, load_checkpoint, read_state, save_checkpoint
from ajet.trainer.optim import build_optimizer, build_scheduler
from ajet.trainer.policy import load_policy
from ajet.trainer.preference import dpo_step
from ajet.trainer.sft_data import load_sft_samples, parse_preference, preference_samples, read_jsonl
from ajet.trainer.sft_curation import curated_sft_samples, describe, sample_losses
from ajet.trainer.step import train_step
from ajet.trainer.value import attach_value_head, sample_values

console = Console(stderr=True)


class DebugRun:
    def __init__(self, cfg: AjetConfig, resume: bool | str = False) -> None:
        check_engine(cfg)
        self.cfg = cfg
        self.state = RunState()
        self.checkpoint: Path | None = None
        self.run_dir = Path(cfg.output_dir)
        # --resume PATH names the folder; --resume on a folder that does not exist fails here, before the
        # lock below would create it
        if isinstance(resume, str) or (resume and not self.run_dir.is_dir()):
            self.run_dir, self.checkpoint = find_resume_dir(self.run_dir, resume)
            cfg.output_dir = str(self.run_dir)
        # Held until run() ends (the kernel drops it if the process dies): a second run on this folder
        # is refused before it reads or writes anything in it.
        self.lock = RunLock(self.run_dir, "resumed training run" if resume else "training run").acquire()
        if self.lock.note:
            console.print(f"[yellow]{self.lock.note}[/]")
        try:
            if resume is True:
                self.run_dir, self.checkpoint = find_resume_dir(self.run_dir, resume)
            self._setup(resume)
        except BaseException:
            self.lock.release()
            raise

    def _setup(self, resume: bool | str) -> None:
        cfg = self.cfg
        if resume:
            self._check_resume_config()  # before config.yaml is rewritten
        elif latest_checkpoint(self.run_dir) is not None:
            raise CheckpointError(f"{str(self.run_dir)!r} already has checkpoints; add --resume to continue it "
                                  "or set output_dir to a new folder")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        save_resolved_config(cfg, self.run_dir)
        check_installed(cfg.trainer.report_to)  # a missing tracker package stops the run before the model loads
        _seed_everything(cfg.trainer.seed)  # LoRA's random init must be the same run to run
        needs_reference = not cfg.model.lora.enabled and ("dpo" in cfg.stages or cfg.grpo.beta > 0)
        self.policy = load_policy(cfg.model, reference=needs_reference)
        if "ppo" in cfg.stages:
            attach_value_head(self.policy)  # before any checkpoint is restored: it holds the head's weights
        self.engine = rollout_engine(cfg, self.policy)
        self.publisher = AdapterPublisher.for_engine(self.engine, self.policy, self.run_dir)  # remote: LoRA to server
        self.renderer = ChatRenderer(self.policy.tokenizer)  # load_policy applied model.chat_template
        self.steps = [self._stage_steps(name) for name in cfg.stages]
        # opened last: nothing that can fail is left between them and the monitor that closes them
        reporters = Reporters(cfg.trainer.report_to, self.run_dir, cfg.model_dump(mode="json"), project=cfg.project,
                              run_name=self.run_dir.name) if cfg.trainer.report_to else None
        self.monitor = Monitor(self.run_dir, sum(self.steps), reporters, stages=list(zip(cfg.stages, self.steps)))
        self.optimizer = self.scheduler = None

    # ------------------------------------------------------------------ setup
    def _stage_steps(self, name: str) -> int:
        cfg = self.cfg
        if name == "sft":
            n = self._sft_data()[1]
            return epochs_to_steps(cfg.sft.epochs, n, cfg.sft.batch_size)
        if name == "dpo" and cfg.dpo.data:
            return epochs_to_steps(cfg.dpo.epochs, len(self._pairs()), cfg.dpo.batch_size)
        return cfg.trainer.steps

    def _sft_data(self):
        if not hasattr(self, "_sft_cache"):
            if self.cfg.sft.curated:
                losses = sample_losses(self.policy.model, self.policy.tokenizer.pad_token_id or 0, self.policy.autocast)
                samples, report, curation = curated_sft_samples(self.cfg.sft, self.renderer, self.run_dir,
                                                                self.cfg.trainer.seed, losses)
                console.print(describe(curation))
            else:
                samples, report = load_sft_samples(self.cfg.sft.data, self.renderer)
            if report.skipped:
                console.print(f"[yellow]SFT data: skipped {len(report.skipped)} of {report.rows} rows[/]")
            self._sft_cache = samples
        return self._sft_cache, len(self._sft_cache)

    def _pairs(self):
        if not hasattr(self, "_pair_cache"):
            pairs, _ = read_jsonl(self.cfg.dpo.data, parse_preference)
            self._pair_cache = [preference_samples(self.renderer, p, i) for i, p in enumerate(pairs)]
        return self._pair_cache

    def _stage_optimizer(self, name: str) -> None:
        lr = {"sft": self.cfg.sft.lr, "dpo": self.cfg.dpo.lr}.get(name) or self.cfg.trainer.lr
        trainer = self.cfg.trainer.model_copy(update={"lr": lr})
        self.optimizer = build_optimizer(self.policy.trainable_parameters(), trainer)
        if name == "ppo":  # the critic's own group, at its own lr, on the same schedule
            self.optimizer.add_param_group({"params": list(self.policy.value_head.parameters()),
                                            "lr": self.cfg.ppo.value_lr or lr, "weight_decay": 0.0})
        self.scheduler = build_scheduler(self.optimizer, trainer, total_steps=self.steps[self.state.stage_index])

    def _check_resume_config(self) -> None:
        extra = read_state(self.checkpoint)["extra"]
        saved = extra.get("config")
        if saved is None and (self.run_dir / "config.yaml").is_file():  # a checkpoint from before configs were kept
            import yaml

            saved = (yaml.safe_load((self.run_dir / "config.yaml").read_text(encoding="utf-8")) or {}).get("ajet")
        if saved is None:
            return
        notes = check_resume_config(saved, self.cfg.model_dump(mode="json"), self.cfg.trainer.resume_accept,
                                    self.checkpoint)
        for note in notes:
            console.print(f"[yellow]resume: config changed: {note}[/]")

    def _restore(self) -> None:
        if self.checkpoint is None:
            return
        saved = RunState.from_dict(read_state(self.checkpoint)["extra"]["run_state"])
        finished_stage = saved.stage_step >= self.steps[saved.stage_index]
        if finished_stage:  # the checkpoint closed a stage: load weights only, open the next stage fresh
            load_checkpoint(self.checkpoint, self.policy)
            saved.next_stage()
            self.state = saved
            if saved.stage_index < len(self.steps):
                self._stage_optimizer(self.cfg.stages[saved.stage_index])
        else:
            self.state = saved
            self._stage_optimizer(self.cfg.stages[saved.stage_index])
            load_checkpoint(self.checkpoint, self.policy, self.optimizer, self.scheduler)
        for name, lines in truncate_run_logs(self.run_dir, self.state.global_step).items():
            console.print(f"resume: dropped {lines} line(s) of {name} written after step {self.state.global_step}")
        console.print(f"resumed from {self.checkpoint} at step {self.state.global_step}")

    # ------------------------------------------------------------------ main loop
    def run(self) -> dict[str, Any]:
        try:
            return self._run()
        finally:
            self.lock.release()

    def _run(self) -> dict[str, Any]:
        self._restore()
        if self.optimizer is None and self.state.stage_index < len(self.steps):
            self._stage_optimizer(self.cfg.stages[self.state.stage_index])
        try:
            run_async(self._run_stages())  # a stop signal cancels it (ajet.backbone.stop)
        finally:
            self.monitor.close()
        plot = plot_curves(self.run_dir)
        rows = read_metrics(self.monitor.path)
        print_summary(rows)
        console.print(f"run folder: {self.run_dir}" + (f" · curves: {plot}" if plot else ""))
        return {"run_dir": str(self.run_dir), "steps": self.state.global_step, "metrics": rows[-1] if rows else {}}

    async def _run_stages(self) -> None:
        while self.state.stage_index < len(self.steps):
            name = self.cfg.stages[self.state.stage_index]
            total = self.steps[self.state.stage_index]
            step_fn = {"sft": self._sft_step, "grpo": self._rl_step, "ppo": self._rl_step, "dpo": self._dpo_step}[name]
            async with RolloutStack(self.cfg, self.engine, self.policy.tokenizer, self.run_dir) as stack:
                while self.state.stage_step < total:
                    metrics = await step_fn(stack)
                    return_freed_memory()  # the update's freed pages: not kept beside the next rollout
                    self.state.stage_step += 1
                    self.state.global_step += 1
                    step = self.state.global_step
                    if self.cfg.trainer.eval_every and step % self.cfg.trainer.eval_every == 0:
                        metrics.update(await self._validate(step))
                    metrics.update(self.publisher.take_metrics() if self.publisher else {})
                    self.monitor.log(step, name, metrics)
                    track_nonfinite(self.state, metrics, self.cfg.trainer.max_nonfinite_updates)
                    last = self.state.stage_step == total
                    if last or (self.cfg.trainer.save_every and step % self.cfg.trainer.save_every == 0):
                        self._save(name)
                    check_stop()  # a stop signal whose interrupt was lost still ends the run here
                await self._publish()  # a stage's last weights reach the server too
            self.state.next_stage()
            if self.state.stage_index < len(self.steps):
                self._stage_optimizer(self.cfg.stages[self.state.stage_index])

    def _save(self, stage: str) -> None:
        state = self.state.to_dict()
        save_checkpoint(self.run_dir, self.state.global_step, self.policy, self.optimizer, self.scheduler,
                        {"run_state": state, "stage": stage, "config": self.cfg.model_dump(mode="json")},
                        keep_last=self.cfg.trainer.keep_last)

    async def _publish(self) -> None:
        """engine.type=remote: have the server serve the weights just trained before it generates."""
        if self.publisher is not None:
            await self.publisher.sync(self.state.global_step)

    async def _validate(self, step: int) -> dict[str, float]:
        await self._publish()
        # The training gateway still holds gateway.port: validation's own gateway takes a free one.
        cfg = self.cfg.model_copy(update={"gateway": self.cfg.gateway.model_copy(update={"port": 0})})
        report = await evaluate(cfg, self.engine, self.policy.tokenizer, self.run_dir, label="val", step=step,
                                episodes_file="val_episodes.jsonl", show_progress=False)
        return {"val_reward_mean": report["reward_mean"], "val_success_rate": report["success_rate"]}

    # ------------------------------------------------------------------ steps
    def _before_update(self) -> None:
        """An update's activations do not sit beside what the engine can make again (its prefix cache and
        weight copies) or beside the heap pages the rollout freed (ajet.memory)."""
        self.engine.release_caches()
        return_freed_memory()

    async def _sft_step(self, stack: RolloutStack) -> dict[str, Any]:
        samples, n = self._sft_data()
        order = DataOrder(n, self.cfg.trainer.seed)
        batch = [samples[i] for i in order.take(self.state, self.cfg.sft.batch_size)]
        trainer = self.cfg.trainer.model_copy(update={"updates_per_step": 1})
        self._before_update()
        stats = train_step(self.policy, self.optimizer, self.scheduler, batch, None, trainer, algo="sft",
                           neftune_alpha=self.cfg.sft.neftune_alpha)
        return _rename(stats, epoch=self.state.epoch)

    async def _rollout(self, stack: RolloutStack, n_tasks: int | None = None, round_: int = 0):
        """The next `n_tasks` (default rollout.batch_tasks) train tasks' episodes; round_ > 0: an extra
        rollout of dynamic sampling in the same step, seeded apart from the step's first."""
        await self._publish()
        tasks = self._train_tasks()
        size = n_tasks or self.cfg.rollout.batch_tasks
        picked = [tasks[i] for i in DataOrder(len(tasks), self.cfg.trainer.seed).take(self.state, size)]
        self._warn_repeats(len(tasks))
        settings = settings_for(self.cfg, "train")
        step = self.state.global_step + 1
        settings.seed = batch_seed(self.cfg.engine.seed, step)
        if round_:
            settings.seed = derive_seed(settings.seed, "dynamic_sampling", round_) % 2**31
        label = f"rollout {step}" + (f" (dynamic sampling {round_})" if round_ else "")
        return await stack.runner.run(picked, settings, label=label, step=step)

    async def _dynamic_rollout(self, stack: RolloutStack) -> tuple[BatchResult, int]:
        """grpo.dynamic_sampling_rounds: roll out more tasks while fewer than batch_tasks groups have a signal
        (DAPO); returns every episode of the step and the extra rounds run. A later round's groups get their
        own ids, so a task drawn again is a group of its own."""
        batch = await self._rollout(stack)
        rounds = 0
        while rounds < self.cfg.grpo.dynamic_sampling_rounds:
            missing = self.cfg.rollout.batch_tasks - len(signal_groups(batch.samples, self.cfg.grpo))
            if missing <= 0:
                break
            rounds += 1
            extra = await self._rollout(stack, missing, rounds)
            for episode in extra.episodes:
                episode.group_id = f"{episode.group_id}~{rounds}"
                for sample in episode.samples:
                    sample.group_id = episode.group_id
            batch.merge.add(extra.merge)
            batch = BatchResult(batch.episodes + extra.episodes, batch.seconds + extra.seconds, batch.merge)
        return batch, rounds

    def _warn_repeats(self, n_tasks: int) -> None:
        """Once: fewer tasks than rollout.batch_tasks put a task in a batch several times, and all its
        episodes share one group (one group of batch_tasks x group_size episodes with a single task)."""
        batch, group = self.cfg.rollout.batch_tasks, self.cfg.rollout.group_size
        if n_tasks >= batch or getattr(self, "_warned_repeats", False):
            return
        self._warned_repeats = True
        most = -(-batch // n_tasks)  # ceil: the most times one task appears in a batch
        console.print(
            f"[yellow]warning: the train split has {n_tasks} task(s) but rollout.batch_tasks={batch}: each batch "
            f"repeats tasks, and a task's repeats share one group, so a group holds up to {most * group} episodes "
            f"({most} x rollout.group_size={group}) and a batch has {min(n_tasks, batch)} group(s), not {batch}. "
            f"Set rollout.batch_tasks={n_tasks} (and raise rollout.group_size) or add tasks.[/]")

    def _train_tasks(self):
        if not hasattr(self, "_tasks"):
            tasks = read_tasks(self.cfg.task_reader, "train", self.cfg.base_dir).tasks
            weights = self.cfg.rollout.task_weights
            if weights:  # the RL mix by category: a task list of the same size, repeats where a share asks
                picked, taken = weighted_mix([t.metadata.get("category") for t in tasks], weights, len(tasks),
                                             self.cfg.trainer.seed)
                if not picked:
                    raise ConfigError(f"rollout.task_weights {weights} selects no train task: no task's "
                                      f"metadata.category is one of {sorted(weights)}")
                console.print(f"rollout.task_weights: {len(picked)} tasks by category {taken}")
                tasks = [tasks[i] for i in picked]
            self._tasks = tasks
        return self._tasks

    async def _rl_step(self, stack: RolloutStack) -> dict[str, Any]:
        """One grpo or ppo step: roll out (dynamic sampling: more, while groups lack a signal), score, update."""
        ppo = self.cfg.stages[self.state.stage_index] == "ppo"
        batch, rounds = await self._dynamic_rollout(stack) if not ppo else (await self._rollout(stack), 0)
        samples = batch.samples
        if ppo:
            values = sample_values(self.policy, samples, self.cfg.trainer.micro_batch_tokens)
            chosen = ppo_batch(samples, values, self.cfg)
        else:
            chosen = grpo_batch(samples, self.cfg.grpo)
        write_samples(self.run_dir, self.state.global_step + 1, samples, _scalar(samples, chosen), chosen.kept)
        metrics = {**_rollout_metrics(batch.summary(), batch, chosen.stats.to_dict()), **chosen.metrics}
        if self.cfg.grpo.dynamic_sampling_rounds and not ppo:
            metrics["dynamic_sampling_rounds"] = rounds
        if not chosen.kept:  # every group had equal rewards: nothing to learn from this batch
            _advance(self.scheduler)
            return {**metrics, "skipped_update": 1}
        kept = [samples[i] for i in chosen.kept]
        nan_old = any(lp != lp for s in kept for lp in s.old_logprobs)  # text-mode merges leave NaN
        self._before_update()
        stats = train_step(self.policy, self.optimizer, self.scheduler, kept, chosen.advantages,
                           self.cfg.trainer, algo="ppo" if ppo else "grpo", grpo=self.cfg.grpo,
                           old_logprobs="recompute" if nan_old else "engine", ppo=self.cfg.ppo,
                           ppo_targets=chosen.targets or None)
        self.engine.weights_version += 1
        return {**metrics, **_rename(stats), "trained_samples": len(kept)}

    async def _dpo_step(self, stack: RolloutStack) -> dict[str, Any]:
        if self.cfg.dpo.data:
            pairs = self._pairs()
            batch = [pairs[i] for i in DataOrder(len(pairs), self.cfg.trainer.seed).take(self.state, self.cfg.dpo.batch_size)]
            metrics: dict[str, Any] = {"epoch": self.state.epoch}
        else:
            rollout = await self._rollout(stack)
            batch = online_pairs(rollout.episodes)
            metrics = _rollout_metrics(rollout.summary(), rollout, {})
            metrics["pairs"] = len(batch)
            if not batch:
                _advance(self.scheduler)
                return {**metrics, "skipped_update": 1}
        self._before_update()
        stats = dpo_step(self.policy, self.optimizer, self.scheduler, batch, self.cfg.trainer, self.cfg.dpo)
        self.engine.weights_version += 1
        return {**metrics, **_rename(stats)}


def _scalar(samples, chosen) -> list[float]:
    """One advantage per sample for the samples log: the mean over its trained tokens when given per token."""
    out = [0.0] * len(samples)
    for i, a in zip(chosen.kept, chosen.advantages):
        if isinstance(a, list):
            mask = samples[i].loss_mask
            a = sum(x for x, m in zip(a, mask) if m) / max(sum(mask), 1)
        out[i] = a
    return out


def _seed_everything(seed: int) -> None:
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _advance(scheduler) -> None:
    """Keep the LR schedule on RL steps when a step made no update (torch warns about the order)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        scheduler.step()


def _rename(stats: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out = {("train_tokens_per_s" if k == "tokens_per_s" else k): v for k, v in stats.items()}
    out.update(extra)
    return out


def _rollout_metrics(summary: dict[str, Any], batch, adv_stats: dict[str, Any]) -> dict[str, Any]:
    episodes = max(summary["episodes"], 1)
    return {
        "reward_mean": summary["reward_mean"], "reward_std": summary["reward_std"],
        "success_rate": summary["success_rate"], "failed": summary["failed"] + summary["judge_failed"],
        "judge_failed": summary["judge_failed"], "timed_out": summary["timed_out"],
        "timed_out_busy_s": summary["timed_out_busy_s"],
        **{f"errors/{k}": v for k, v in summary["errors"].items()},
        "episodes": summary["episodes"], "samples_per_episode": len(batch.samples) / episodes,
        "turns_per_episode": summary["turns_per_episode"], "rollout_tokens_per_s": summary["tokens_per_s"],
        "tool_call_parse_failures": summary["tool_call_parse_failures"],
        "tool_calls_json": summary["tool_calls_json"],
        "merge_token_ratio": summary["merge"]["merge_token_ratio"], "rollout_seconds": summary["seconds"],
        **{f"reward/{k}": v for k, v in summary["reward_parts"].items()},
        **{f"workflow/{k}": v for k, v in summary["workflow_metrics"].items()},
        **{f"groups/{k}": v for k, v in adv_stats.items() if k in ("zero_variance_groups", "informative_groups")},
    }


def run(cfg: AjetConfig, resume: bool | str = False) -> dict[str, Any]:
    return DebugRun(cfg, resume).run()

