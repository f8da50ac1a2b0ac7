"""Managed environments and watched subprocesses, with real venvs, real pip and real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ajet.backbone import envs
from ajet.backbone.launch import run_streaming
from ajet.errors import BackboneError


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AJET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


SPEC = envs.EnvSpec(name="demo", steps=(("six==1.16.0",),), check="import six; assert six.__version__ == '1.16.0'")


def test_env_is_built_once_then_reused(cache: Path) -> None:
    lines: list[str] = []
    python = envs.ensure_env(SPEC, log=lines.append)
    folder = envs.env_dir(SPEC)
    assert python == folder / "bin" / "python" and (folder / envs.READY).is_file()
    assert folder.parent == cache / "envs" and "six==1.16.0" in (folder / "build.log").read_text()
    assert any("environment ready" in line for line in lines)
    # The env imports this very ajet through PYTHONPATH, and not this interpreter's other packages.
    probe = "import importlib.util as u; print(u.find_spec('ajet').origin); import torch"
    out = subprocess.run([str(python), "-c", probe],
                         env={"PYTHONPATH": str(envs.ajet_path_entry())}, capture_output=True, text=True)
    assert Path(out.stdout.splitlines()[0]).resolve().parent == Path(envs.__file__).resolve().parents[1]
    assert "No module named 'torch'" in out.stderr

    again: list[str] = []
    assert envs.ensure_env(SPEC, log=again.append) == python
    assert again == []  # reused: no build, no output


def test_interrupted_build_is_rebuilt(cache: Path) -> None:
    python = envs.ensure_env(SPEC, log=lambda line: None)
    (envs.env_dir(SPEC) / envs.READY).unlink()  # as if the build had been killed before its end
    lines: list[str] = []
    assert envs.ensure_env(SPEC, log=lines.append) == python
    assert any("building the demo environment" in line for line in lines)


def test_changed_pins_get_their_own_env(cache: Path) -> None:
    other = envs.EnvSpec(name="demo", steps=(("six==1.15.0",),), check="import six")
    assert envs.env_dir(other) != envs.env_dir(SPEC)


def test_failed_pip_step_names_the_step_and_shows_pips_error(cache: Path) -> None:
    bad = envs.EnvSpec(name="broken", steps=(("ajet-no-such-package-xyz==9.9",),), check="pass")
    with pytest.raises(BackboneError) as info:
        envs.ensure_env(bad, log=lambda line: None)
    text = str(info.value)
    assert "could not pip install ajet-no-such-package-xyz==9.9" in text
    assert "No matching distribution found for ajet-no-such-package-xyz==9.9" in text
    assert not (envs.env_dir(bad) / envs.READY).exists()


def test_users_own_python_is_checked_not_changed(cache: Path) -> None:
    with pytest.raises(BackboneError, match=r"ajet.backbone.demo.python='/nope/python' does not exist"):
        envs.ensure_env(SPEC, python="/nope/python")
    needs = envs.EnvSpec(name="demo", steps=(), check="import ajet_no_such_module")
    with pytest.raises(BackboneError, match=r"(?s)your environment .* cannot run the demo backbone: .*No module named"):
        envs.ensure_env(needs, python=sys.executable)
    assert envs.ensure_env(envs.EnvSpec(name="demo", steps=(), check="import ajet.errors"), python=sys.executable) \
        == Path(sys.executable)
    assert not (cache / "envs").exists() or not any((cache / "envs").glob("demo-*"))


def test_run_streaming_passes_lines_and_logs(tmp_path: Path) -> None:
    seen: list[str] = []
    log = tmp_path / "run.log"
    run_streaming([sys.executable, "-c", "import sys\nfor i in range(3): print('step', i, flush=True)"],
                  name="demo", log_path=log, on_line=seen.append)
    assert seen == ["step 0", "step 1", "step 2"]
    assert "step 2" in log.read_text()


def test_run_streaming_failure_carries_the_backends_error(tmp_path: Path) -> None:
    code = "print('loading'); raise ValueError('remaining_argv: --bogus_key')"
    with pytest.raises(BackboneError) as info:
        run_streaming([sys.executable, "-c", code], name="swift sft", log_path=tmp_path / "run.log")
    text = str(info.value)
    assert text.startswith("swift sft failed (exit 1)")
    assert "ValueError: remaining_argv: --bogus_key" in text and "loading" in text


def test_run_streaming_stops_a_silent_hang_and_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    code = (f"import subprocess, sys, time\n"
            f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(marker)!r}, 'w').write(str(c.pid)); print('started', flush=True); time.sleep(60)")
    with pytest.raises(BackboneError, match=r"printed nothing for 1 s and was stopped"):
        run_streaming([sys.executable, "-c", code], name="hang", log_path=tmp_path / "run.log", idle_timeout_s=1)
    child = int(marker.read_text())
    import os
    import time

    for _ in range(50):  # the child of the killed process group is gone too
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        try:
            os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    else:
        pytest.fail("the hung command's child process is still running")


def test_run_streaming_missing_command(tmp_path: Path) -> None:
    with pytest.raises(BackboneError, match=r"cannot start swift sft: .*No such file"):
        run_streaming(["/no/such/swift", "sft"], name="swift sft", log_path=tmp_path / "run.log")
