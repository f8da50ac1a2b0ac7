"""ajet's config compiled into LLaMA-Factory's training arguments (one YAML per stage).

Every LLaMA-Factory key ajet sets comes from one ajet key (`OWNED` names it), so a user never sets
the same thing twice: `ajet.backbone.llamafactory.args` may add any other LLaMA-Factory key, and is
refused for an owned one with the ajet key to use instead. `TUNABLE` keys have ajet defaults that
`args` may override (logging and batching details ajet does not model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ajet.config.schema import AjetConfig
from ajet.errors import ConfigError

# LLaMA-Factory key -> the ajet key it comes from.
OWNED: dict[str, str] = {
    "model_name_or_path": "model.path", "adapter_name_or_path": "algorithm (the previous stage's adapter)",
    "stage": "algorithm", "do_train": "algorithm", "finetuning_type": "model.lora.enabled",
    "lora_rank": "model.lora.rank", "lora_alpha": "model.lora.alpha", "lora_dropout": "model.lora.dropout",
    "lora_target": "model.lora.target_modules", "dataset": "sft.data / dpo.data", "dataset_dir": "output_dir",
    "template": "backbone.llamafactory.template", "tool_format": "backbone.llamafactory.tool_format",
    "cutoff_len": "backbone.llamafactory.cutoff_len", "output_dir": "output_dir",
    "num_train_epochs": "sft.epochs / dpo.epochs", "learning_rate": "sft.lr / dpo.lr / trainer.lr",
    "lr_scheduler_type": "trainer.lr_schedule", "warmup_steps": "trainer.warmup_steps",
    "weight_decay": "trainer.weight_decay", "max_grad_norm": "trainer.grad_clip", "seed": "trainer.seed",
    "save_steps": "trainer.save_every", "save_strategy": "trainer.save_every",
    "save_total_limit": "trainer.keep_last", "pref_beta": "dpo.beta", "dpo_label_smoothing": "dpo.label_smoothing",
    "pref_loss": "dpo.loss_type", "simpo_gamma": "dpo.simpo_gamma", "neftune_noise_alpha": "sft.neftune_alpha",
    "use_cpu": "model.device", "bf16": "model.dtype", "fp16": "model.dtype",
    "tokenized_path": "backbone.llamafactory.render",
}
# ajet's defaults for keys it does not model; `args` may change them.
TUNABLE: dict[str, Any] = {
    "logging_steps": 1, "disable_tqdm": True, "report_to": "none",
    "overwrite_cache": True, "dataloader_num_workers": 0,
}
_SCHEDULES = {"constant": "constant", "linear": "linear", "cosine": "cosine"}


def check_config(cfg: AjetConfig) -> None:
    """Refuse what this backbone cannot do before anything runs (clear errors, nothing started)."""
    lf = cfg.backbone.llamafactory
    if cfg.model.chat_template and lf.render == "llamafactory":
        raise ConfigError("model.chat_template is not used with backbone.llamafactory.render=llamafactory "
                          "(LLaMA-Factory renders turns with its own templates); remove it and pick one with "
                          "ajet.backbone.llamafactory.template=NAME, or set backbone.llamafactory.render=ajet")
    if "dpo" in cfg.stages and not cfg.dpo.data:
        raise ConfigError("the llamafactory backbone trains DPO from a preference file: set dpo.data=pairs.jsonl "
                          "(online DPO from rollouts needs --backbone=debug)")
    if "sft" in cfg.stages and cfg.sft.curated:
        raise ConfigError("sft.task_weights, sft.coreset and sft.replay are applied by the debug backbone only (they choose rows "
                          "with the policy's own losses in-process); train SFT with --backbone=debug, or remove them")
    if "dpo" in cfg.stages and cfg.dpo.reference_free:
        raise ConfigError("dpo.reference_free is not supported by the llamafactory backbone (LLaMA-Factory has no "
                          "such option); use dpo.loss_type=simpo (reference-free by design), or --backbone=debug / swift")
    if "dpo" in cfg.stages and cfg.dpo.loss_type == "simpo" and cfg.dpo.label_smoothing:
        raise ConfigError("dpo.label_smoothing with dpo.loss_type=simpo is not supported by the llamafactory backbone "
                          "(LLaMA-Factory smooths the sigmoid loss only); set dpo.label_smoothing=0")
    if cfg.model.lora.layers is not None:
        raise ConfigError("model.lora.layers is applied by the debug backbone only (it adapts the last N decoder "
                          "layers and reuses the frozen layers' output); remove it, or use --backbone=debug")
    if isinstance(cfg.model.lora.train_tokens, list) and cfg.model.lora.train_tokens:
        raise ConfigError("model.lora.train_tokens is applied by the debug backbone only (it trains those tokens' "
                          "embedding rows beside the adapter); remove it, or use --backbone=debug")
    if cfg.trainer.eval_every:
        raise ConfigError(f"trainer.eval_every={cfg.trainer.eval_every} is not supported by the llamafactory "
                          "backbone (its evaluation is rollouts, which LLaMA-Factory does not run); set "
                          "trainer.eval_every=0 and run `ajet eval --model RUN_FOLDER` after training")
    for key in lf.args:
        if key in OWNED:
            raise ConfigError(f"ajet.backbone.llamafactory.args.{key} is set from ajet's {OWNED[key]}; set that "
                              f"instead (args is for LLaMA-Factory keys ajet does not have)")


def _lora_target(target: list[str] | str) -> str:
    return "all" if target == "all-linear" else ",".join(target)


def _batching(batch_size: int, micro_batch_tokens: int, cutoff_len: int) -> dict[str, int]:
    """`batch_size` conversations per update, as micro-batches that fit `micro_batch_tokens` at the
    longest (`cutoff_len`) and divide the batch exactly, accumulated (the update is the same; the
    peak memory is that of one micro-batch)."""
    fit = max(1, min(batch_size, micro_batch_tokens // cutoff_len))
    per_device = max(d for d in range(1, fit + 1) if batch_size % d == 0)
    return {"per_device_train_batch_size": per_device, "gradient_accumulation_steps": batch_size // per_device}


def _precision(cfg: AjetConfig, cuda: bool) -> dict[str, Any]:
    dtype = cfg.model.dtype
    if dtype == "auto":
        dtype = "bfloat16" if cuda else "float32"
    return {"bf16": dtype == "bfloat16", "fp16": dtype == "float16"}


def stage_args(cfg: AjetConfig, stage: str, *, model_path: str, dataset_dir: Path, output_dir: Path,
               adapter: Path | None, cuda: bool) -> dict[str, Any]:
    """LLaMA-Factory's arguments for one stage ('sft' or 'dpo') of `cfg`. cuda: a GPU is there."""
    cuda = cuda and cfg.model.device != "cpu"
    lf, lora, trainer = cfg.backbone.llamafactory, cfg.model.lora, cfg.trainer
    section = cfg.sft if stage == "sft" else cfg.dpo
    args: dict[str, Any] = {
        "model_name_or_path": model_path, "stage": stage, "do_train": True,
        "finetuning_type": "lora" if lora.enabled else "full",
        "dataset": f"ajet_{stage}", "dataset_dir": str(dataset_dir), "template": lf.template,
        "tool_format": lf.tool_format, "cutoff_len": lf.cutoff_len, "output_dir": str(output_dir),
        **_batching(section.batch_size, trainer.micro_batch_tokens, lf.cutoff_len), "num_train_epochs": section.epochs,
        "learning_rate": section.lr or trainer.lr, "lr_scheduler_type": _SCHEDULES[trainer.lr_schedule],
        "warmup_steps": trainer.warmup_steps, "weight_decay": trainer.weight_decay,
        "max_grad_norm": trainer.grad_clip, "seed": trainer.seed, "use_cpu": not cuda,
        **_precision(cfg, cuda), **TUNABLE,
    }
    if trainer.report_to:  # LLaMA-Factory's own trackers (their env: run.py)
        args["report_to"] = list(trainer.report_to)
    if trainer.save_every:
        args["save_steps"] = trainer.save_every
    else:
        args["save_strategy"] = "no"  # LLaMA-Factory still saves the final model into output_dir
    if trainer.keep_last:
        args["save_total_limit"] = trainer.keep_last
    if lora.enabled:
        args.update(lora_rank=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                    lora_target=_lora_target(lora.target_modules))
        if adapter is not None:  # a later stage goes on training the earlier stage's adapter
            args["adapter_name_or_path"] = str(adapter)
    elif adapter is not None:
        args["model_name_or_path"] = str(adapter)  # full fine-tuning: the earlier stage's weights
    if stage == "sft" and cfg.sft.neftune_alpha:
        args["neftune_noise_alpha"] = cfg.sft.neftune_alpha
    if stage == "dpo":
        args.update(pref_beta=cfg.dpo.beta, dpo_label_smoothing=cfg.dpo.label_smoothing, pref_loss=cfg.dpo.loss_type)
        if cfg.dpo.loss_type == "simpo":
            args["simpo_gamma"] = cfg.dpo.simpo_gamma
    args.update(lf.args)
    return {k: v for k, v in args.items() if v is not None}


def dataset_info(stage: str, file_name: str) -> dict[str, Any]:
    """The `dataset_info.json` entry that tells LLaMA-Factory how to read the converted file."""
    columns = {"messages": "conversations", "system": "system", "tools": "tools"}
    entry: dict[str, Any] = {"file_name": file_name, "formatting": "sharegpt", "columns": columns}
    if stage == "dpo":
        entry["ranking"] = True
        columns.update(chosen="chosen", rejected="rejected")
    return {f"ajet_{stage}": entry}
