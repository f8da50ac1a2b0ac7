"""Where a run is (stage, step, data position, non-finite streak), and what resuming it may change.

Resuming continues exactly one run folder: `output_dir`, or the folder (or checkpoint) given to
`--resume PATH`, never a neighbour. Its config must match the one the checkpoint was trained with,
except in keys that do not change the training (`RESUME_FREE_KEYS`) or that the user accepts with
`trainer.resume_accept`. On resume, log lines of steps after the checkpoint are dropped
(`ajet.backbone.monitor.truncate_run_logs`): they are about to be run again.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ajet.backbone.reporters import flatten
from ajet.errors import CheckpointError, TrainingError
from ajet.trainer.checkpoint import latest_checkpoint, resolve_checkpoint

# Config keys (or key prefixes) that may differ between a checkpoint and its resumed run: where the
# run writes, how long it runs, how it is watched, how fast it goes. Everything else changes what is
# trained and must be accepted on purpose.
RESUME_FREE_KEYS = (
    "output_dir", "project", "experiment",
    "trainer.steps", "trainer.save_every", "trainer.keep_last", "trainer.eval_every",
    "trainer.max_nonfinite_updates", "trainer.resume_accept",
    "eval", "task_reader.val", "rollout.val_temperature",
    "rollout.concurrency", "rollout.episode_timeout_s", "rollout.retries",
    "gateway.host", "gateway.port", "gateway.max_request_bytes",
    "engine.max_batch_size", "engine.base_url", "engine.api_key", "engine.request_timeout_s",
    "model.device", "backbone.swift", "backbone.llamafactory",
)


@dataclass
class RunState:
    stage_index: int = 0
    stage_step: int = 0  # steps finished in the current stage
    global_step: int = 0  # steps finished over all stages (checkpoints are named by it)
    epoch: int = 0  # passes over the current stage's data
    cursor: int = 0  # position inside the current epoch's order
    nonfinite_streak: int = 0  # optimizer updates skipped in a row for a non-finite loss or gradient

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
    """(run folder, checkpoint) to continue from. `resume` is True (the newest checkpoint of
    `output_dir`) or a path (a run folder or one of its checkpoints)."""
    if isinstance(resume, str):
        path = Path(resume)
        if (path / "checkpoints").is_dir():  # a run folder
            ckpt = latest_checkpoint(path)
            if ckpt is None:
                raise CheckpointError(f"run folder {str(path)!r} has no complete checkpoint to resume from")
            return path, ckpt
        ckpt = resolve_checkpoint(path)
        return ckpt.parent.parent, ckpt
    ckpt = latest_checkpoint(output_dir) if output_dir.is_dir() else None
    if ckpt is not None:
        return output_dir, ckpt
    neighbours = _runs_with_checkpoints(output_dir.parent)
    hint = ("; run folders with checkpoints next to it, newest first: "
            + ", ".join(f"{d} (step {c.name.removeprefix('step-').lstrip('0') or '0'})" for d, c in neighbours[:5])
            if neighbours else "")
    raise CheckpointError(
        f"--resume found no complete checkpoint in output_dir {str(output_dir)!r}. --resume continues exactly "
        "the run in output_dir, never another one: name the run to continue with --resume RUN_FOLDER (or "
        f"output_dir=RUN_FOLDER){hint}")


def _runs_with_checkpoints(parent: Path) -> list[tuple[Path, Path]]:
    if not parent.is_dir():
        return []
    found = [(d, c) for d in parent.iterdir() if d.is_dir() and (c := latest_checkpoint(d)) is not None]
    return sorted(found, key=lambda dc: dc[1].stat().st_mtime, reverse=True)


def _covered(key: str, prefixes: Any) -> bool:
    return any(key == p or key.startswith(f"{p}.") for p in prefixes)


def check_resume_config(saved: dict[str, Any], current: dict[str, Any], accepted: list[str],
                        checkpoint: Path) -> list[str]:
    """Compare the config a checkpoint was trained with (`saved`) to the one resuming it (`current`),
    both `AjetConfig.model_dump(mode="json")`. Returns notes on the changes that are fine; raises
    CheckpointError naming every change that alters the training and was not accepted."""
    old, new = flatten(saved), flatten(current)
    changed = sorted(k for k in old.keys() | new.keys() if old.get(k, _ABSENT) != new.get(k, _ABSENT))
    refused = [k for k in changed if not _covered(k, RESUME_FREE_KEYS) and not _covered(k, accepted)]
    if refused:
        lines = "\n".join(f"  {k}: {_show(old.get(k, _ABSENT))} → {_show(new.get(k, _ABSENT))}" for k in refused)
        keys = ",".join(refused)
        raise CheckpointError(
            f"--resume: the config differs from the one {checkpoint} was trained with, in keys that change the "
            f"training:\n{lines}\nResume with the old values (drop these overrides), or accept the change on "
            f"purpose: add 'trainer.resume_accept=[{keys}]'. Keys that may change freely (trainer.steps, "
            "output_dir, eval settings, ...) are listed in docs/reliability.md.")
    notes = [f"{k}: {_show(old.get(k, _ABSENT))} → {_show(new.get(k, _ABSENT))}" for k in changed
             if k != "output_dir"]
    unused = [a for a in accepted if not any(_covered(k, [a]) for k in changed)]
    if unused:
        notes.append(f"trainer.resume_accept names {', '.join(unused)}, which did not change")
    return notes


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, _Absent) else json.dumps(value, default=str)[:80]


def track_nonfinite(state: RunState, stats: dict[str, Any], limit: int) -> None:
    """Update the streak of skipped (non-finite) updates from one step's stats; raise TrainingError
    when it reaches `limit`. The weights were never updated with a non-finite value."""
    skipped = int(stats.get("nonfinite_updates", 0))
    applied = int(stats.get("updates", 0))
    if applied:
        state.nonfinite_streak = int(stats.get("nonfinite_tail", 0))
    else:
        state.nonfinite_streak += skipped
    if skipped and state.nonfinite_streak >= limit:
        raise TrainingError(
            f"the loss or the gradients were non-finite (NaN or inf) in {state.nonfinite_streak} optimizer updates "
            f"in a row (limit trainer.max_nonfinite_updates={limit}); each was skipped, so the weights and the last "
            f"checkpoint are intact. Lower the learning rate, check the rewards and the data, or raise the limit.")
