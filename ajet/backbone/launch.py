"""Run a backend's command (`swift sft`, `llamafactory-cli train`, ...) as a watched subprocess.

The output is written whole to a log file in the run folder and handed line by line to a callback
(progress and metrics parsing). A command that exits non-zero, or prints nothing for
`idle_timeout_s`, ends in a `BackboneError` carrying the backend's own last lines (its traceback's
last frame and error message are what users need). The command runs in its own process group, so
killing it (timeout, Ctrl-C) takes its children too (torchrun workers, dataloader processes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ajet.errors import BackboneError

TAIL_LINES = 30


def run_streaming(
    cmd: Sequence[str],
    *,
    name: str,
    log_path: Path,
    on_line: Callable[[str], None] = lambda line: None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    idle_timeout_s: float | None = 1800,
) -> None:
    """Run `cmd` to completion; raise BackboneError (with its last output lines) when it fails or hangs.

    name: how the error names the command ('swift sft'). idle_timeout_s: kill after this long with no
    output at all (None: never) — a hung rollout or a stuck collective prints nothing.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    last_output = [time.monotonic()]
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(map(str, cmd))}\n")
        log.flush()
        try:
            proc = subprocess.Popen(list(map(str, cmd)), cwd=cwd, env=dict(env) if env is not None else None,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    errors="replace", start_new_session=True, bufsize=1)
        except OSError as exc:
            raise BackboneError(f"cannot start {name}: {exc}") from exc

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                last_output[0] = time.monotonic()
                log.write(line)
                log.flush()
                line = line.rstrip("\n")
                tail.append(line)
                try:
                    on_line(line)
                except Exception as exc:  # noqa: BLE001 - a parser bug must not hide the backend's outcome
                    log.write(f"[ajet] could not parse this line: {exc!r}\n")

        reader = threading.Thread(target=pump, name=f"ajet-{name}-output", daemon=True)
        reader.start()
        try:
            while proc.poll() is None:
                if idle_timeout_s is not None and time.monotonic() - last_output[0] > idle_timeout_s:
                    _kill(proc)
                    reader.join(timeout=5)
                    raise BackboneError(
                        f"{name} printed nothing for {idle_timeout_s:.0f} s and was stopped (a hang); the log is "
                        f"{log_path}; its last lines:\n{_format(tail)}")
                time.sleep(0.2)
        except BaseException:
            _kill(proc)  # Ctrl-C or our own error: never leave the backend running
            raise
        reader.join(timeout=10)
    if proc.returncode != 0:
        raise BackboneError(f"{name} failed (exit {_describe(proc.returncode)}); the log is {log_path}; "
                            f"its last lines:\n{_format(tail)}")


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, PermissionError):
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"{code}, killed by {signal.Signals(-code).name}"
        except ValueError:
            return str(code)
    return str(code)


def _format(lines: deque[str]) -> str:
    shown = [line for line in lines if line.strip()] or ["(no output)"]
    return "\n".join(f"    {line[:300]}" for line in shown)
