"""`ajet export` and `ajet eval --model`: a checkpoint goes to the export of the backbone that wrote it
(its `ajet_checkpoint.json` names it: `ajet.backbones.checkpoint_owner`), any other to ajet's own
(`ajet.trainer.export`)."""

from __future__ import annotations

from pathlib import Path

from ajet.backbones import checkpoint_owner


def export_checkpoint(checkpoint: str | Path, out: str | Path, merge: bool = False) -> Path:
    """`ajet export` / `ajet eval --model`: a checkpoint (or run folder) a backbone wrote in its own
    format goes to that backbone's export, any other to ajet's own (`ajet.trainer.export`)."""
    owner = checkpoint_owner(checkpoint)
    if owner is not None:
        return owner[0].call("export", owner[1], Path(out), merge)
    from ajet.trainer.export import export_checkpoint as export_own

    return export_own(checkpoint=checkpoint, out=out, merge=merge)
