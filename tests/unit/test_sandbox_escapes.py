"""`ajet.sandbox` under bwrap: every escape that once worked against the audit-hook sandbox, tried again
with the hook switched off first (Python code can reach it through `gc`), so only the kernel's walls stand.
Each program prints what it managed as JSON; nothing may get out.

Reproduced on the audit-hook sandbox (issue 41): the hook disarmed through gc, then a file written
outside the folder, a socket to the host, fork + exec of `id` as root; writes through `dir_fd`,
`sqlite3`, `mkfifo`; the trainer's environment read from /proc/<parent>/environ; the task files with
their answers read. Plus what bubblewrap's manual warns about: TIOCSTI on the terminal (--new-session),
and no privileges to regain (setuid binaries, capabilities)."""

from __future__ import annotations

import json
import os
import signal
import socket
import textwrap
from pathlib import Path

import pytest

from ajet.errors import ConfigError
from ajet.sandbox import SandboxLimits, bwrap, run_python, seccomp
from tests.unit.sandbox_attacks import DISARM as DISARM_HOOK
from tests.unit.sandbox_attacks import run_attacks

ROOT = Path(__file__).resolve().parents[2]
FAST = SandboxLimits(wall_s=10, cpu_s=5)

pytestmark = pytest.mark.skipif(bwrap.unavailable() is not None, reason=f"no OS sandbox here: {bwrap.unavailable()}")

DISARM = DISARM_HOOK + textwrap.dedent("""
    out = {}

    def attempt(name, fn):
        try:
            out[name] = repr(fn())
        except BaseException as exc:
            out[name] = "refused: " + type(exc).__name__
""")


def _escape(body: str, limits: SandboxLimits = FAST) -> dict[str, str]:
    result = run_python(DISARM + textwrap.dedent(body) + "\nprint(json.dumps(out))", limits)
    assert result.status == "ok" and result.blocked == [], result.stderr  # the hook really was off
    return json.loads(result.stdout.strip().splitlines()[-1])


def _refused(out: dict[str, str]) -> list[str]:
    return [name for name, what in out.items() if not what.startswith("refused")]


def test_no_listed_attack_escapes(tmp_path: Path) -> None:
    """The attacks benchmarks/chaos.py counts (tests/unit/sandbox_attacks.py), each in a program of its own."""
    assert run_attacks(tmp_path) == []


