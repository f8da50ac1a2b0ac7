"""Stopping a run with SIGINT (Ctrl-C) or SIGTERM (`kill`, a scheduler, a CI time-out): it stops, and it
never exits 0, wherever the signal lands (model load, rollout, training, checkpoint writing, shutdown).

The CLI installs one handler for both signals around `ajet` training and `ajet eval` (`StopSignals`).
The handler first records the signal; the CLI's exit code is then 128 + its number (130, 143) whatever
the code under it does afterwards. A KeyboardInterrupt can be lost (raised inside a `__del__`, a
callback, an `except BaseException` that moves on, a cancellation an await swallows), so a recorded
signal is what decides the exit code, not the exception.

How the work is stopped:
- inside `run_async` (the debug backbone's event loop) the main task is cancelled, as asyncio.run does
  on Ctrl-C: every `finally` and `async with` unwinds (the gateway stops, episodes are cancelled);
- elsewhere a KeyboardInterrupt is raised where the signal lands, as Python does on Ctrl-C;
- between training steps `check()` raises KeyboardInterrupt again, in case the first one was lost;
- a second signal raises KeyboardInterrupt at once; a third ends the process (`os._exit`).

A signal the process was started with ignored (`nohup`, `cmd &` in a script) stays ignored.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_received: list[int] = []  # the stop signals received while armed, in order
_armed = False
_target: asyncio.Task | None = None  # the main task of run_async, cancelled by the first signal


def received() -> int | None:
    """The first stop signal received while a StopSignals block was active, or None."""
    return _received[0] if _received else None


def check() -> None:
    """Raise KeyboardInterrupt when a stop signal has come: a lost interrupt still stops the run."""
    if _received:
        raise _interrupt(_received[0])


def _interrupt(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


def _on_signal(signum: int, frame: Any) -> None:
    _received.append(signum)
    if not _armed:
        return
    if len(_received) >= 3:  # asked three times: the unwinding itself is stuck
        sys.stderr.write(f"\n{signal.Signals(signum).name} again: stopping now\n")
        sys.stderr.flush()
        os._exit(128 + _received[0])
    task = _target
    if len(_received) == 1 and task is not None and not task.done():
        task.cancel()
        task.get_loop().call_soon_threadsafe(lambda: None)  # wake the loop if it sleeps in select()
        return
    raise _interrupt(signum)


class StopSignals:
    """Install the stop handler for SIGINT and SIGTERM (not for one inherited as ignored); restore the
    previous handlers on exit. `restore_default=True` (the real command line) leaves both at the
    system default instead, so a signal while the interpreter shuts down kills it by that signal
    (exit 130 / 143 in a shell), never 0."""

    def __init__(self, restore_default: bool = False) -> None:
        self.restore_default = restore_default
        self.signum: int | None = None  # the first stop signal received inside the block
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        global _armed
        _received.clear()
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread may handle signals (main() called from a thread)
        for sig in STOP_SIGNALS:
            previous = signal.getsignal(sig)
            if previous is signal.SIG_IGN:
                continue
            self._previous[sig] = previous
            signal.signal(sig, _on_signal)
        _armed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        global _armed
        _armed = False
        for sig, previous in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if self.restore_default else previous)
        self.signum = received()
        _received.clear()  # a later run in this process starts unstopped

    @property
    def exit_code(self) -> int | None:
        """128 + the signal's number (130 for SIGINT, 143 for SIGTERM), or None when none came."""
        return 128 + self.signum if self.signum is not None else None


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)` whose main task the first stop signal cancels; then KeyboardInterrupt."""
    check()

    async def main() -> T:
        global _target
        _target = asyncio.current_task()
        try:
            return await coro
        finally:
            _target = None

    try:
        result = asyncio.run(main())
    except asyncio.CancelledError:
        check()  # cancelled by a stop signal: KeyboardInterrupt, as everywhere else
        raise
    check()  # the cancellation was swallowed somewhere and the work finished anyway
    return result
