"""A model name, folder, checkpoint or run folder as a folder the hf engine loads.

`ajet eval --model` and the local endpoint BFCL evaluates (`ajet.serving.local`) take any of these:
a training checkpoint (or a run folder: its newest checkpoint) is merged into a model folder first
(once: a merged folder already there is reused), in the backbone's own way when a backbone wrote it.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

console = Console()


def checkpoint_label(given: Path, checkpoint: Path, backbone: str) -> str:
    """A short, unique folder label for a backbone's checkpoint: its path below the run folder the
    user named (stage and step, e.g. `grpo-checkpoint-2`), without the layout's fixed folder names."""
    checkpoint, given = checkpoint.resolve(), given.resolve()
    parts = checkpoint.relative_to(given).parts if checkpoint != given and checkpoint.is_relative_to(given) else ()
    kept = [p for p in parts if p not in (backbone, "output", "checkpoints")]
    return "-".join(kept) if kept else f"{checkpoint.parent.name}-{checkpoint.name}"


def model_folder(model: str, run_dir: Path) -> str:
    """A model name or folder as is; a training checkpoint (or a run folder: its newest checkpoint)
    merged into `run_dir/model-...` first, so any checkpoint can be evaluated or served directly."""
    from ajet.backbones import checkpoint_owner
    from ajet.export.dispatch import export_checkpoint
    from ajet.trainer.checkpoint import latest_checkpoint, resolve_checkpoint

    path = Path(model)
    owner = checkpoint_owner(path)
    if owner is not None:  # a backbone's own format (llamafactory, swift): its export merges
        backbone, checkpoint = owner
        merged = run_dir / f"model-{backbone.name}-{checkpoint_label(path, checkpoint, backbone.name)}"
        if not (merged / "config.json").is_file():
            export_checkpoint(path, merged, merge=True)
        console.print(f"evaluating {backbone.name} checkpoint {checkpoint} (merged into {merged})")
        return str(merged)
    if (path / "checkpoints").is_dir():
        path = latest_checkpoint(path) or path
    if not (path / "state.json").is_file():
        return model
    checkpoint = resolve_checkpoint(path)
    merged = run_dir / f"model-{checkpoint.name}"
    if not (merged / "config.json").is_file():
        export_checkpoint(checkpoint, merged, merge=True)
    console.print(f"evaluating checkpoint {checkpoint} (merged into {merged})")
    return str(merged)
