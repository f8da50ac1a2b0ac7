"""Rollout progress: episodes done, tokens/s, mean reward, failures, ETA. A live rich bar on a
terminal; elsewhere (see `ajet.display`) a plain line at the start, every `PLAIN_EVERY_S` seconds
while episodes finish, and at the end.

The ETA knows that episodes run `concurrency` at a time (`batch_eta`): 16 episodes started together
end together, so the first one done says the batch is nearly done, not that 15 more of its length
follow one after another (that reading printed `ETA 4m18s` for a rollout that ended 5 s later)."""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ajet.display import duration, interactive, plain_line

if TYPE_CHECKING:
    from ajet.rollout.episode import EpisodeResult

console = Console(stderr=True)
PLAIN_EVERY_S = 15.0


def batch_eta(now: float, running_since: list[float], durations: list[float], queued: int,
              concurrency: int) -> float | None:
    """Seconds until the last episode of a batch ends, or None before any episode has ended.

    running_since: when each running episode started; durations: how long the ended ones ran (their mean is
    taken for every other episode); queued: episodes not started yet, each starting when one of the
    `concurrency` slots frees up."""
    if not durations:
        return None
    mean = sum(durations) / len(durations)
    ends = [max(0.0, start + mean - now) for start in running_since]  # from now, when each slot frees up
    ends += [0.0] * max(0, concurrency - len(ends))  # idle slots take queued episodes at once
    heapq.heapify(ends)
    for _ in range(queued):
        heapq.heappush(ends, heapq.heappop(ends) + mean)
    return max(ends, default=0.0)


class RolloutProgress:
    """Counts finished episodes; shows a live bar when `enabled` and stderr is a terminal. `concurrency`:
    how many episodes run at once (default: all), for the ETA; the runner marks each episode's run with
    `running()`."""

    def __init__(self, label: str, total: int, enabled: bool = True, concurrency: int | None = None) -> None:
        self.total = total
        self.concurrency = max(1, concurrency or total)
        self._running_since: list[float] = []
        self._durations: list[float] = []
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
                TextColumn("{task.fields[eta]}"),
                console=console,
                transient=False,
            )
            self._task = self._progress.add_task(label, total=total, stats="", eta="")

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

    @contextmanager
    def running(self) -> Iterator[None]:
        """Around one episode's run (inside the concurrency limit, judging after it excluded)."""
        started = time.perf_counter()
        self._running_since.append(started)
        try:
            yield
        finally:
            self._running_since.remove(started)
            self._durations.append(time.perf_counter() - started)

    def eta_seconds(self) -> float | None:
        """Seconds left in the batch (None until an episode has ended)."""
        # every run started is running or ended (an ended one may still await its judge): the rest are queued
        queued = max(0, self.total - len(self._running_since) - len(self._durations))
        return batch_eta(time.perf_counter(), self._running_since, self._durations, queued, self.concurrency)

    def episode_done(self, episode: EpisodeResult) -> None:
        self.done += 1
        self.failed += 1 if (episode.error or episode.judge_error) else 0
        self.tokens += episode.generated_tokens
        if episode.reward is not None:
            self.rewards.append(episode.reward.total)
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, stats=self.stats_text(), eta=self._eta_text())
        elif self._plain and time.perf_counter() - self._last_plain >= PLAIN_EVERY_S and self.done < self.total:
            self._plain_status()

    def _plain_status(self) -> None:
        self._last_plain = now = time.perf_counter()
        elapsed = now - self._started
        plain_line(f"{self._label}: {self.done}/{self.total} episodes · {self.stats_text()} · "
                   f"elapsed {duration(elapsed)} · {self._eta_text()}")

    def _eta_text(self) -> str:
        eta = 0.0 if self.done >= self.total else self.eta_seconds()
        return "ETA ?" if eta is None else f"ETA {duration(eta)}"

    def stats_text(self) -> str:
        elapsed = max(time.perf_counter() - self._started, 1e-9)
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else float("nan")
        return f"reward {mean:.3f} · {self.tokens / elapsed:.0f} tok/s · failed {self.failed}"
