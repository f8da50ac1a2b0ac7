"""`ajet.sandbox`: each containment, with real subprocesses. Every case was first run by hand and its
output read (status, exit code, the refusal line, the time it took). What holds when the audit hook is
switched off (the kernel's walls) is in test_sandbox_escapes.py."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import time
from pathlib import Path

import pytest

from ajet.sandbox import TRUNCATED, SandboxLimits, bwrap, run_python, run_python_async

FAST = SandboxLimits(wall_s=3, cpu_s=2)
pytestmark = pytest.mark.skipif(bwrap.unavailable() is not None, reason=f"no OS sandbox here: {bwrap.unavailable()}")


def test_plain_code_runs_and_prints() -> None:
    result = run_python("import math\nprint(math.comb(10, 3) * 2)", FAST)
    assert result.ok and result.stdout == "240\n" and result.exit_code == 0 and result.blocked == []


def test_bad_code_is_an_error_with_only_the_users_traceback() -> None:
    result = run_python("x = [1, 2]\nprint(x[5])", FAST)
    assert result.status == "error" and result.exit_code == 1
    assert 'File "main.py", line 2' in result.stderr and "IndexError" in result.stderr
    assert "<string>" not in result.stderr  # the bootstrap's frames are left out
    assert run_python("def f(:\n  pass", FAST).status == "error"  # a syntax error too


def test_infinite_loop_is_killed_at_the_wall_time() -> None:
    started = time.monotonic()
    result = run_python("while True:\n    pass", SandboxLimits(wall_s=1.5, cpu_s=30))
    assert result.status == "timeout" and result.exit_code == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_cpu_limit_stops_a_busy_loop_before_the_wall_time() -> None:
    result = run_python("while True:\n    pass", SandboxLimits(wall_s=30, cpu_s=1))
    assert result.status == "timeout" and result.exit_code == -signal.SIGXCPU and result.wall_s < 10


def test_sleeping_program_is_killed_with_its_process_group() -> None:
    result = run_python("import time\nprint('start', flush=True)\ntime.sleep(60)", SandboxLimits(wall_s=1))
    assert result.status == "timeout" and result.stdout == "start\n" and result.wall_s < 4


def test_fork_bomb_is_refused_and_counted() -> None:
    result = run_python("import os\nwhile True:\n    os.fork()", FAST)
    assert result.status == "blocked" and result.blocked == ["process"] and "os.fork" in result.stderr


def test_subprocess_and_multiprocessing_and_system_are_refused() -> None:
    for code in ("import subprocess\nsubprocess.run(['true'])", "import multiprocessing as m\nm.Process(target=print).start()",
                 "import os\nos.system('true')", "import os\nos.execv('/bin/true', ['true'])",
                 "import _posixsubprocess as p\np.fork_exec()",  # not audited by Python: replaced in the child
                 "import sys\ndel sys.modules['_posixsubprocess']\nimport _posixsubprocess",
                 "import ctypes\nctypes.CDLL(None).fork()", "import ctypes\nctypes.CDLL('libc.so.6')"):
        result = run_python(code, FAST)
        assert result.status == "blocked" and result.blocked == ["process"], (code, result.stderr)


def test_numpy_and_sympy_still_import() -> None:
    # both import ctypes (allowed) and sympy imports subprocess (allowed: running one is not)
    result = run_python("import numpy, sympy\nprint(int(numpy.arange(5).sum()), sympy.factorint(360))",
                        SandboxLimits(wall_s=60, cpu_s=60))
    assert result.ok and result.stdout == "10 {2: 3, 3: 2, 5: 1}\n", result.stderr


def test_a_caught_refusal_is_still_counted() -> None:
    result = run_python("import os\ntry:\n    os.fork()\nexcept PermissionError:\n    print('caught')", FAST)
    assert result.stdout == "caught\n" and result.exit_code == 0 and result.blocked == ["process"]


def test_rlimit_nproc_and_others_are_set_in_the_child() -> None:
    code = ("import resource as r\nprint(r.getrlimit(r.RLIMIT_NPROC)[0], r.getrlimit(r.RLIMIT_AS)[0], "
            "r.getrlimit(r.RLIMIT_FSIZE)[0], r.getrlimit(r.RLIMIT_CPU)[0])")
    result = run_python(code, SandboxLimits(memory_mb=300, max_file_bytes=1000, cpu_s=3))
    assert result.stdout.split() == ["0", str(300 * 1024 * 1024), "1000", "3"]
    assert resource.getrlimit(resource.RLIMIT_NPROC)[0] != 0  # the parent is untouched


def test_network_is_refused() -> None:
    for code in ("import socket\nsocket.socket()", "import socket\nsocket.create_connection(('1.1.1.1', 80), 2)",
                 "import urllib.request\nurllib.request.urlopen('http://example.com', timeout=2)"):
        result = run_python(code, FAST)
        assert result.status in ("blocked", "error") and "network" in result.blocked, (code, result.stderr)
    assert run_python("print(1)", FAST).isolation == "bwrap"


def test_huge_output_is_truncated_not_buffered() -> None:
    started = time.monotonic()
    result = run_python("while True:\n    print('x' * 100000)", SandboxLimits(wall_s=10, max_output_bytes=4096))
    assert result.status == "output_limit" and result.truncated and result.exit_code == -signal.SIGKILL
    assert result.stdout.endswith(TRUNCATED) and len(result.stdout) == 4096 + len(TRUNCATED)
    assert time.monotonic() - started < 5  # killed at the cap, not after the wall time
    flood = run_python("import sys\nsys.stderr.write('e' * 10**7)", SandboxLimits(max_output_bytes=1000))
    assert flood.status == "output_limit" and len(flood.stderr) == 1000 + len(TRUNCATED)


def test_memory_limit_raises_memory_error() -> None:
    result = run_python("a = bytearray(2 * 1024**3)", SandboxLimits(memory_mb=256))
    assert result.status == "memory" and "MemoryError" in result.stderr


def test_writes_outside_the_temp_dir_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    for code in (f"open({str(target)!r}, 'w').write('x')", f"import os\nos.open({str(target)!r}, os.O_CREAT | os.O_WRONLY)",
                 f"import pathlib\npathlib.Path({str(target)!r}).write_text('x')", "import os\nos.remove('/etc/hostname')",
                 "import shutil\nshutil.rmtree('/tmp')", f"import os\nos.chdir('/')\nopen({target.name!r}, 'w')"):
        result = run_python(code, FAST)
        assert result.blocked == ["write"], (code, result.stderr)
    assert not target.exists() and Path("/etc/hostname").exists()


def test_writes_inside_the_temp_dir_work_and_the_dir_is_removed() -> None:
    code = "import os\nopen('a.txt', 'w').write('hi')\nos.mkdir('d')\nprint(open('a.txt').read(), os.getcwd())"
    result = run_python(code, FAST)
    assert result.ok, result.stderr
    text, cwd = result.stdout.split()
    assert text == "hi" and cwd == "/sandbox"  # a tmpfs of the run's own, gone with its mount namespace


def test_unsafe_audit_hook_runs_only_when_named_and_says_so() -> None:
    code = "import os\nopen('a.txt', 'w').write('hi')\nprint(open('a.txt').read(), os.getcwd())"
    result = run_python(code, FAST, isolation="unsafe_audit_hook")
    text, cwd = result.stdout.split()
    assert result.isolation == "unsafe_audit_hook" and text == "hi"
    assert os.path.basename(cwd).startswith("ajet-sandbox-") and not os.path.exists(cwd)
    assert run_python("import os\nos.fork()", FAST, isolation="unsafe_audit_hook").blocked == ["process"]


def test_file_size_limit() -> None:
    result = run_python("open('big.bin', 'wb').write(b'x' * 100_000)", SandboxLimits(max_file_bytes=10_000))
    assert result.status == "error" and "File too large" in result.stderr


def test_killing_other_processes_is_refused() -> None:
    result = run_python(f"import os, signal\nos.kill({os.getpid()}, signal.SIGTERM)", FAST)
    assert result.blocked == ["process"]  # and this test process is still alive to assert it


async def test_async_runs_overlap() -> None:
    started = time.monotonic()
    results = await asyncio.gather(*(run_python_async("import time\ntime.sleep(1)\nprint(7)") for _ in range(4)))
    assert [r.stdout for r in results] == ["7\n"] * 4
    assert time.monotonic() - started < 3.5  # four 1-second programs, not run one after another


def test_the_guard_cannot_be_rebound_from_main(tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    code = f"import __main__\n__main__.ROOT = '/'\n__main__.root = '/'\nopen({str(target)!r}, 'w').write('x')"
    result = run_python(code, FAST)
    assert result.blocked == ["write"] and not target.exists()
