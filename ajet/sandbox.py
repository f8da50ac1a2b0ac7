"""Run untrusted Python (code a model wrote) in a contained subprocess and get its output back.

    result = run_python("print(sum(range(10)))", SandboxLimits(wall_s=5))
    result.status   # 'ok' | 'error' | 'timeout' | 'memory' | 'output_limit' | 'blocked'
    result.stdout   # '45\\n' (capped at limits.max_output_bytes, then '[output truncated]')

What each run gets, and what it guarantees:

- A fresh temporary folder as its working directory and HOME/TMPDIR, removed afterwards. An audit hook
  (`sys.addaudithook`, installed before the code runs and impossible to remove from Python) refuses any
  open-for-writing, remove, rename, mkdir, chmod, ... of a path outside that folder.
- No network: the hook refuses creating sockets and resolving names. Where `unshare --net` works (root,
  or unprivileged user namespaces), the child also runs in an empty network namespace, so native code
  that bypasses Python has no network either; `network_isolation` in the result says which applied.
- No new processes: the hook refuses os.fork/forkpty, exec*, spawn*, posix_spawn, system, subprocess,
  importing _posixsubprocess, and ctypes symbol lookups and foreign calls (which could go around it;
  importing ctypes stays allowed, numpy and sympy need it). RLIMIT_NPROC=0 is set as well, which
  the kernel enforces for non-root users only (root ignores it), so under root the hook is the guard.
- Limits (resource.setrlimit in the child): RLIMIT_AS (memory; allocations beyond it raise
  MemoryError), RLIMIT_CPU (CPU seconds, then SIGKILL), RLIMIT_FSIZE (largest file it may write).
- Wall time: the child runs in its own process group, killed with SIGKILL when `wall_s` passes.
- Output: stdout and stderr are read as they come, each kept up to `max_output_bytes`; a program that
  writes more is killed there (a program printing a gigabyte costs a few KiB, not a gigabyte).

The hook is a guard against accidents and against what a language model writes, not against a
determined attacker with native code: for hostile code at scale, run the whole rollout inside a
container or VM (e.g. `docker run --network none`).
"""

from __future__ import annotations

import asyncio
import functools
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

Status = Literal["ok", "error", "timeout", "memory", "output_limit", "blocked"]

TRUNCATED = "\n[output truncated]"
_BLOCKED = re.compile(r"\[ajet sandbox\] blocked: (\w+)")

# Runs in the child (`python -I -c`): limits, then the audit hook, then the user's code as __main__.
# Each refusal is written to fd 2 before raising, so the parent counts it even when the code catches it.
_BOOTSTRAP = r"""
import json, os, resource, sys, traceback


def _contain(cfg):
    # Everything the hook reads lives in this closure, not in module globals the code could rebind
    # (`import __main__; __main__.ROOT = "/"`).
    for name, (soft, hard) in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    root = os.path.realpath(cfg["root"]) + os.sep
    fork = frozenset({"os.fork", "os.forkpty", "os.posix_spawn", "os.system", "subprocess.Popen", "os.startfile"})
    net = frozenset({"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
                     "socket.gethostbyaddr", "socket.sendto", "socket.sendmsg", "socket.socketpair"})
    path_events = {"os.remove": 1, "os.rename": 2, "os.rmdir": 1, "os.mkdir": 1, "os.symlink": 2, "os.link": 2,
                   "os.chmod": 1, "os.chown": 1, "os.truncate": 1, "os.utime": 1, "shutil.rmtree": 1,
                   "os.chflags": 1, "os.setxattr": 1, "os.removexattr": 1}
    # ctypes may be imported (numpy and sympy do) but not used to reach C functions: no symbol lookups,
    # no calls through function pointers, no libraries beyond the process itself.
    ctypes_events = frozenset({"ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function"})
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    write, realpath, fspath, getpid = os.write, os.path.realpath, os.fspath, os.getpid

    def refuse(kind, what):
        write(2, f"[ajet sandbox] blocked: {kind} ({what})\n".encode())
        raise PermissionError(f"[ajet sandbox] {kind} is not allowed here ({what})")

    def inside(path):
        if isinstance(path, int):
            return True  # an fd: it was opened through this hook
        try:
            full = realpath(fspath(path))
        except (TypeError, ValueError):
            return False
        full = full.decode() if isinstance(full, bytes) else full
        return full + "/" == root or full.startswith(root) or full == "/dev/null"

    def hook(event, args):
        if event in fork or event.startswith(("os.exec", "os.spawn")):
            refuse("process", event)
        elif event in net:
            refuse("network", event)
        elif event == "import" and args[0] == "_posixsubprocess":  # a fresh copy would bring fork_exec back
            refuse("process", "import " + args[0])
        elif event in ctypes_events or (event == "ctypes.dlopen" and args[0] is not None):
            refuse("process", event)
        elif event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & write_flags)
            if writes and not inside(path):
                refuse("write", repr(path))
        elif event in path_events:
            for path in args[:path_events[event]]:
                if not inside(path):
                    refuse("write", f"{event} {path!r}")
        elif event in ("os.kill", "os.killpg") and args[0] not in (0, getpid()):
            refuse("process", event)

    import _posixsubprocess  # its fork_exec raises no audit event (3.11): replace it before the code runs

    def no_fork_exec(*args, **kwargs):
        refuse("process", "_posixsubprocess.fork_exec")

    _posixsubprocess.fork_exec = no_fork_exec
    sys.addaudithook(hook)


_cfg = json.loads(sys.argv[1])
_source = open(_cfg["main"], encoding="utf-8").read()
sys.argv = [_cfg["main"]]
_contain(_cfg)
del _contain, _cfg
try:
    exec(compile(_source, "main.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
except SystemExit:
    raise
except BaseException as exc:  # the traceback of the user's code only, without this bootstrap's frames
    shown = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    shown.stack = traceback.StackSummary.from_list([f for f in shown.stack if f.filename != "<string>"])
    sys.stderr.write("".join(shown.format()))
    sys.exit(1)
"""


