"""`ajet export` of a swift checkpoint (a `checkpoint-N` folder that carries `ajet_checkpoint.json`).

    merge=True   LoRA: `swift export --adapters CKPT --merge_lora true` in the swift environment writes a
                 plain Hugging Face model folder (config, safetensors, tokenizer) that transformers,
                 vLLM and `ajet serve` / `ajet eval --model` load; full fine-tuning: the model files.
    merge=False  LoRA: the adapter (adapter_config.json pointing at the base model, safetensors) and the
                 base model's tokenizer; full fine-tuning: the model files.

Like ajet's own export, the result is written next to `out` and renamed into place, so a failed
export leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ajet.backbone.envs import ajet_path_entry
from ajet.backbone.launch import run_streaming
from ajet.backbone.swift.env import swift_python
from ajet.errors import CheckpointError
from ajet.trainer.export import staged_folder

_MODEL_FILES = (".json", ".safetensors", ".jinja", ".model", ".txt", ".py")
_TRAINER_STATE = {"trainer_state.json", "args.json", "additional_config.json", "ajet_checkpoint.json"}


def export(checkpoint: Path, out: Path, merge: bool) -> Path:
    checkpoint, out = Path(checkpoint), Path(out)
    info = json.loads((checkpoint / "ajet_checkpoint.json").read_text(encoding="utf-8"))
    with staged_folder(out) as tmp:
        if info.get("lora") and merge:
            _merge(checkpoint, info, tmp)
        elif info.get("lora"):
            _copy(checkpoint, tmp, lambda p: p.name.startswith("adapter_"))
            _point_adapter_at_base(tmp / "adapter_config.json", info["base_model"])
            _copy(Path(info["base_model"]), tmp, lambda p: "token" in p.name or p.suffix == ".jinja")
        else:
            _copy(checkpoint, tmp, lambda p: p.suffix in _MODEL_FILES and p.name not in _TRAINER_STATE)
    return out


def _merge(checkpoint: Path, info: dict, tmp: Path) -> None:
    python = swift_python()
    target = tmp / "merged"  # swift writes the folder itself
    plugin = tmp / "ajet_template_plugin.py"
    plugin.write_text("import ajet.backbone.swift.template  # noqa: F401  (--template ajet)\n", encoding="utf-8")
    cmd = [str(python), "-m", "swift.cli.main", "export", "--adapters", str(checkpoint), "--merge_lora", "true",
           "--output_dir", str(target), "--external_plugins", str(plugin)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ajet_path_entry()), os.environ.get("PYTHONPATH"))
                                                       if p),
           "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "MODELSCOPE_REPO_TREE_PAGE_MAX_ATTEMPTS": "1"}
    log = tmp.parent / f"{tmp.name}.swift-export.log"  # outside tmp: kept when the export fails
    run_streaming(cmd, name="swift export --merge_lora", log_path=log, env=env, idle_timeout_s=1800)
    if not (target / "config.json").is_file():
        raise CheckpointError(f"swift export wrote no model into {target}; see {log}")
    log.unlink()
    for path in target.iterdir():
        if path.name != "args.json":
            shutil.move(str(path), tmp / path.name)
    shutil.rmtree(target)
    plugin.unlink()


def _copy(src: Path, dst: Path, keep) -> None:
    if not src.is_dir():
        raise CheckpointError(f"{str(src)!r} does not exist; is the checkpoint or its base model gone?")
    for path in src.iterdir():
        if path.is_file() and keep(path):
            shutil.copy2(path, dst / path.name)


def _point_adapter_at_base(config_path: Path, base: str) -> None:
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = base
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
