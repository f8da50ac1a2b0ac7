"""Run untrusted Python (code a model wrote) in a process the kernel confines, and get its output back.

    result = run_python("print(sum(range(10)))", SandboxLimits(wall_s=5))
    result.status   # 'ok' | 'error' | 'timeout' | 'memory' | 'output_limit' | 'blocked'
    result.stdout   # '45\\n' (capped at limits.max_output_bytes, then '[output truncated]')

Two isolations (`isolation=`):

- `"bwrap"` (the default): bubblewrap runs the interpreter in new mount, PID, network, IPC and UTS
  namespaces, as nobody when ajet runs as root, under a seccomp filter (ajet/sandbox/bwrap.py lists
  what it sees, seccomp.py what it may not call). Where bwrap does not work (not installed, no
  libseccomp, namespaces not allowed, not Linux), `run_python` raises `ConfigError`
  saying why: it never runs the code with weaker walls on its own.
- `"unsafe_audit_hook"`: only a Python audit hook in a plain subprocess, as ajet did before. Code can
  switch the hook off (it is reachable through `gc`) and then read what the user can read (the project,
  task files with their answers, other processes' /proc/<pid>/environ), write anywhere, open sockets and
  run programs. Choose it only for code you would run yourself.

In both, the bootstrap (ajet/sandbox/bootstrap.py) sets the limits and the audit hook before the code
runs, which turns the usual refusals into a counted `blocked` status:

- Limits (resource.setrlimit): RLIMIT_AS (memory; allocations beyond it raise MemoryError), RLIMIT_CPU
  (CPU seconds, then SIGKILL), RLIMIT_FSIZE (largest file), RLIMIT_NPROC=0 (no fork, no thread; binding
  under bwrap, where the process is never root), RLIMIT_CORE=0. Under bwrap the folder is a tmpfs of
  `max_folder_bytes`.
- Wall time: the process group is killed with SIGKILL when `wall_s` passes (under bwrap the whole PID
  namespace dies with it).
- Output: stdout and stderr are read as they come, each kept up to `max_output_bytes`; a program that
  writes more is killed there (a program printing a gigabyte costs a few KiB, not a gigabyte).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Literal

from ajet.errors import ConfigError
from ajet.sandbox import bwrap, seccomp
from ajet.sandbox.bootstrap import BOOTSTRAP

Status = Literal["ok", "error", "timeout", "memory", "output_limit", "blocked"]
Isolation = Literal["bwrap", "unsafe_audit_hook"]
ISOLATIONS: tuple[str, ...] = ("bwrap", "unsafe_audit_hook")

TRUNCATED = "\n[output truncated]"
_BLOCKED = re.compile(r"\[ajet sandbox\] blocked: (\w+)")


@dataclass(frozen=True)
class SandboxLimits:
    """What one run may use."""

    wall_s: float = 5.0  # seconds of wall time before the process group is killed
    cpu_s: int = 5  # CPU seconds (RLIMIT_CPU)
    memory_mb: int = 512  # address space (RLIMIT_AS); Python itself needs ~30 MB
    max_output_bytes: int = 16_384  # kept per stream (stdout, stderr); more kills the program
    max_file_bytes: int = 1_048_576  # largest file it may write (RLIMIT_FSIZE)
    max_folder_bytes: int = 16_777_216  # everything its folder may hold (bwrap: a tmpfs of this size)


@dataclass
class SandboxResult:
    """What a run produced and how it ended."""

    status: Status
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None  # negative: killed by that signal
    wall_s: float = 0.0
    truncated: bool = False
    blocked: list[str] = field(default_factory=list)  # kinds refused by the hook: 'process', 'network', 'write'
    isolation: Isolation = "bwrap"

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def check_isolation(isolation: str) -> None:
    """Raise ConfigError unless `isolation` is known and works on this machine (bwrap is probed once)."""
    if isolation not in ISOLATIONS:
        raise ConfigError(f"sandbox isolation {isolation!r} is not one of {', '.join(ISOLATIONS)}")
    why = bwrap.unavailable() if isolation == "bwrap" else None
    if why is not None:
        raise ConfigError(
            f"run_python confines code with bubblewrap and it does not work here: {why}. Install bubblewrap "
            "(apt-get install bubblewrap) on a Linux host that allows namespaces, or, only for code you would "
            "run yourself, set the sandbox isolation to unsafe_audit_hook (a Python audit hook, which the code "
            "can switch off; docs/reliability.md)")


def run_python(code: str, limits: SandboxLimits | None = None, isolation: Isolation = "bwrap") -> SandboxResult:
    """Run `code` as a Python program under `limits`; never raises for anything the code does (ConfigError
    when `isolation` cannot be had here)."""
    limits = limits or SandboxLimits()
    check_isolation(isolation)
    memory = limits.memory_mb * 1024 * 1024
    # (soft, hard): CPU gets SIGXCPU at the soft limit (reported as a timeout), SIGKILL a second later.
    rlimits = {"RLIMIT_AS": (memory, memory), "RLIMIT_CPU": (int(limits.cpu_s), int(limits.cpu_s) + 1),
               "RLIMIT_FSIZE": (limits.max_file_bytes, limits.max_file_bytes), "RLIMIT_NPROC": (0, 0),
               "RLIMIT_CORE": (0, 0)}
    if isolation == "bwrap":
        return _run_bwrap(code, limits, rlimits)
    root = tempfile.mkdtemp(prefix="ajet-sandbox-")
    try:
        main = os.path.join(root, "main.py")
        with open(main, "w", encoding="utf-8") as f:
            f.write(code)
        cfg = {"root": root, "main": main, "rlimits": rlimits}
        env = {**bwrap.environment(), "HOME": root, "TMPDIR": root}
        command = [sys.executable, "-I", "-c", BOOTSTRAP, json.dumps(cfg)]
        return _supervise(command, root, env, limits, isolation)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run_bwrap(code: str, limits: SandboxLimits, rlimits: dict) -> SandboxResult:
    source = code.encode("utf-8", "surrogateescape")
    cfg = {"root": bwrap.INSIDE, "main": f"{bwrap.INSIDE}/main.py", "rlimits": rlimits,
           "drop_to": bwrap.NOBODY if os.geteuid() == 0 else None}
    # bwrap copies the code into the sandbox's folder (--file) and loads the filter (--seccomp)
    with tempfile.TemporaryFile() as file, seccomp.program() as syscalls:
        file.write(source)
        file.flush()
        file.seek(0)
        argv = bwrap.command(["-I", "-c", BOOTSTRAP, json.dumps(cfg)], file.fileno(),
                             limits.max_folder_bytes + len(source), syscalls.fileno())
        result = _supervise(argv, None, bwrap.environment(), limits, "bwrap",
                            pass_fds=(file.fileno(), syscalls.fileno()))
    if result.exit_code is not None and 128 < result.exit_code <= 128 + 64:
        result.exit_code = 128 - result.exit_code  # bwrap exits 128+N for a child killed by signal N
        if result.exit_code == -signal.SIGXCPU and result.status == "error":
            result.status = "timeout"
    return result


async def run_python_async(code: str, limits: SandboxLimits | None = None,
                           isolation: Isolation = "bwrap") -> SandboxResult:
    """`run_python` in a worker thread, so an agent's event loop keeps serving other episodes."""
    return await asyncio.to_thread(run_python, code, limits, isolation)