@dataclass(frozen=True)
class SandboxLimits:
    """What one run may use."""

    wall_s: float = 5.0  # seconds of wall time before the process group is killed
    cpu_s: int = 5  # CPU seconds (RLIMIT_CPU)
    memory_mb: int = 512  # address space (RLIMIT_AS); Python itself needs ~30 MB
    max_output_bytes: int = 16_384  # kept per stream (stdout, stderr); more kills the program
    max_file_bytes: int = 1_048_576  # largest file it may write (RLIMIT_FSIZE)


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
    network_isolation: Literal["namespace", "audit_hook"] = "audit_hook"

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@functools.lru_cache(maxsize=1)
def _unshare_prefix() -> tuple[str, ...]:
    """`unshare --net` (plus `--map-root-user` when not root) when it works on this machine, else ()."""
    exe = shutil.which("unshare")
    if exe is None:
        return ()
    prefix = (exe, "--net") if os.geteuid() == 0 else (exe, "--net", "--map-root-user")
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return prefix if ok else ()


def run_python(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run `code` as a Python program under `limits`; never raises for anything the code does."""
    limits = limits or SandboxLimits()
    root = tempfile.mkdtemp(prefix="ajet-sandbox-")
    try:
        main = os.path.join(root, "main.py")
        with open(main, "w", encoding="utf-8") as f:
            f.write(code)
        memory = limits.memory_mb * 1024 * 1024
        # (soft, hard): CPU gets SIGXCPU at the soft limit (reported as a timeout), SIGKILL a second later.
        cfg = {"root": root, "main": main, "rlimits": {
            "RLIMIT_AS": (memory, memory), "RLIMIT_CPU": (int(limits.cpu_s), int(limits.cpu_s) + 1),
            "RLIMIT_FSIZE": (limits.max_file_bytes, limits.max_file_bytes), "RLIMIT_NPROC": (0, 0),
            "RLIMIT_CORE": (0, 0)}}
        env = {"PATH": "/usr/bin:/bin", "HOME": root, "TMPDIR": root, "LANG": "C.UTF-8",
               "PYTHONIOENCODING": "utf-8", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        prefix = _unshare_prefix()
        command = [*prefix, sys.executable, "-I", "-c", _BOOTSTRAP, json.dumps(cfg)]
        result = _supervise(command, root, env, limits)
        result.network_isolation = "namespace" if prefix else "audit_hook"
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def run_python_async(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """`run_python` in a worker thread, so an agent's event loop keeps serving other episodes."""
    return await asyncio.to_thread(run_python, code, limits)


def _supervise(command: list[str], root: str, env: dict[str, str], limits: SandboxLimits) -> SandboxResult:
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
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
                         wall_s=round(time.monotonic() - started, 3), truncated=truncated, blocked=blocked)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: the group id is the child's pid
    except (ProcessLookupError, PermissionError):
        pass
