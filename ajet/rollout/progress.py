"""A rich progress bar for rollouts: episodes done, tokens/s, mean reward, failures, ETA."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

if TYPE_CHECKING:
    from ajet.rollout.episode import EpisodeResult

console = Console(stderr=True)


class RolloutProgress:
    """Counts finished episodes; shows a live bar when `enabled` and stderr is a terminal."""

    def __init__(self, label: str, total: int, enabled: bool = True) -> None:
        self.total = total
        self.done = 0
        self.failed = 0
        self.rewards: list[float] = []
        self.tokens = 0
        self._started = time.perf_counter()
        self._progress = None
        if enabled:
            self._progress = Progress(
                TextColumn(f"[bold]{label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeRemainingColumn(),
                console=console,
                transient=False,
            )
            self._task = self._progress.add_task(label, total=total, stats="")

    def __enter__(self) -> RolloutProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    def episode_done(self, episode: EpisodeResult) -> None:
        self.done += 1
        self.failed += 1 if (episode.error or episode.judge_error) else 0
        self.tokens += episode.generated_tokens
        if episode.reward is not None:
            self.rewards.append(episode.reward.total)
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, stats=self.stats_text())

    def stats_text(self) -> str:
        elapsed = max(time.perf_counter() - self._started, 1e-9)
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else float("nan")
        return f"reward {mean:.3f} · {self.tokens / elapsed:.0f} tok/s · failed {self.failed}"
