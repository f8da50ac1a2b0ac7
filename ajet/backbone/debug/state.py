"""Where a run is: stage, step, data position; and where its folder is when resuming."""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ajet.errors import CheckpointError
from ajet.trainer.checkpoint import latest_checkpoint, resolve_checkpoint


@dataclass
class RunState:
    stage_index: int = 0
    stage_step: int = 0  # steps finished in the current stage
    global_step: int = 0  # steps finished over all stages (checkpoints are named by it)
    epoch: int = 0  # passes over the current stage's data
    cursor: int = 0  # position inside the current epoch's order

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        return cls(**{k: int(data.get(k, 0)) for k in cls.__dataclass_fields__})

    def next_stage(self) -> None:
        self.stage_index += 1
        self.stage_step = self.epoch = self.cursor = 0


class DataOrder:
    """Deterministic batches over `n` items: a fresh seeded shuffle every epoch, position kept in
    the run state so a resumed run continues with the very next batch."""

    def __init__(self, n: int, seed: int, shuffle: bool = True) -> None:
        self.n, self.seed, self.shuffle = n, seed, shuffle

    def order(self, epoch: int) -> list[int]:
        indices = list(range(self.n))
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + epoch).shuffle(indices)
        return indices

    def take(self, state: RunState, size: int) -> list[int]:
        batch: list[int] = []
        while len(batch) < size:
            if state.cursor >= self.n:
                state.epoch, state.cursor = state.epoch + 1, 0
            order = self.order(state.epoch)
            take = min(size - len(batch), self.n - state.cursor)
            batch += order[state.cursor: state.cursor + take]
            state.cursor += take
        return batch


def epochs_to_steps(epochs: float, items: int, batch_size: int) -> int:
    return max(1, math.ceil(epochs * items / batch_size))


def find_resume_dir(output_dir: Path, resume: bool | str) -> tuple[Path, Path]:
    """(run folder, checkpoint) to continue from. `resume` is True (latest) or a path."""
    if isinstance(resume, str):
        path = Path(resume)
        if (path / "checkpoints").is_dir():  # a run folder
            ckpt = latest_checkpoint(path)
            if ckpt is None:
                raise CheckpointError(f"run folder {str(path)!r} has no complete checkpoint to resume from")
            return path, ckpt
        ckpt = resolve_checkpoint(path)
        return ckpt.parent.parent, ckpt
    candidates = [output_dir] + (sorted(output_dir.parent.iterdir()) if output_dir.parent.is_dir() else [])
    found = [(d, c) for d in candidates if d.is_dir() and (c := latest_checkpoint(d)) is not None]
    if not found:
        raise CheckpointError(
            f"--resume found no complete checkpoint in {str(output_dir)!r} or its sibling run folders; "
            "pass --resume PATH to a run folder or checkpoint")
    return max(found, key=lambda dc: dc[1].stat().st_mtime)


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop metric rows of steps after the checkpoint: they are about to be run again."""
    if not path.is_file():
        return
    rows = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = [line for line in rows if json.loads(line).get("step", 0) <= last_step]
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
