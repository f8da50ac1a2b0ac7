"""swift's `logging.jsonl` as ajet's `metrics.jsonl` rows, read while swift runs.

swift appends one JSON line per optimizer step to `<output_dir>/logging.jsonl` (loss, grad_norm,
learning_rate, GRPO's reward and KL, ...). `LogFollower.poll()` reads what is new; every RL step (one
swift step, or `trainer.updates_per_step` of them for GRPO) becomes one ajet row, with swift's keys
renamed where ajet has a name for them (loss, grad_norm, lr, kl, ...) and the rest kept under
`swift/<key>`. For GRPO the row also gets the plugin's account of the step's episodes
(`rollouts.jsonl`: reward as the judge gave it, failed episodes, turns, tool-call parse failures, ...).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_RENAME = {
    "loss": "loss", "grad_norm": "grad_norm", "learning_rate": "lr", "kl": "kl", "token_acc": "token_acc",
    "epoch": "epoch", "clip_ratio/region_mean": "clip_fraction", "entropy/mean": "entropy",
    "rewards/chosen": "chosen_reward", "rewards/rejected": "rejected_reward", "rewards/accuracies": "pair_accuracy",
    "rewards/margins": "reward_margin", "train_speed(s/it)": "seconds_per_update",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_/.]+")


def ajet_row(swift_row: dict[str, Any]) -> dict[str, float]:
    """swift's numeric values under ajet's names (or `swift/<key>`)."""
    out: dict[str, float] = {}
    for key, value in swift_row.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name = _RENAME.get(key) or "swift/" + _UNSAFE.sub("_", key).strip("_")
        out[name] = float(value)
    return out


def local_step(swift_row: dict[str, Any]) -> int | None:
    """The optimizer step of a per-step row (`global_step/max_steps`: '3/10'); None for summary rows."""
    value = swift_row.get("global_step/max_steps")
    if not isinstance(value, str) or "/" not in value or "train_runtime" in swift_row:
        return None
    return int(value.split("/")[0])


class LogFollower:
    """Follows a growing JSONL file; `poll()` returns the rows completed since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = ""

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        with self.path.open(encoding="utf-8") as handle:
            handle.seek(self._offset)
            chunk = handle.read()
            self._offset = handle.tell()
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()  # an unfinished last line waits for the next poll
        rows = []
        for line in lines:
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue  # not ours to judge: swift's file, swift's format
        return rows


class StageMetrics:
    """Turns one stage's swift rows into ajet rows: `feed(rows)` -> [(rl_step, metrics), ...]."""

    def __init__(self, updates_per_step: int = 1, rollouts: Path | None = None) -> None:
        self.updates_per_step = updates_per_step
        self.rollouts = LogFollower(rollouts) if rollouts is not None else None
        self._rollout_rows: dict[int, dict[str, Any]] = {}
        self._pending: list[dict[str, float]] = []
        self.last_local = 0
        self.final: dict[str, Any] = {}  # swift's closing row (last_model_checkpoint, train_runtime, ...)

    def feed(self, rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
        if self.rollouts is not None:
            for row in self.rollouts.poll():
                self._rollout_rows[int(row.get("step", 0))] = row
        out = []
        for row in rows:
            step = local_step(row)
            if step is None:
                if "last_model_checkpoint" in row or "train_runtime" in row:
                    self.final.update(row)
                continue
            if step <= self.last_local:
                continue  # a resumed stage repeats nothing
            self.last_local = step
            self._pending.append(ajet_row(row))
            if step % self.updates_per_step == 0:
                rl_step = step // self.updates_per_step
                out.append((rl_step, self._merge(rl_step)))
        return out

    def _merge(self, rl_step: int) -> dict[str, Any]:
        pending, self._pending = self._pending, []
        merged: dict[str, Any] = {}
        for key in dict.fromkeys(k for row in pending for k in row):
            values = [row[key] for row in pending if key in row]
            merged[key] = sum(values) / len(values)
        rollout = self._rollout_rows.pop(rl_step, None)
        if rollout is not None:
            merged.update({k: v for k, v in rollout.items() if k != "step"})
        return merged
