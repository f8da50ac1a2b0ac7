"""Checkpoints the llamafactory backbone writes, and `ajet export` of them.

LLaMA-Factory writes Hugging Face Trainer folders: `checkpoints/<stage>/` holds the final adapter
(LoRA) or model (full), `checkpoints/<stage>/checkpoint-N/` the intermediate ones. ajet adds
`ajet_checkpoint.json` to each: {"backbone": "llamafactory", "stage", "step", "base_model",
"finetuning_type", "template", "tool_format", "python", "final"}; the run folder's own
`ajet_checkpoint.json` names the newest final one ({"backbone", "latest"}). `ajet export` and
`ajet eval --model` find the marker and call `export` below through the backbone registry.

Export: without --merge, the adapter and tokenizer files, with `base_model_name_or_path` set to the
base the run trained; with --merge, `llamafactory-cli export` merges the adapter into the base (on
CPU, in the managed environment) into a plain Hugging Face model folder. The result is written to a
temporary folder beside `out` and renamed, so a failed export leaves nothing behind.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from ajet.errors import CheckpointError

MARKER = "ajet_checkpoint.json"
BACKBONE = "llamafactory"
_STEP = re.compile(r"^checkpoint-(\d+)$")
_WEIGHTS = ("adapter_model.safetensors", "model.safetensors", "model.safetensors.index.json")
_TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
              "vocab.json", "merges.txt", "tokenizer.model", "generation_config.json")


def read(path: Path) -> dict[str, Any]:
    marker = Path(path) / MARKER
    try:
        return json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot read {marker}: {exc}") from exc


def is_final(folder: Path) -> bool:
    return (folder / MARKER).is_file() and bool(read(folder).get("final"))


def last_step(folder: Path) -> int:
    """The step of the newest checkpoint-N in an output folder (0: none)."""
    steps = [int(m.group(1)) for p in folder.glob("checkpoint-*") if (m := _STEP.match(p.name)) and _complete(p)]
    return max(steps, default=0)


def _complete(folder: Path) -> bool:
    return (folder / "trainer_state.json").is_file() and any((folder / w).is_file() for w in _WEIGHTS)


def _trained_steps(folder: Path) -> int:
    state = folder / "trainer_state.json"
    if state.is_file():
        return int(json.loads(state.read_text(encoding="utf-8")).get("global_step", 0))
    return int(m.group(1)) if (m := _STEP.match(folder.name)) else 0


def _marker(stage: str, base_model: str, args: dict[str, Any], step: int, final: bool, python: str) -> dict[str, Any]:
    return {"backbone": BACKBONE, "stage": stage, "step": step, "base_model": base_model,
            "finetuning_type": args["finetuning_type"], "template": args.get("template"),
            "tool_format": args.get("tool_format"), "python": python, "final": final}


def mark_stage(out: Path, *, stage: str, base_model: str, args: dict[str, Any], python: str) -> None:
    """Mark a finished stage's output folder (its final weights) as an ajet checkpoint."""
    if not any((out / w).is_file() for w in _WEIGHTS):
        raise CheckpointError(f"LLaMA-Factory finished but wrote no weights into {out}")
    (out / MARKER).write_text(json.dumps(_marker(stage, base_model, args, _trained_steps(out), True, python),
                                         indent=1), encoding="utf-8")


def mark_intermediate(out: Path, *, stage: str, base_model: str, args: dict[str, Any], python: str) -> None:
    """Mark every complete checkpoint-N of a stage (also after a failed run: they can be exported)."""
    for folder in sorted(out.glob("checkpoint-*")):
        if _STEP.match(folder.name) and _complete(folder) and not (folder / MARKER).is_file():
            marker = _marker(stage, base_model, args, _trained_steps(folder), False, python)
            (folder / MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")


def mark_run(run_dir: Path, latest: Path) -> None:
    marker = {"backbone": BACKBONE, "latest": str(latest.relative_to(run_dir))}
    (run_dir / MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")


def resolve(path: Path) -> tuple[Path, dict[str, Any]]:
    """(checkpoint folder, its marker) for a checkpoint folder or a run folder (its newest checkpoint)."""
    path = Path(path)
    marker = read(path)
    if "latest" in marker:
        path = path / marker["latest"]
        marker = read(path)
    if marker.get("backbone") != BACKBONE:
        raise CheckpointError(f"{path} was written by the {marker.get('backbone')!r} backbone, not llamafactory")
    return path, marker


# ---------------------------------------------------------------------------------------- export
def export(checkpoint: Path, out: Path, merge: bool = False) -> Path:
    """`ajet export` of a llamafactory checkpoint (see the module docstring); returns `out`."""
    from ajet.trainer.export import staged_folder

    ckpt, marker = resolve(checkpoint)
    out = Path(out)
    with staged_folder(out) as tmp:
        if marker["finetuning_type"] == "lora" and merge:
            _merge(ckpt, marker, tmp)
        else:
            _copy(ckpt, tmp, marker)
    return out


def _copy(ckpt: Path, dst: Path, marker: dict[str, Any]) -> None:
    skip = {MARKER, "optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin", "trainer_state.json"}
    for path in ckpt.iterdir():
        if path.is_file() and path.name not in skip and not path.name.endswith((".jsonl", ".md")):
            shutil.copy2(path, dst / path.name)
    config = dst / "adapter_config.json"
    if config.is_file():  # the adapter names the local base folder the run trained on
        data = json.loads(config.read_text(encoding="utf-8"))
        data["base_model_name_or_path"] = marker["base_model"]
        config.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _merge(ckpt: Path, marker: dict[str, Any], dst: Path) -> None:
    from ajet.backbone.launch import run_streaming
    from ajet.backbone.llamafactory.env import backend_env, environment_python

    python = environment_python(marker.get("python"))
    args = {"model_name_or_path": marker["base_model"], "adapter_name_or_path": str(ckpt),
            "finetuning_type": "lora", "template": marker.get("template"), "tool_format": marker.get("tool_format"),
            "export_dir": str(dst), "export_device": "cpu", "export_size": 5}
    spec = dst / "llamafactory_export.yaml"
    spec.write_text(yaml.safe_dump({k: v for k, v in args.items() if v is not None}), encoding="utf-8")
    log = dst.parent / f"{dst.name}.export.log"
    try:
        run_streaming([str(python.parent / "llamafactory-cli"), "export", str(spec)], name="llamafactory-cli export",
                      log_path=log, env=backend_env(), idle_timeout_s=1800)
    finally:
        spec.unlink(missing_ok=True)
    log.unlink(missing_ok=True)
    if not (dst / "config.json").is_file():
        raise CheckpointError(f"llamafactory-cli export wrote no config.json into {dst}")
    for name in _TOKENIZER:  # the tokenizer files the run trained with (chat template included)
        if (ckpt / name).is_file() and not (dst / name).is_file():
            shutil.copy2(ckpt / name, dst / name)
