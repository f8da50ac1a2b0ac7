"""Atomic checkpoints of the debug trainer, and resuming from them.

Layout of `run_dir/checkpoints/step-000003/`:

    adapter/        peft adapter (adapter_config.json, adapter_model.safetensors)   under LoRA, with the
                    rows of model.lora.train_tokens as peft's trainable tokens
    model/          full HF model folder (config, safetensors)                       under full fine-tuning
    tokenizer/      tokenizer files and chat_template.jinja (the template the gateway rendered with)
    value_head.safetensors   PPO's critic (`policy.value_head`), when the policy has one
    optimizer.pt    optimizer.state_dict()
    scheduler.pt    scheduler.state_dict() (absent when there was no scheduler)
    rng.pt          python, numpy, torch (and CUDA) RNG states
    state.json      step, model path and config, dtype, `extra` (the caller's state: data position, ...)
    COMPLETE        manifest {relative path: size in bytes}, written last

Atomicity: everything is written into `checkpoints/.tmp-step-000003-XXXX/` in the same folder,
each file is fsynced, COMPLETE is written and fsynced, and only then the folder is renamed to its
final name (a rename within one filesystem is atomic). A crash at any moment leaves either no
`step-*` folder or a complete one; leftover `.tmp-*` folders are never read and are removed by the
next save. `latest_checkpoint` and `load_checkpoint` check COMPLETE's manifest against the files.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ajet.errors import CheckpointError, ModelError
from ajet.trainer import token_rows
from ajet.trainer.policy import Policy

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
COMPLETE = "COMPLETE"
_STEP_DIR = re.compile(r"^step-(\d+)$")


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    policy: Policy,
    optimizer: torch.optim.Optimizer | None,
    scheduler: Any | None,
    extra_state: dict[str, Any] | None = None,
    *,
    keep_last: int | None = None,
) -> Path:
    """Write `run_dir/checkpoints/step-{step:06d}/` atomically and return its path.

    extra_state: JSON-serialisable state of the caller (data position, stage, metrics...), returned
    by `load_checkpoint` under "extra". keep_last: keep only the newest K checkpoints (None: all).
    """
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(root)
    final = root / f"step-{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=root))
    old: Path | None = None
    try:
        _write_weights(tmp, policy)
        _write_tokenizer(tmp / "tokenizer", policy)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        if scheduler is not None:
            torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        torch.save(_rng_state(), tmp / "rng.pt")
        state = {
            "format": FORMAT_VERSION,
            "step": step,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "model_path": policy.model_path,
            "model": policy.model_cfg.model_dump(),
            "lora": policy.is_lora,
            "dtype": str(policy.dtype).removeprefix("torch."),
            "extra": extra_state or {},
        }
        (tmp / "state.json").write_text(json.dumps(state, indent=2, default=str), encoding="utf-8")
        _finalise(tmp)
        if final.exists():  # the same step saved again (e.g. after a resume): swap, never delete first
            old = root / f".old-{final.name}-{os.getpid()}"
            os.rename(final, old)
        os.rename(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not final.exists():
            os.rename(old, final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    if keep_last is not None:
        prune_checkpoints(run_dir, keep_last)
    return final


VALUE_HEAD = "value_head.safetensors"


def _write_weights(folder: Path, policy: Policy) -> None:
    if policy.value_head is not None:
        from safetensors.torch import save_file

        save_file({k: v.detach().contiguous() for k, v in policy.value_head.state_dict().items()}, folder / VALUE_HEAD)
    if policy.is_lora:
        policy.model.save_pretrained(folder / "adapter", safe_serialization=True)
        rows = token_rows.rows_of(policy.model)
        if rows is not None:
            _add_token_rows(folder / "adapter", policy.model, rows)
    else:
        policy.causal_lm().save_pretrained(folder / "model", safe_serialization=True)


def _add_token_rows(adapter: Path, model: torch.nn.Module, rows: token_rows.TokenRows) -> None:
    """Write `model.lora.train_tokens`' rows into the saved adapter as peft writes trainable tokens, so that
    peft (and the merge of `ajet export`) loads them with the adapter."""
    from safetensors.torch import load_file, save_file

    tensors, indices = token_rows.peft_entries(model, rows)
    weights_file, config_file = adapter / "adapter_model.safetensors", adapter / "adapter_config.json"
    save_file({**load_file(weights_file), **tensors}, weights_file, metadata={"format": "pt"})
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["trainable_token_indices"] = indices
    config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")


def _write_tokenizer(folder: Path, policy: Policy) -> None:
    policy.tokenizer.save_pretrained(folder)
    if policy.chat_template:  # the template actually used, even when the tokenizer had another
        (folder / "chat_template.jinja").write_text(policy.chat_template, encoding="utf-8")


def _finalise(folder: Path) -> None:
    """fsync every file, then write and fsync the COMPLETE manifest, then fsync the folders."""
    manifest: dict[str, int] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        _fsync_file(path)
        manifest[path.relative_to(folder).as_posix()] = path.stat().st_size
    marker = folder / COMPLETE
    marker.write_text(json.dumps({"format": FORMAT_VERSION, "files": manifest}, indent=1), encoding="utf-8")
    _fsync_file(marker)
    for sub in [p for p in folder.rglob("*") if p.is_dir()] + [folder]:
        _fsync_dir(sub)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some platforms cannot open folders; the rename is still atomic there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _clean_leftovers(root: Path) -> None:
    """Remove temp folders of crashed saves; put back a checkpoint a crash left mid-swap."""
    for path in root.iterdir():
        if not path.is_dir() or not path.name.startswith((".tmp-", ".old-", ".del-")):
            continue
        if path.name.startswith(".old-"):
            name = path.name[len(".old-"):].rsplit("-", 1)[0]
            if not (root / name).exists() and _problem(path) is None:
                os.rename(path, root / name)
                continue
        shutil.rmtree(path, ignore_errors=True)


def _problem(path: Path) -> str | None:
    """Why `path` is not a complete checkpoint, or None when it is."""
    marker = path / COMPLETE
    if not marker.is_file():
        return f"it has no {COMPLETE} marker (a save was interrupted)"
    try:
        files = json.loads(marker.read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError) as exc:
        return f"its {COMPLETE} manifest is unreadable ({exc})"
    for rel, size in files.items():
        f = path / rel
        if not f.is_file():
            return f"{rel} is missing"
        if f.stat().st_size != size:
            return f"{rel} has {f.stat().st_size} bytes, the manifest says {size}"
    return None


def verify_checkpoint(path: str | Path) -> Path:
    """Return `path` if it is a complete checkpoint, else raise CheckpointError saying why."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist; pass a step-* folder or a run folder")
    problem = _problem(path)
    if problem is not None:
        raise CheckpointError(
            f"checkpoint {str(path)!r} is partial or corrupt: {problem}; resume from an earlier step-* folder"
        )
    return path


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of the complete checkpoints of a run, oldest first. Partial ones are skipped."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return []
    found = []
    names = {p.name for p in root.iterdir()}
    for path in root.iterdir():
        name = path.name
        if name.startswith(".old-"):  # a crash mid-swap left the only copy of this step here
            name = name[len(".old-"):].rsplit("-", 1)[0]
            if name in names:
                continue
        match = _STEP_DIR.match(name)
        if not match or not path.is_dir():
            continue
        problem = _problem(path)
        if problem is not None:
            log.warning("skipping checkpoint %s: %s", path, problem)
            continue
        found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run folder, or None."""
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def resolve_checkpoint(path: str | Path) -> Path:
    """`--resume` accepts a checkpoint folder or a run folder (its latest checkpoint)."""
    path = Path(path)
    if (path / "state.json").exists() or (path / COMPLETE).exists() or _STEP_DIR.match(path.name):
        return verify_checkpoint(path)
    latest = latest_checkpoint(path)
    if latest is None:
        raise CheckpointError(f"no complete checkpoint under {str(checkpoint_dir(path))!r}; nothing to resume")
    return latest


def prune_checkpoints(run_dir: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` complete checkpoints; returns the deleted paths."""
    if keep_last < 1:
        raise ValueError(f"keep_last must be >= 1, got {keep_last}")
    doomed = [p for _, p in list_checkpoints(run_dir)[:-keep_last]]
    for path in doomed:
        trash = path.parent / f".del-{path.name}"
        os.rename(path, trash)  # out of sight first, so a crash mid-delete leaves no half checkpoint
        shutil.rmtree(trash, ignore_errors=True)
    return doomed