def test_writes_outside_the_folder_fail_with_the_hook_off(tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    stray = f"ajet-escape-{os.getpid()}"  # a name no one else uses: removed below should it ever get out
    try:
        out = _escape(f"""
        import sqlite3
        attempt("open", lambda: open({str(target)!r}, "w").write("x"))
        attempt("dir_fd_outside", lambda: os.open({str(tmp_path)!r}, os.O_RDONLY))
        # a folder fd outside: the host's tmp_path where it is visible (it must not be), else the root
        root = os.open({str(tmp_path)!r} if os.path.isdir({str(tmp_path)!r}) else "/", os.O_RDONLY)
        attempt("dir_fd_create", lambda: os.open("x", os.O_CREAT | os.O_WRONLY, dir_fd=root))
        open("inside.txt", "w").write("x")
        attempt("rename_dst_dir_fd", lambda: os.rename("inside.txt", "moved.txt", dst_dir_fd=root))
        attempt("sqlite", lambda: sqlite3.connect({str(tmp_path / 'x.db')!r}).execute("create table t (x)"))
        attempt("mkfifo", lambda: os.mkfifo({str(tmp_path / 'fifo')!r}))
        attempt("mknod", lambda: os.mknod({str(tmp_path / 'node')!r}))
        for d in ("/", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/usr", "/etc", "/root", "/proc", {os.path.dirname(os.__file__)!r}):
            attempt("write " + d, lambda d=d: open(os.path.join(d, {stray!r}), "w").write("x"))
        attempt("write_inside", lambda: open("/sandbox/ok.txt", "w").write("x"))
    """)
    finally:
        for d in ("/", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/usr", "/etc", "/root", os.path.dirname(os.__file__)):
            Path(d, stray).unlink(missing_ok=True)
    assert out.pop("write_inside") == "1"  # the folder itself is writable
    assert _refused(out) == [], out
    assert list(tmp_path.iterdir()) == []


def test_no_network_to_the_host_with_the_hook_off(tmp_path: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    unix_path = tmp_path / "s.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(unix_path))
    unix.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0ajet-escape-{os.getpid()}")
    abstract.listen()
    try:
        out = _escape(f"""
            attempt("tcp_host_port", lambda: socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), 2))
            attempt("tcp_out", lambda: socket.create_connection(("1.1.1.1", 80), 2))
            attempt("dns", lambda: socket.getaddrinfo("example.com", 80))
            attempt("unix_file", lambda: socket.socket(socket.AF_UNIX).connect({str(unix_path)!r}))
            attempt("unix_abstract", lambda: socket.socket(socket.AF_UNIX).connect("\\0ajet-escape-{os.getpid()}"))
        """)
    finally:
        server.close()
        unix.close()
        abstract.close()
    assert _refused(out) == [], out


def test_no_process_no_privilege_and_no_trainer_in_sight_with_the_hook_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AJET_ESCAPE_SECRET", "sk-trainer-secret")
    out = _escape(f"""
        import threading, _posixsubprocess
        attempt("fork", os.fork)
        attempt("thread", lambda: threading.Thread(target=print).start())
        attempt("kill_trainer", lambda: os.kill({os.getpid()}, 15))
        attempt("parent_environ", lambda: open("/proc/{os.getpid()}/environ", "rb").read())
        attempt("become_root", lambda: os.setuid(0))
    """)
    assert _refused(out) == [], out
    # exec replaces the process inside the same walls (no fork: nothing runs beside it): never root
    ran = run_python(DISARM + "os.execv('/usr/bin/id', ['id'])", FAST)
    assert ran.stdout.startswith("uid=") and not ran.stdout.startswith("uid=0("), ran


def test_what_the_process_sees_of_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AJET_ESCAPE_SECRET", "sk-trainer-secret")
    code = DISARM + textwrap.dedent("""
        status = open("/proc/self/status").read()
        print(json.dumps({"uid": os.getuid(), "caps": status.split("CapEff:")[1].split()[0],
                          "no_new_privs": status.split("NoNewPrivs:")[1].split()[0],
                          "pids": len([p for p in os.listdir("/proc") if p.isdigit()]),
                          "secret": any(b"sk-trainer-secret" in open(f"/proc/{p}/environ", "rb").read()
                                        for p in os.listdir("/proc") if p.isdigit()
                                        and os.access(f"/proc/{p}/environ", os.R_OK)),
                          "env": sorted(os.environ), "cwd": os.getcwd(), "hostname": socket.gethostname()}))
    """)
    result = run_python(code, FAST)
    seen = json.loads(result.stdout)
    assert seen["uid"] != 0 and seen["caps"] == "0000000000000000" and seen["no_new_privs"] == "1"
    assert seen["pids"] <= 3  # bwrap's reaper, and this process: a PID namespace of its own
    assert not seen["secret"] and "AJET_ESCAPE_SECRET" not in seen["env"]
    assert seen["cwd"] == "/sandbox" and seen["hostname"] == "sandbox" and result.isolation == "bwrap"


def test_task_files_and_the_project_are_not_visible() -> None:
    answers = ROOT / "tutorial" / "example_math_python" / "val.jsonl"
    assert answers.is_file()
    out = _escape(f"""
        import sys
        attempt("task_file", lambda: open({str(answers)!r}).read(100))
        attempt("project", lambda: os.listdir({str(ROOT)!r}))
        attempt("home", lambda: os.listdir(os.path.expanduser("~root")))
        attempt("import_ajet", lambda: __import__("ajet"))
        attempt("cwd_of_trainer", lambda: os.listdir({os.getcwd()!r}))
    """)
    assert _refused(out) == [], out


def test_tiocsti_cannot_reach_a_terminal() -> None:
    """bubblewrap's manual: without --new-session the sandbox could push keystrokes into the terminal
    that started it (TIOCSTI, CVE-2017-5226). It has no controlling terminal and no tty on its fds."""
    out = _escape("""
        import fcntl, termios
        attempt("dev_tty", lambda: fcntl.ioctl(os.open("/dev/tty", os.O_RDWR), termios.TIOCSTI, b"x"))
        for fd in (0, 1, 2):
            attempt(f"fd{fd}", lambda fd=fd: fcntl.ioctl(fd, termios.TIOCSTI, b"x"))
        attempt("new_ptmx_as_ctty", lambda: fcntl.ioctl(os.open("/dev/ptmx", os.O_RDWR), termios.TIOCSTI, b"x"))
    """)
    assert _refused(out) == [], out
    assert os.getpgrp() > 0  # this process and its terminal are untouched


def test_limits_hold_with_the_hook_off() -> None:
    big = run_python(DISARM + "a = bytearray(2 * 1024**3)", SandboxLimits(memory_mb=256))
    assert big.status == "memory"
    busy = run_python(DISARM + "while True:\n    pass", SandboxLimits(wall_s=30, cpu_s=1))
    assert busy.status == "timeout" and busy.exit_code == -signal.SIGXCPU
    full = run_python(DISARM + "open('a', 'wb').write(b'x' * 900_000)\nopen('b', 'wb').write(b'x' * 900_000)",
                      SandboxLimits(max_folder_bytes=1_000_000))
    assert full.status == "error" and "No space left" in full.stderr  # the folder is a tmpfs of that size


def test_no_bwrap_means_a_refusal_not_a_weaker_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    bwrap.unavailable.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"bubblewrap .*not installed.*unsafe_audit_hook"):
            run_python("print(1)")
        assert run_python("print(1)", isolation="unsafe_audit_hook").stdout == "1\n"  # asked for by name only
    finally:
        monkeypatch.undo()
        bwrap.unavailable.cache_clear()


def test_no_libseccomp_means_a_refusal_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seccomp, "_library", lambda: None)
    bwrap.unavailable.cache_clear()
    seccomp._compiled.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"libseccomp is not installed.*unsafe_audit_hook"):
            run_python("print(1)")
    finally:
        monkeypatch.undo()
        bwrap.unavailable.cache_clear()
        seccomp._compiled.cache_clear()
