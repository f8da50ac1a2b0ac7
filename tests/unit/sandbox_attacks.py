"""Escapes from `ajet.sandbox.run_python`, each a program that first switches the audit hook off (as the
issue 41 attack did, through `gc`) and prints `ESCAPED <name>` when it gets out. Used by
tests/unit/test_sandbox_escapes.py and benchmarks/chaos.py (which counts `sandbox_escapes=`).

Every one of them got out of the audit-hook sandbox (the hook disarmed, then: a file written outside the
folder, a socket to a port of the host, fork and exec as root, writes through dir_fd / sqlite / mkfifo,
the trainer's environment read from /proc/<parent>/environ, the task files read) or is one bubblewrap's
manual warns about (TIOCSTI on the controlling terminal), or reaches a kernel interface the seccomp filter
closes (unshare of a user namespace, ptrace, io_uring, keyctl, a netlink socket).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ajet.sandbox import SandboxLimits, run_python

ROOT = Path(__file__).resolve().parents[2]
SECRET_ENV = "AJET_ESCAPE_SECRET"
SECRET = "sk-trainer-secret"

# Switch the audit hook off: rewrite the closure cell `refuse` of the hook function.
DISARM = textwrap.dedent("""
    import gc, json, os, socket
    for _f in gc.get_objects():
        if getattr(_f, "__name__", None) == "hook" and getattr(_f, "__closure__", None):
            for _c in _f.__closure__:
                if getattr(_c.cell_contents, "__name__", None) == "refuse":
                    _c.cell_contents = lambda *a: None
    socket.socket().close()  # the hook would refuse this: it is off
""")


_LIBC = "import ctypes\nlibc = ctypes.CDLL(None)\n"


def attacks(outside: Path, port: int) -> dict[str, str]:
    """name -> program. `outside`: a host folder the sandbox must not write; `port`: a TCP port listening
    on the host's 127.0.0.1."""
    task_file = ROOT / "tutorial" / "example_math_python" / "val.jsonl"
    parent = os.getpid()
    bodies = {
        "write_outside": f"open({str(outside / 'escaped.txt')!r}, 'w').write('x')",
        "dir_fd_write": f"fd = os.open({str(outside)!r}, os.O_RDONLY)\n"
                        "os.close(os.open('dir_fd', os.O_CREAT | os.O_WRONLY, dir_fd=fd))",
        "sqlite_outside": f"import sqlite3\nsqlite3.connect({str(outside / 'x.db')!r}).execute('create table t (x)')",
        "mkfifo": f"os.mkfifo({str(outside / 'fifo')!r})",
        "host_port": f"socket.create_connection(('127.0.0.1', {port}), 2).close()",
        "internet": "socket.create_connection(('1.1.1.1', 80), 2).close()",
        "fork": "pid = os.fork()\nif pid == 0:\n    os._exit(0)",
        "exec_as_root": "import subprocess\nassert os.getuid() == 0\nos.execv('/usr/bin/id', ['id'])",
        "parent_environ": f"assert {SECRET!r}.encode() in open('/proc/{parent}/environ', 'rb').read()",
        "any_environ": (f"assert any({SECRET!r}.encode() in open(f'/proc/{{p}}/environ', 'rb').read() "
                        "for p in os.listdir('/proc') if p.isdigit() and os.access(f'/proc/{p}/environ', os.R_OK))"),
        "task_answers": f"assert open({str(task_file)!r}).read(10)",
        "project_code": f"assert os.listdir({str(ROOT / 'ajet')!r})",
        "kill_trainer": f"os.kill({parent}, 0)",
        "tiocsti": "import fcntl, termios\nfcntl.ioctl(os.open('/dev/tty', os.O_RDWR), termios.TIOCSTI, b'x')",
        # The kernel's riskier interfaces, reachable through ctypes once the hook is off; each worked under
        # bwrap's namespaces alone, the seccomp filter (ajet/sandbox/seccomp.py) answers EPERM.
        "unshare_userns": _LIBC + "assert libc.unshare(0x10000000) == 0",  # CLONE_NEWUSER: caps inside a new ns
        "ptrace": _LIBC + "assert libc.ptrace(0, 0, 0, 0) == 0",  # PTRACE_TRACEME
        "io_uring": _LIBC + "assert libc.syscall(425, 8, ctypes.create_string_buffer(120)) >= 0",  # io_uring_setup
        "keyctl": _LIBC + "nr = {'x86_64': 250, 'aarch64': 219}[os.uname().machine]\n"
                          "assert libc.syscall(nr, 0, -3, 0) >= 0",  # KEYCTL_GET_KEYRING_ID of the session keyring
        "netlink_socket": "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()",
    }
    # exec replaces the process: `id` prints the escape itself when it runs as root
    return {name: DISARM + f"try:\n{textwrap.indent(body, '    ')}\nexcept BaseException:\n    pass\nelse:\n"
                           f"    print('ESCAPED {name}', flush=True)\n" for name, body in bodies.items()}


@contextmanager
def host_listener() -> Iterator[int]:
    """A TCP port listening on the host's 127.0.0.1 for as long as the block runs."""
    server = socket.create_server(("127.0.0.1", 0))
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def run_attacks(outside: Path) -> list[str]:
    """The attacks that got out (empty when the sandbox held), each checked by its output and, for the
    writes, by what appeared in `outside`. They run from a child process started with a secret in its
    environment, as a trainer holds API keys (/proc/<pid>/environ shows the environment a process was
    started with)."""
    env = {**os.environ, SECRET_ENV: SECRET, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, "-c", f"import json; from tests.unit.sandbox_attacks import _attack_here; "
                           f"print(json.dumps(_attack_here({str(outside)!r})))"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"the attacks did not run: {done.stderr[-2000:]}")
    escaped = json.loads(done.stdout.strip().splitlines()[-1])
    if any(outside.iterdir()):
        escaped.append("files_outside: " + ", ".join(p.name for p in outside.iterdir()))
    return escaped


def _attack_here(outside: str) -> list[str]:
    escaped = []
    with host_listener() as port:
        for name, code in attacks(Path(outside), port).items():
            result = run_python(code, SandboxLimits(wall_s=10, cpu_s=5))
            if f"ESCAPED {name}" in result.stdout or "uid=0(" in result.stdout:
                escaped.append(name)
    return escaped
