"""`ajet export`: turn a checkpoint into something other tools load.

    export_checkpoint(ckpt, out)              LoRA: the adapter (adapter_config.json,
                                              adapter_model.safetensors) + tokenizer and chat template;
                                              full fine-tuning: the model folder + tokenizer.
    export_checkpoint(ckpt, out, merge=True)  LoRA: base + adapter merged (merge_and_unload) into a plain
                                              Hugging Face model folder: config.json, safetensors,
                                              generation_config.json, tokenizer, chat_template.jinja.
                                              AutoModelForCausalLM.from_pretrained and vLLM load it.

Every export carries the chat template the run rendered with; when that template cannot render tools
(SmolLM2's), it is written with ajet's tool rewrite in front (`ajet.tool_template`), so vLLM,
llama.cpp or transformers render tools, calls and results as training did.

The base model is the one named in the checkpoint's state.json. The merge runs in float32 on CPU
(a merge in bf16 rounds the adapter update away); `dtype` casts the merged weights before saving.
The output is written to a temp folder next to `out` and renamed, so a failed export leaves nothing;
the temp folder of an export killed outright (kill -9) is removed by the next export into that folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ajet.errors import CheckpointError
from ajet.trainer.checkpoint import read_state, resolve_checkpoint

_DTYPES = ("float32", "bfloat16", "float16")


def export_checkpoint(
    checkpoint: str | Path,
    out: str | Path,
    merge: bool = False,
    *,
    dtype: str | None = None,
) -> Path:
    """Export `checkpoint` (a step-* folder, or a run folder: its latest) to `out`; returns `out`.

    dtype: 'float32' | 'bfloat16' | 'float16' for merged / full weights (None: float32).
    A checkpoint another backbone wrote in its own format is that backbone's to export
    (`ajet.export.dispatch.export_checkpoint` dispatches).
    """
    ckpt = resolve_checkpoint(checkpoint)
    state = read_state(ckpt)
    if dtype is not None and dtype not in _DTYPES:
        raise CheckpointError(f"export dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
    out = Path(out)
    with staged_folder(out) as tmp:
        if state.get("lora") and merge:
            _merge(ckpt, state, tmp, dtype)
        elif state.get("lora"):
            _copy_files(ckpt / "adapter", tmp)
            _point_adapter_at_base(tmp / "adapter_config.json", state)
        elif dtype not in (None, "float32"):
            _save_full(ckpt, tmp, dtype)
        else:
            _copy_files(ckpt / "model", tmp)
        _copy_files(ckpt / "tokenizer", tmp)
        _serve_as_trained(tmp)
    return Path(out)


def _serve_as_trained(folder: Path) -> None:
    """Give the export's chat template (chat_template.jinja, or tokenizer_config.json's) ajet's tool
    rewrite when it cannot render tools itself."""
    from ajet.tool_template import served_template

    template_file, config_file = folder / "chat_template.jinja", folder / "tokenizer_config.json"
    if template_file.is_file():
        template_file.write_text(served_template(template_file.read_text(encoding="utf-8")), encoding="utf-8")
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    if isinstance(config.get("chat_template"), str):
        config["chat_template"] = served_template(config["chat_template"])
        config_file.write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")


@contextmanager
def staged_folder(out: str | Path) -> Iterator[Path]:
    """A temp folder next to `out`, renamed to `out` when the block succeeds and removed when it fails.

    Refuses an `out` that exists and is not an empty folder."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CheckpointError(f"export target {str(out)!r} exists and is not empty; choose another --out or remove it")
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out.parent)
    # The pid in the name tells a later export whether the folder's owner is still at work.
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            out.rmdir()  # empty (checked above)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_STAGING = re.compile(r"^\..+\.tmp-(?:(\d+)-)?[A-Za-z0-9_]+$")
LEGACY_STALE_S = 3600.0  # a staging folder named without its pid is stale after an hour untouched


def remove_stale_staging(parent: Path) -> list[Path]:
    """Remove the staging folders (`.<out>.tmp-<pid>-*`) that a killed export left in `parent`: those
    whose pid is no longer running (kill -9 runs no cleanup), and those named without a pid (older
    ajet) untouched for LEGACY_STALE_S. A live export's folder is never touched. Returns what went."""
    removed = []
    for path in parent.iterdir() if parent.is_dir() else ():
        found = _STAGING.match(path.name)
        if not found or not path.is_dir():
            continue
        pid = found.group(1)
        stale = not _alive(int(pid)) if pid else time.time() - path.stat().st_mtime > LEGACY_STALE_S
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _copy_files(src: Path, dst: Path) -> None:
    if not src.is_dir():
        raise CheckpointError(f"checkpoint folder {str(src.parent)!r} has no {src.name}/; is it an ajet checkpoint?")
    for path in src.iterdir():
        if path.is_file():
            shutil.copy2(path, dst / path.name)


def _point_adapter_at_base(config_path: Path, state: dict) -> None:
    """The adapter names its base; use the resolved local folder the run trained on."""
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = state["model_path"]
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")


def _load_base(state: dict):
    import torch
    from transformers import AutoModelForCausalLM

    from ajet.models import resolve_model_path

    path = state.get("model_path")
    if not path or not Path(path).exists():  # the cache moved: resolve the configured name again
        path = resolve_model_path(state["model"]["path"])
    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    except OSError as exc:
        raise CheckpointError(f"cannot load the base model {path!r} named by the checkpoint: {exc}") from exc


def _merge(ckpt: Path, state: dict, out: Path, dtype: str | None) -> None:
    import torch
    from peft import PeftModel

    base = _load_base(state)
    model = PeftModel.from_pretrained(base, str(ckpt / "adapter"))
    merged = model.merge_and_unload()
    if dtype is not None:
        merged = merged.to(getattr(torch, dtype))
    merged.save_pretrained(out, safe_serialization=True)


def _save_full(ckpt: Path, out: Path, dtype: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(ckpt / "model"), dtype=getattr(torch, dtype))
    model.save_pretrained(out, safe_serialization=True)
