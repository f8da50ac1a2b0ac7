"""Running user code (a workflow, a judge) so that whatever it does ends at most its own episode.

User code runs in a task of its own. What would otherwise escape the episode is turned into an
ordinary, counted failure:

- `asyncio.CancelledError` that the code raises itself (nothing cancelled it) -> `UserCodeError`;
  a cancellation of the caller (Ctrl-C, the run shutting down) still propagates and takes the task down;
- `sys.exit()` / `SystemExit` -> `UserCodeError` (it would otherwise stop the event loop and the run);
- the time limit: measured on the code's OWN time, `wall time - paused()`, where `paused` reports the
  seconds during which the time was not the code's (the model was busy answering calls). On timeout
  the task is cancelled; code that swallows the cancellation is still a timeout, whatever it returns
  later, and is cancelled again every second, then closed (`coroutine.close()`), in the background.

Code that blocks the event loop (`time.sleep`, CPU work without `await`) cannot be interrupted from
inside the loop: run such work in a thread (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

STOP_GRACE_S = 1.0  # how long a cancelled task may take to finish before the episode moves on
REAP_ATTEMPTS = 3  # cancels of a task that swallows cancellation before its coroutine is closed

_left_behind: set[asyncio.Task] = set()  # tasks that ignored cancellation, still being reaped


class UserCodeError(Exception):
    """User code ended in a way ajet turns into an ordinary episode failure (self-cancel, sys.exit)."""


class OwnTimeout(Exception):
    """User code ran past its time limit on its own time (waits on the engine not counted)."""

    def __init__(self, limit_s: float, own_s: float, paused_s: float, ignored_cancel: bool) -> None:
        self.limit_s, self.own_s, self.paused_s, self.ignored_cancel = limit_s, own_s, paused_s, ignored_cancel
        note = "; it ignored the cancellation" if ignored_cancel else ""
        super().__init__(f"ran {own_s:.1f} s of its own time (plus {paused_s:.1f} s while the model was busy, not "
                         f"counted), over the limit of {limit_s:g} s{note}")


async def _contained(start: Callable[[], Awaitable[T]], who: str) -> T:
    try:
        return await start()  # called here, so a sync function that raises is contained too
    except SystemExit as exc:
        raise UserCodeError(f"SystemExit: {who} called sys.exit({exc.code!r})") from None


def _result(task: asyncio.Task, who: str) -> Any:
    if task.cancelled():  # done before any cancel of ours: the code raised CancelledError itself
        raise UserCodeError(f"CancelledError: {who} raised asyncio.CancelledError itself (nothing cancelled it)")
    return task.result()


async def run_guarded(start: Callable[[], Awaitable[T]], limit_s: float | None = None,
                      paused: Callable[[], float] = lambda: 0.0, who: str = "the workflow") -> T:
    """Await `start()` as described in the module docstring. Raises what it raised (Exception
    subclasses), `UserCodeError`, or `OwnTimeout` when its own time passes `limit_s`. `who` names
    the code in error messages."""
    task = asyncio.ensure_future(_contained(start, who))
    started = time.perf_counter()
    try:
        while True:
            remaining = None
            if limit_s is not None:
                remaining = limit_s - (time.perf_counter() - started - paused())
                if remaining <= 0:
                    break
            # Own time can only be less than wall time: sleep the remaining own time, then re-measure.
            done, _ = await asyncio.wait({task}, timeout=remaining)
            if done:
                return _result(task, who)
    except BaseException:  # the caller was cancelled: its episode's code goes down with it
        _stop_in_background(task)
        raise
    paused_s = paused()
    own_s = time.perf_counter() - started - paused_s
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=STOP_GRACE_S)
    ignored = not done or not task.cancelled()
    if not done:
        _stop_in_background(task)
    else:
        _retrieve(task)
    raise OwnTimeout(limit_s or 0.0, own_s, paused_s, ignored)


def left_behind() -> int:
    """Tasks that ignored cancellation and are still being stopped in the background."""
    return sum(1 for t in _left_behind if not t.done())


def _stop_in_background(task: asyncio.Task) -> None:
    if task.done():
        _retrieve(task)
        return
    task.cancel()
    reaper = asyncio.ensure_future(_reap(task))
    _left_behind.add(task)
    _left_behind.add(reaper)
    for t in (task, reaper):
        t.add_done_callback(_forget)


async def _reap(task: asyncio.Task) -> None:
    for _ in range(REAP_ATTEMPTS):
        await asyncio.wait({task}, timeout=1.0)
        if task.done():
            return
        task.cancel()
    await asyncio.wait({task}, timeout=1.0)
    if not task.done():
        # GeneratorExit at its await point: `except CancelledError` does not catch it. The closed
        # coroutine runs no more code; one more cancel wakes its task so that it is marked done.
        try:
            task.get_coro().close()
        except RuntimeError:  # a bare `except:` that ignored GeneratorExit too: nothing more can be done
            log.warning("a task ignores cancellation and GeneratorExit; it is left running: %r", task)
        task.cancel()


def _forget(task: asyncio.Task) -> None:
    _left_behind.discard(task)
    _retrieve(task)


def _retrieve(task: asyncio.Task) -> None:
    """Mark the task's outcome as seen, so asyncio does not log 'exception was never retrieved'."""
    if task.done() and not task.cancelled():
        task.exception()
