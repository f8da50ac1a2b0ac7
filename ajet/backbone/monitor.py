"""Watching a run, for every backbone: metrics.jsonl every step, the experiment trackers of
`trainer.report_to` (ajet.backbone.reporters), a live line, a reward/loss curve PNG and a summary table
at the end; and, on resume, dropping the log lines of steps about to be run again."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from ajet.display import duration, interactive, plain_line

if TYPE_CHECKING:
    from ajet.backbone.reporters import Reporters

log = logging.getLogger(__name__)
console = Console(stderr=True)
RUN_LOGS = ("metrics.jsonl", "episodes.jsonl", "val_episodes.jsonl", "samples.jsonl")  # step-keyed JSONL logs of a run folder

# Metrics shown in the live line, in order: (key, label, format)
_SHOWN = [
    ("reward_mean", "reward", "{:.3f}"), ("reward_std", "±", "{:.3f}"), ("success_rate", "success", "{:.0%}"),
    ("loss", "loss", "{:.4f}"), ("kl", "kl", "{:.4f}"), ("clip_fraction", "clip", "{:.3f}"),
    ("grad_norm", "|g|", "{:.3f}"), ("train_tokens_per_s", "train tok/s", "{:.0f}"),
    ("rollout_tokens_per_s", "rollout tok/s", "{:.0f}"),
    ("samples_per_episode", "samples/ep", "{:.2f}"), ("failed", "failed", "{:.0f}"),
    ("val_success_rate", "val success", "{:.0%}"),
]


def _step_seconds(metrics: dict[str, Any], since_last: float | None, since_start: float) -> float:
    """How long a step took: since the previous step was logged, or, for the run's first step, the step's own
    clock (rollout + update) when it reports one. Time since the run began would add the run's set-up to the
    pace: the quickstart's first ETA came out 40% too long."""
    if since_last is not None:
        return since_last
    own = [v for v in (metrics.get("rollout_seconds"), metrics.get("time_s")) if isinstance(v, (int, float)) and v >= 0]
    return sum(own) if own else since_start


class Monitor:
    """Writes one JSON line per step to `run_dir/metrics.jsonl` (appending, so a resumed run keeps
    its history) and sends the scalars to `reporters` (the run's experiment trackers), if any."""

    def __init__(self, run_dir: Path, total_steps: int, reporters: Reporters | None = None,
                 stages: list[tuple[str, int]] | None = None) -> None:
        self.run_dir = run_dir
        self.path = run_dir / "metrics.jsonl"
        self.total_steps = total_steps
        # (stage, steps) in run order: the ETA covers the stage running now and names the later ones,
        # whose pace is unknown until they run (a GRPO step costs several SFT steps)
        self.stages = stages or []
        self._started = time.perf_counter()
        self._steps_done = 0
        # the ETA follows the current stage's pace (a GRPO step costs several SFT steps)
        self._stage: str | None = None
        self._stage_started = self._started
        self._stage_steps = 0
        self._last_logged = self._started
        self.reporters = reporters

    def log(self, step: int, stage: str, metrics: dict[str, Any]) -> None:
        row = {"step": step, "stage": stage, "time": round(time.time(), 3), **metrics}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(finite_json(row), default=float, allow_nan=False) + "\n")
        if self.reporters is not None:
            self.reporters.log(step, stage, metrics)
        self._steps_done += 1
        self._print(step, stage, metrics)

    def _print(self, step: int, stage: str, metrics: dict[str, Any]) -> None:
        now = time.perf_counter()
        elapsed = now - self._started
        if stage != self._stage:  # this stage began when the previous one logged its last step
            self._stage, self._stage_steps, self._stage_seconds = stage, 0, 0.0
            self._stage_started = self._last_logged if self._steps_done > 1 else self._started
        self._stage_steps += 1
        self._stage_seconds += _step_seconds(metrics, now - self._last_logged if self._steps_done > 1 else None,
                                             now - self._started)
        self._last_logged = now
        pace = self._stage_seconds / self._stage_steps
        later = self._later_stages(step)
        remaining = ((self.total_steps - step) - sum(n for _, n in later)) * pace
        parts = [f"step {step}/{self.total_steps}"]
        for key, label, fmt in _SHOWN:
            value = metrics.get(key)
            if isinstance(value, (int, float)):
                parts.append(f"{label} {fmt.format(value)}" + (_why_failed(metrics) if key == "failed" else ""))
        eta = f"ETA {duration(remaining)}" + "".join(f" + {n} {name} step{'s' * (n != 1)}" for name, n in later)
        parts += [f"elapsed {duration(elapsed)}", eta]
        if interactive():
            console.print(f"[bold cyan]{stage}[/] " + " · ".join(parts))
        else:
            plain_line(f"{stage} " + " · ".join(parts))

    def _later_stages(self, step: int) -> list[tuple[str, int]]:
        """The stages after the one `step` belongs to, with their steps (none when stages are not known)."""
        end = 0
        for i, (_, steps) in enumerate(self.stages):
            end += steps
            if step <= end:
                return [(name, n) for name, n in self.stages[i + 1:] if n > 0]
        return []

    def close(self) -> None:
        if self.reporters is not None:
            self.reporters.close()