def read_state(path: str | Path) -> dict[str, Any]:
    """state.json of a verified checkpoint."""
    path = verify_checkpoint(path)
    return json.loads((path / "state.json").read_text(encoding="utf-8"))


def load_checkpoint(
    path: str | Path,
    policy: Policy,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    *,
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Restore weights, optimizer, scheduler and RNG states from a checkpoint; return its state.json.

    The policy must be built like the one that was saved (same model, same LoRA on/off and rank).
    """
    path = verify_checkpoint(path)
    state = read_state(path)
    if state.get("format") != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {str(path)!r} has format {state.get('format')!r}; this ajet reads format {FORMAT_VERSION}"
        )
    if bool(state.get("lora")) != policy.is_lora:
        raise CheckpointError(
            f"checkpoint {str(path)!r} was trained with lora.enabled={state.get('lora')} but the policy has "
            f"lora.enabled={policy.is_lora}; set model.lora.enabled to match"
        )
    try:
        _load_weights(path, policy)
        if optimizer is not None:
            if not (path / "optimizer.pt").is_file():
                raise CheckpointError(f"checkpoint {str(path)!r} has no optimizer state")
            optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=True))
        if scheduler is not None and (path / "scheduler.pt").is_file():
            scheduler.load_state_dict(torch.load(path / "scheduler.pt", map_location="cpu", weights_only=True))
        if restore_rng:
            _set_rng_state(torch.load(path / "rng.pt", map_location="cpu", weights_only=True))
    except CheckpointError:
        raise
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} does not fit this policy/optimizer: {exc}") from exc
    return state


def _load_weights(path: Path, policy: Policy) -> None:
    from safetensors.torch import load_file

    # a checkpoint of an earlier stage has no critic: the policy keeps its fresh one
    if policy.value_head is not None and (path / VALUE_HEAD).is_file():
        policy.value_head.load_state_dict(load_file(path / VALUE_HEAD, device=str(policy.device)))
    if policy.is_lora:
        from peft import set_peft_model_state_dict

        weights = load_file(path / "adapter" / "adapter_model.safetensors", device=str(policy.device))
        rows = token_rows.rows_of(policy.model)
        saved_rows = {k: weights.pop(k) for k in list(weights) if k.endswith(token_rows.DELTA_KEY)}
        if rows is not None:
            try:
                token_rows.load_peft_entries(policy.model, rows, saved_rows)
            except ModelError as exc:
                raise CheckpointError(f"checkpoint {str(path)!r}: {exc}") from None
        elif saved_rows:
            raise CheckpointError(f"adapter in {str(path)!r} has trained token rows (model.lora.train_tokens) "
                                  "this policy lacks: resume with the same model.lora.train_tokens")
        result = set_peft_model_state_dict(policy.model, weights)
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        if unexpected:
            raise CheckpointError(f"adapter in {str(path)!r} has weights this policy lacks: {unexpected[:3]}")
        return
    lm = policy.causal_lm()
    weights: dict[str, torch.Tensor] = {}
    for shard in sorted((path / "model").glob("*.safetensors")):
        weights.update(load_file(shard, device=str(policy.device)))
    missing, unexpected = lm.load_state_dict(weights, strict=False)
    tied = {"lm_head.weight"} if getattr(lm.config, "tie_word_embeddings", False) else set()
    missing = [k for k in missing if k not in tied]
    if missing or unexpected:
        raise CheckpointError(
            f"model weights in {str(path)!r} do not match the model: missing={missing[:3]} unexpected={unexpected[:3]}"
        )
    if tied:
        lm.tie_weights()


def _rng_state() -> dict[str, Any]:
    import numpy as np

    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype("int64")), int(pos), int(has_gauss), float(cached)),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype("uint32"), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
