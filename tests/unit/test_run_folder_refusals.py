"""Inputs refused before anything is changed (issue 41): a `--conf` YAML alias bomb (before Hydra
composes it), an `output_dir` that is a file (`ajet` and `ajet eval`: exit 2 and one paragraph, not a
FileExistsError traceback), `--resume` of a folder that does not exist (nothing created), and the swift
and llamafactory runs refused on a folder another live run holds, as the debug backbone is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.cli import main
from ajet.config.loader import load_config
from ajet.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "tutorial" / "example_math_agent" / "math_agent.yaml"
HOLDER = "import sys, time; from ajet.runlock import RunLock; RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(120)"


def _ajet(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    """The `ajet` command line, in this process (the refusals come before any model loads)."""
    code = main(list(args))
    return code, capsys.readouterr().err


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_yaml_alias_bomb_is_refused_before_composition(tmp_path: Path) -> None:
    # 10^4 leaves under workflow_args (a key that takes anything): Hydra took 10.7 s to compose it, and
    # 10^6 did not finish in two minutes; each extra line multiplies it by ten.
    levels = ["    a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
        f"    a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 4)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("ajet:\n  model: {path: tiny-random}\n  workflow_args:\n" + "\n".join(levels) + "\n")
    with pytest.raises(ConfigError, match=r"bomb.yaml: refused: its aliases \(\*name\) expand it by 12,330 nodes, over"):
        load_config(bomb)
    fine = tmp_path / "fine.yaml"  # a few aliases, as configs use them, still load
    fine.write_text("ajet:\n  model: {path: tiny-random}\n  workflow: ajet.workflows.chat:ChatWorkflow\n"
                    "  workflow_args:\n    base: &b {x: 1}\n    again: *b\n")
    assert load_config(fine).workflow_args["again"] == {"x": 1}


@pytest.mark.parametrize("command", [[], ["eval"]], ids=["train", "eval"])
def test_an_output_dir_that_is_a_file_exits_2_and_creates_nothing(tmp_path: Path, command: list[str], capsys) -> None:
    target = tmp_path / "not-a-folder"
    target.write_text("mine")
    for out in (target, target / "sub"):
        code, err = _ajet(capsys, *command, "--conf", str(YAML), "model.path=tiny-random", f"output_dir={out}")
        assert code == 2 and f"error: output_dir '{out}' is a file (or lies under one), not a folder" in err, err
    assert _listing(tmp_path) == ["not-a-folder"] and target.read_text() == "mine"


def test_resume_of_a_folder_that_does_not_exist_creates_nothing(tmp_path: Path, capsys) -> None:
    for args in (["--resume", f"output_dir={tmp_path / 'missing'}"], ["--resume", str(tmp_path / "missing")]):
        code, err = _ajet(capsys, "--conf", str(YAML), "model.path=tiny-random", *args)
        assert code == 2 and "resume" in err, err
    assert _listing(tmp_path) == []


@pytest.mark.parametrize("backbone", ["swift", "llamafactory"])
def test_swift_and_llamafactory_runs_take_the_run_lock(tmp_path: Path, backbone: str) -> None:
    cfg = load_config(YAML, ["model.path=tiny-random", "algorithm=sft", f"output_dir={tmp_path}"], backbone=backbone)
    if backbone == "swift":
        from ajet.backbone.swift.run import SwiftRun as Run
    else:
        from ajet.backbone.llamafactory.run import LlamaFactoryRun as Run
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"is in use by another live run \\(pid {holder.pid} "):
            Run(cfg)
        assert _listing(tmp_path) == [".ajet.lock"]  # refused before it wrote anything
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    run = Run(cfg)  # the holder is gone: this run takes the lock, and holds it until its run() ends
    try:
        again = load_config(YAML, ["model.path=tiny-random", "algorithm=sft", f"output_dir={tmp_path}"], backbone=backbone)
        with pytest.raises(ConfigError, match=f"in use by another live run \\(pid {os.getpid()} "):
            Run(again, resume=True)
    finally:
        run.lock.release()
