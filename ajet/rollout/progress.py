"""Rollout progress: episodes done, tokens/s, mean reward, failures, ETA. A live rich bar on a
terminal; elsewhere (see `ajet.display`) a plain line at the start, every `PLAIN_EVERY_S` seconds
while episodes finish, and at the end."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ajet.display import duration, interactive, plain_line

if TYPE_CHECKING:
    from ajet.rollout.episode import EpisodeResult

console = Console(stderr=True)
PLAIN_EVERY_S = 15.0


class RolloutProgress:
    """Counts finished episodes; shows a live bar when `enabled` and stderr is a terminal."""

    def __init__(self, label: str, total: int, enabled: bool = True) -> None:
        self.total = total
        self.done = 0
        self.failed = 0
        self.rewards: list[float] = []
        self.tokens = 0
        self._started = time.perf_counter()
        self._label = label
        self._plain = enabled and not interactive()
        self._last_plain = self._started
        self._progress = None
        if enabled and not self._plain:
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
        if self._plain:
            plain_line(f"{self._label}: {self.total} episodes")
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self._plain:
            self._plain_status()

    def episode_done(self, episode: EpisodeResult) -> None:
        self.done += 1
        self.failed += 1 if (episode.error or episode.judge_error) else 0
        self.tokens += episode.generated_tokens
        if episode.reward is not None:
            self.rewards.append(episode.reward.total)
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, stats=self.stats_text())
        elif self._plain and time.perf_counter() - self._last_plain >= PLAIN_EVERY_S and self.done < self.total:
            self._plain_status()

    def _plain_status(self) -> None:
        self._last_plain = now = time.perf_counter()
        elapsed = now - self._started
        eta = elapsed * (self.total - self.done) / self.done if self.done else 0.0
        plain_line(f"{self._label}: {self.done}/{self.total} episodes · {self.stats_text()} · "
                   f"elapsed {duration(elapsed)} · ETA {duration(eta)}")

    def stats_text(self) -> str:
        elapsed = max(time.perf_counter() - self._started, 1e-9)
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else float("nan")
        return f"reward {mean:.3f} · {self.tokens / elapsed:.0f} tok/s · failed {self.failed}"