def _supervise(command: list[str], cwd: str | None, env: dict[str, str], limits: SandboxLimits,
               isolation: Isolation, pass_fds: tuple[int, ...] = ()) -> SandboxResult:
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, pass_fds=pass_fds)
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
    selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
    timed_out = truncated = False
    exited_at: float | None = None
    try:
        while selector.get_map() and not truncated:
            now = time.monotonic()
            if now - started > limits.wall_s:
                timed_out = True
                break
            if proc.poll() is not None:
                exited_at = exited_at or now
                if now - exited_at > 0.5:  # exited, yet something else holds the pipes open
                    break
            for key, _ in selector.select(timeout=0.05):
                chunk = os.read(key.fileobj.fileno(), 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buf = kept[key.data]
                room = limits.max_output_bytes - len(buf)
                buf.extend(chunk[:room])
                truncated = truncated or len(chunk) > room  # stop reading: the rest is never buffered
    finally:
        _kill_group(proc)
        selector.close()
        proc.stdout.close()
        proc.stderr.close()
    exit_code = proc.wait()
    stdout = kept["stdout"].decode("utf-8", "replace")
    stderr = kept["stderr"].decode("utf-8", "replace")
    blocked = _BLOCKED.findall(stderr)
    if truncated:
        status: Status = "output_limit"
        stdout += TRUNCATED if len(kept["stdout"]) >= limits.max_output_bytes else ""
        stderr += TRUNCATED if len(kept["stderr"]) >= limits.max_output_bytes else ""
    elif timed_out or exit_code == -signal.SIGXCPU:
        status = "timeout"
    elif "MemoryError" in stderr:
        status = "memory"
    elif blocked:
        status = "blocked"
    else:
        status = "ok" if exit_code == 0 else "error"
    return SandboxResult(status=status, stdout=stdout, stderr=stderr, exit_code=exit_code,
                         wall_s=round(time.monotonic() - started, 3), truncated=truncated, blocked=blocked,
                         isolation=isolation)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: the group id is the child's pid
    except (ProcessLookupError, PermissionError):
        pass
