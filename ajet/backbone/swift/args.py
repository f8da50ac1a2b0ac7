"""ajet's config as ms-swift command lines, one per stage (`swift sft` / `swift rlhf`).

docs/backends/swift.md has the table. In short: the model and its LoRA map to `--model`,
`--tuner_type`, `--lora_*`; the trainer keys to the optimizer flags; `sft.*` / `dpo.*` to epochs,
batch size and learning rate; the rollout and `grpo.*` keys to GRPO's group size, lengths,
sampling, clipping, KL and loss type; the user's workflow and judge reach swift through ajet's
plugin (`--external_plugins`, `--multi_turn_scheduler ajet_workflow`, `--reward_funcs ajet_judge`).
`ajet.backbone.swift.args` is passed through last (validated by swift's own parser before launch);
a key there that ajet already sets from one of its own keys is refused, naming that key. `args` may
hold `sft:`, `grpo:` and `dpo:` mappings for flags of one stage only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ajet.config.schema import AjetConfig, DpoConfig
from ajet.errors import ConfigError
from ajet.model_packages import find
from ajet.models import EMBEDDED, TINY, resolve_model_path

STAGES = ("sft", "grpo", "dpo")
# ajet's own models: SmolLM2 is a llama whose type swift cannot tell from its config alone.
_KNOWN_MODEL_TYPES = {EMBEDDED: "llama", TINY: "llama"}
# swift flag -> the ajet key it comes from (a passthrough of these is refused: one way to set a value)
_FROM_AJET = {
    "model": "model.path", "tuner_type": "model.lora.enabled", "lora_rank": "model.lora.rank",
    "lora_alpha": "model.lora.alpha", "lora_dropout": "model.lora.dropout",
    "target_modules": "model.lora.target_modules", "torch_dtype": "model.dtype", "learning_rate": "trainer.lr",
    "lr_scheduler_type": "trainer.lr_schedule", "warmup_steps": "trainer.warmup_steps",
    "weight_decay": "trainer.weight_decay", "max_grad_norm": "trainer.grad_clip", "seed": "trainer.seed",
    "save_total_limit": "trainer.keep_last", "num_train_epochs": "sft.epochs / dpo.epochs",
    "report_to": "trainer.report_to",
    "max_steps": "trainer.steps", "num_generations": "rollout.group_size", "temperature": "rollout.temperature",
    "top_p": "rollout.top_p", "max_completion_length": "rollout.max_tokens_per_turn",
    "max_turns": "rollout.max_turns", "epsilon": "grpo.epsilon", "epsilon_high": "grpo.epsilon_high",
    "scale_rewards": "grpo.scale_rewards", "label_smoothing": "dpo.label_smoothing",
    "output_dir": "output_dir", "dataset": "task_reader / sft.data / dpo.data",
    "model_type": "backbone.swift.model_type", "template": "backbone.swift.template",
    "agent_template": "backbone.swift.agent_template", "deepspeed": "backbone.swift.deepspeed",
    "use_vllm": "backbone.swift.use_vllm", "vllm_server_host": "backbone.swift.vllm_server_host",
    "vllm_server_port": "backbone.swift.vllm_server_port", "beta": "grpo.beta / dpo.beta",
    "loss_type": "grpo.loss_agg / dpo.loss_type", "simpo_gamma": "dpo.simpo_gamma",
    "reference_free": "dpo.reference_free", "neftune_noise_alpha": "sft.neftune_alpha",
}


@dataclass
class StagePlan:
    """One stage as swift runs it."""

    stage: str
    command: str  # 'sft' | 'rlhf'
    args: dict[str, Any]  # flag -> value, in order
    stage_dir: Path
    steps: int  # optimizer steps swift will take (for progress; 0 when swift decides from epochs)
    updates_per_step: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def out_dir(self) -> Path:
        return Path(self.args["output_dir"])

    def argv(self) -> list[str]:
        """The flags as swift's command line takes them."""
        out: list[str] = []
        for key, value in self.args.items():
            out.append(f"--{key}")
            if isinstance(value, (list, tuple)):
                out.extend(_flag(v) for v in value)
            else:
                out.append(_flag(value))
        return out