def finite_json(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None: json.dumps would write bare `NaN` and
    `Infinity`, which no strict JSON reader (jq, JavaScript, `ajet view`) accepts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy or torch scalar
        try:
            return finite_json(float(value))
        except (TypeError, ValueError):
            return value
    return value


def _why_failed(metrics: dict[str, Any]) -> str:
    """' (TimeoutError 2: own time over rollout.episode_timeout_s, +41 s of model time not counted; ...)'."""
    kinds = {k.removeprefix("errors/"): v for k, v in metrics.items() if k.startswith("errors/") and v}
    if metrics.get("judge_failed"):
        kinds["judge"] = metrics["judge_failed"]
    if not kinds:
        return ""
    parts = []
    for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
        text = f"{kind} {count:.0f}"
        if kind == "TimeoutError":
            busy = metrics.get("timed_out_busy_s", 0.0)
            text += f": own time over rollout.episode_timeout_s, +{busy:.0f} s of model time not counted"
        parts.append(text)
    return " (" + "; ".join(parts) + ")"


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def plot_curves(run_dir: Path) -> Path | None:
    """reward (and val success) and loss against step, one panel each, saved as curves.png."""
    rows = read_metrics(run_dir / "metrics.jsonl")
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_reward, ax_loss) = plt.subplots(1, 2, figsize=(11, 4))
    for stage in dict.fromkeys(r["stage"] for r in rows):
        ours = [r for r in rows if r["stage"] == stage]
        steps = [r["step"] for r in ours]
        if any("loss" in r for r in ours):
            ax_loss.plot(steps, [r.get("loss", float("nan")) for r in ours], marker=".", label=stage)
        if any("reward_mean" in r for r in ours):
            ax_reward.plot(steps, [r.get("reward_mean", float("nan")) for r in ours], marker=".",
                           label=f"{stage} reward")
    val = [r for r in rows if "val_success_rate" in r]
    if val:
        ax_reward.plot([r["step"] for r in val], [r["val_success_rate"] for r in val], marker="o",
                       linestyle="--", label="val success")
    ax_reward.set(title="reward", xlabel="step")
    ax_loss.set(title="loss", xlabel="step")
    for ax in (ax_reward, ax_loss):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    out = run_dir / "curves.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def print_summary(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    table = Table(title="training summary")
    for column in ("stage", "steps", "first loss", "last loss", "first reward", "last reward"):
        table.add_column(column)
    for stage in dict.fromkeys(r["stage"] for r in rows):
        ours = [r for r in rows if r["stage"] == stage]
        fmt = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
        table.add_row(stage, str(len(ours)), fmt(ours[0].get("loss")), fmt(ours[-1].get("loss")),
                      fmt(ours[0].get("reward_mean")), fmt(ours[-1].get("reward_mean")))
    console.print(table)


def truncate_run_logs(run_dir: Path, last_step: int) -> dict[str, int]:
    """Drop the lines of steps after `last_step` from the run's JSONL logs (metrics, episodes, val
    episodes), and any line a crash cut short: those steps are about to be run again. Rows without a
    step are kept. Each file is rewritten atomically. Returns {file name: lines dropped}."""
    dropped: dict[str, int] = {}
    for name in RUN_LOGS:
        path = run_dir / name
        if not path.is_file():
            continue
        kept, lost = [], 0
        with path.open(encoding="utf-8", errors="surrogateescape") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:  # the line a kill -9 cut short
                    lost += 1
                    continue
                step = row.get("step") if isinstance(row, dict) else None
                if isinstance(step, int) and step > last_step:
                    lost += 1
                    continue
                kept.append(line if line.endswith("\n") else line + "\n")
        if lost:
            tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
            tmp.write_text("".join(kept), encoding="utf-8", errors="surrogateescape")
            os.replace(tmp, path)
            dropped[name] = lost
    return dropped