def _flag(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # swift parses some of these (lora_alpha, epochs) as int
    return str(value)


def refuse_unsupported(cfg: AjetConfig) -> None:
    """What the debug backbone does that the swift backbone cannot, as ConfigErrors that say what to do."""
    if "dpo" in cfg.stages and not cfg.dpo.data:
        raise ConfigError("invalid config: the swift backbone trains DPO from a preference file: set ajet.dpo.data "
                          "(online pairs from rollouts need --backbone=debug)")
    if "sft" in cfg.stages and cfg.sft.curated:
        raise ConfigError("sft.task_weights, sft.coreset and sft.replay are applied by the debug backbone only (they choose rows "
                          "with the policy's own losses in-process); train SFT with --backbone=debug, or remove them")
    if cfg.rollout.task_weights and any(stage != "sft" for stage in cfg.stages):
        raise ConfigError("rollout.task_weights is applied by the debug backbone only (swift's GRPO samples its "
                          "dataset itself); use --backbone=debug, or remove it")
    if cfg.model.lora.layers is not None:
        raise ConfigError("model.lora.layers is applied by the debug backbone only (it adapts the last N decoder "
                          "layers and reuses the frozen layers' output); remove it, or use --backbone=debug")
    if isinstance(cfg.model.lora.train_tokens, list) and cfg.model.lora.train_tokens:
        raise ConfigError("model.lora.train_tokens is applied by the debug backbone only (it trains those tokens' "
                          "embedding rows beside the adapter); remove it, or use --backbone=debug")
    g = cfg.grpo
    unmapped = [key for key, on in (("grpo.baseline", g.baseline != "mean"), ("grpo.entropy_coef", g.entropy_coef > 0),
                                    ("grpo.dynamic_sampling_rounds", g.dynamic_sampling_rounds > 0),
                                    ("grpo.turn_reward_weight", g.turn_reward_weight > 0)) if on]
    if "grpo" in cfg.stages and unmapped:
        raise ConfigError(f"invalid config: {', '.join(unmapped)} {'is' if len(unmapped) == 1 else 'are'} applied by the "
                          "debug backbone only (ajet does not map them onto swift's GRPO); remove them, set swift's own "
                          "flags under backbone.swift.args.grpo (its GRPO docs name them), or use --backbone=debug")
    if cfg.trainer.eval_every:
        raise ConfigError("invalid config: trainer.eval_every is not supported by the swift backbone (the rollouts "
                          "run inside swift's trainer); set it to 0 and evaluate a checkpoint with `ajet eval --model "
                          "<run folder>`, or use --backbone=debug")
    for stage in cfg.stages:
        _passthrough(cfg, stage)


def world_size(cfg: AjetConfig) -> int:
    swift = cfg.backbone.swift
    return swift.nproc_per_node * swift.nnodes


def _model_name(path: str) -> str:
    """A packaged model's own name whichever name `path` uses for it (`smollm2-135m` is its preset name)."""
    packaged = find(path)
    return packaged.name if packaged is not None else path


def model_args(cfg: AjetConfig, start: Path | None) -> dict[str, Any]:
    """Model, template and tuner flags. `start`: the checkpoint the stage continues from (None: the base)."""
    swift, lora = cfg.backbone.swift, cfg.model.lora
    base = resolve_model_path(cfg.model.path)
    args: dict[str, Any] = {
        "model": str(start) if start is not None and not lora.enabled else base,
        "model_type": swift.model_type or _KNOWN_MODEL_TYPES.get(_model_name(cfg.model.path)),
        "template": swift.template or "ajet",
        "agent_template": swift.agent_template,
        "torch_dtype": None if cfg.model.dtype == "auto" else cfg.model.dtype,
        "tuner_type": "lora" if lora.enabled else "full",
    }
    if lora.enabled:
        args.update(lora_rank=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                    target_modules=lora.target_modules if isinstance(lora.target_modules, list)
                    else [lora.target_modules])
        if start is not None:
            args["adapters"] = [str(start)]  # the adapter of the previous stage goes on training
    return args


def optimizer_args(cfg: AjetConfig, lr: float, total_steps: int) -> dict[str, Any]:
    t = cfg.trainer
    schedule = {"constant": "constant_with_warmup" if t.warmup_steps else "constant"}.get(t.lr_schedule, t.lr_schedule)
    save_steps = t.save_every if t.save_every else max(total_steps, 1)
    return {
        "learning_rate": lr, "lr_scheduler_type": schedule, "warmup_steps": t.warmup_steps,
        "weight_decay": t.weight_decay, "max_grad_norm": t.grad_clip, "seed": t.seed, "data_seed": t.seed,
        "save_strategy": "steps", "save_steps": save_steps, "save_total_limit": t.keep_last,
        "logging_steps": 1, "eval_strategy": "no", "split_dataset_ratio": 0,
        "dataloader_num_workers": 0, "dataset_num_proc": 1, "add_version": False,
        **({"report_to": list(t.report_to)} if t.report_to else {}),  # swift's own trackers (their env: run.py)
    }


def _batch(batch: int, micro: int | None, world: int, what: str) -> tuple[int, int]:
    """(per-device batch, gradient accumulation) for `batch` rows per optimizer update."""
    per_device = micro or max(batch // world, 1)
    if batch % (per_device * world):
        raise ConfigError(f"invalid config: {what}={batch} is not a multiple of backbone.swift.micro_batch_size "
                          f"({per_device}) x {world} processes; change one of them")
    return per_device, batch // (per_device * world)


def _passthrough(cfg: AjetConfig, stage: str) -> dict[str, Any]:
    raw = cfg.backbone.swift.args
    extra = {k: v for k, v in raw.items() if not (k in STAGES and isinstance(v, dict))}
    if isinstance(raw.get(stage), dict):
        extra.update(raw[stage])
    for key in extra:
        flag = key.lstrip("-")
        if flag in _FROM_AJET:
            raise ConfigError(f"invalid config: backbone.swift.args.{key} is set by ajet from ajet.{_FROM_AJET[flag]}; "
                              "set that key instead")
    return {k.lstrip("-"): v for k, v in extra.items()}


def stage_plan(cfg: AjetConfig, stage: str, stage_dir: Path, dataset: Path, start: Path | None,
               plugin: Path, rows: int) -> StagePlan:
    """The swift command line of `stage`; `rows`: rows in its dataset (to count steps)."""
    world = world_size(cfg)
    common = {"output_dir": str(stage_dir / "output"), "dataset": [str(dataset)], "external_plugins": [str(plugin)]}
    if stage == "sft":
        s = cfg.sft
        per_device, accum = _batch(s.batch_size, cfg.backbone.swift.micro_batch_size, world, "sft.batch_size")
        steps = _epoch_steps(rows, s.batch_size, s.epochs)
        args = {**model_args(cfg, start), **common, "num_train_epochs": s.epochs,
                "per_device_train_batch_size": per_device, "gradient_accumulation_steps": accum,
                **optimizer_args(cfg, s.lr or cfg.trainer.lr, steps)}
        if s.neftune_alpha:
            args["neftune_noise_alpha"] = s.neftune_alpha
        return _finish(StagePlan(stage, "sft", args, stage_dir, steps), cfg, stage)
    if stage == "dpo":
        d = cfg.dpo
        per_device, accum = _batch(d.batch_size, cfg.backbone.swift.micro_batch_size, world, "dpo.batch_size")
        steps = _epoch_steps(rows, d.batch_size, d.epochs)
        args = {**model_args(cfg, start), **common, **_preference_loss(d), "beta": d.beta,
                "label_smoothing": d.label_smoothing, "num_train_epochs": d.epochs,
                "per_device_train_batch_size": per_device, "gradient_accumulation_steps": accum,
                **optimizer_args(cfg, d.lr or cfg.trainer.lr, steps)}
        return _finish(StagePlan(stage, "rlhf", args, stage_dir, steps), cfg, stage)
    return _finish(_grpo_plan(cfg, stage_dir, common, start), cfg, stage)


def _preference_loss(d: DpoConfig) -> dict[str, Any]:
    """swift's flags for dpo.loss_type / reference_free: SimPO is swift's rlhf_type simpo (its CPO trainer)
    with the NLL term off (cpo_alpha 0), so the loss is SimPO's own, as the debug backbone computes it."""
    if d.loss_type == "simpo":
        return {"rlhf_type": "simpo", "simpo_gamma": d.simpo_gamma, "cpo_alpha": 0.0}
    flags: dict[str, Any] = {"rlhf_type": "dpo", "loss_type": None if d.loss_type == "sigmoid" else [d.loss_type]}
    if d.reference_free:
        flags["reference_free"] = True
    return flags


def _grpo_plan(cfg: AjetConfig, stage_dir: Path, common: dict[str, Any], start: Path | None) -> StagePlan:
    r, g, t, swift = cfg.rollout, cfg.grpo, cfg.trainer, cfg.backbone.swift
    episodes = r.batch_tasks * r.group_size
    world = world_size(cfg)
    if episodes % (world * t.updates_per_step):
        raise ConfigError(f"invalid config: rollout.batch_tasks x rollout.group_size = {episodes} episodes per step "
                          f"must split evenly into trainer.updates_per_step={t.updates_per_step} updates on {world} "
                          "processes")
    per_device = episodes // (world * t.updates_per_step)
    steps = t.steps * t.updates_per_step
    args: dict[str, Any] = {
        **model_args(cfg, start), **common, "rlhf_type": "grpo",
        "reward_funcs": ["ajet_judge"], "num_generations": r.group_size,
        "per_device_train_batch_size": per_device, "gradient_accumulation_steps": 1,
        "steps_per_generation": t.updates_per_step, "num_iterations": 1, "max_steps": steps,
        "temperature": r.temperature, "top_p": r.top_p, "max_completion_length": r.max_tokens_per_turn,
        "max_length": r.max_prompt_tokens + r.max_tokens_per_turn, "max_turns": r.max_turns,
        "beta": g.beta, "epsilon": g.epsilon, "epsilon_high": g.epsilon_high,
        "scale_rewards": "group" if g.scale_rewards else "none",
        "loss_type": "dapo" if g.loss_agg == "token" else "grpo",
        "use_vllm": swift.use_vllm, "dataset_shuffle": True,
        **optimizer_args(cfg, t.lr, steps),
    }
    if swift.use_vllm:  # the workflow runs on the rollout server, which loads the same plugin
        args.update(vllm_mode="server", vllm_server_host=[swift.vllm_server_host],
                    vllm_server_port=[swift.vllm_server_port], vllm_server_pass_dataset=True)
    else:
        args["multi_turn_scheduler"] = "ajet_workflow"
    return StagePlan("grpo", "rlhf", args, stage_dir, steps, t.updates_per_step)


def _finish(plan: StagePlan, cfg: AjetConfig, stage: str) -> StagePlan:
    swift = cfg.backbone.swift
    if swift.deepspeed:
        plan.args["deepspeed"] = swift.deepspeed
    plan.args.update(_passthrough(cfg, stage))
    plan.args = {k: v for k, v in plan.args.items() if v is not None}  # None: swift's own default
    return plan


def _epoch_steps(rows: int, batch: int, epochs: float) -> int:
    import math

    return max(1, math.ceil(math.ceil(rows / batch) * epochs))


def rollout_server_command(cfg: AjetConfig, plan: StagePlan, python: Path) -> list[str]:
    """The `swift rollout` command that serves GRPO rollouts (vLLM, server mode) with ajet's plugin."""
    a = plan.args
    cmd = [str(python), "-m", "swift.cli.main", "rollout", "--model", a["model"], "--vllm_use_async_engine", "true",
           "--multi_turn_scheduler", "ajet_workflow", "--max_turns", str(a["max_turns"]),
           "--external_plugins", *a["external_plugins"], "--port", str(cfg.backbone.swift.vllm_server_port)]
    for key in ("model_type", "template", "agent_template"):
        if a.get(key):
            cmd += [f"--{key}", str(a[key])]
    if a.get("adapters"):
        cmd += ["--adapters", *a["adapters"]]
    return cmd
