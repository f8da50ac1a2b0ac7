"""The `ajet` command line: the installed console script in real subprocesses (--cfg, errors, exit
codes, no torch import), and the dispatch of each command to its implementation.

The commands' implementations (ajet.backbone.run, ajet.eval.run.run_eval, ajet.serving.app.main,
ajet.trainer.export.export_checkpoint) are tested in their own files; here recording stand-ins are
put in sys.modules so only the argument plumbing of cli.py is under test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from ajet.cli import main
from ajet.config.schema import AjetConfig
from ajet.errors import CheckpointError

YAML = "ajet:\n  project: energy\n  workflow: agent.py:EnergyAgent\n  rollout: {group_size: 8}\n"


def console_script() -> str:
    """The installed `ajet` script: next to this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "ajet"
    found = str(beside) if beside.exists() else shutil.which("ajet")
    assert found, "the ajet console script is not installed; run `pip install -e .`"
    return found


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "proj" / "my.yaml"
    path.parent.mkdir()
    path.write_text(YAML)
    return path


def run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([console_script(), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "60"})


# ---------------------------------------------------------------- the installed script


def test_cfg_prints_resolved_yaml(conf: Path, tmp_path: Path) -> None:
    proc = run_script("--conf", str(conf), "--cfg", "trainer.steps=3", "ajet.rollout.concurrency=2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = yaml.safe_load(proc.stdout)["ajet"]
    assert (data["trainer"]["steps"], data["rollout"]["group_size"], data["rollout"]["concurrency"]) == (3, 8, 2)
    assert data["workflow"] == f"{conf.parent}/agent.py:EnergyAgent"
    assert data["backbone"]["name"] == "debug"


def test_bad_key_exits_2_without_traceback(conf: Path, tmp_path: Path) -> None:
    proc = run_script("--conf", str(conf), "--cfg", "rollout.group_sise=3", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    # One line, however narrow the terminal (COLUMNS=60 above).
    assert proc.stderr.strip() == (
        "error: invalid config: ajet.rollout.group_sise (from the command line): unknown key; did you mean 'group_size'?"
    )


def test_bad_value_in_yaml_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("ajet:\n  workflow: m:A\n  rollout: {group_size: abc}\n")
    proc = run_script("--conf", "bad.yaml", "--cfg", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        "error: invalid config: ajet.rollout.group_size = 'abc' (from bad.yaml): "
        "expected a valid integer, unable to parse string as an integer"
    )


def test_missing_conf_file_exits_2(tmp_path: Path) -> None:
    proc = run_script("eval", "--conf", "missing.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: config file 'missing.yaml' does not exist (current directory: {tmp_path})"


def test_help_and_cfg_do_not_import_torch(conf: Path, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ajet.cli import main\n"
        f"assert main(['--conf', {str(conf)!r}, '--cfg']) == 0\n"
        "try:\n"
        "    main(['--help'])\n"
        "finally:\n"
        "    print('TORCH', 'torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("TORCH False")
    assert "usage: ajet" in proc.stdout


# ---------------------------------------------------------------- in-process: help and usage


def test_help_lists_commands(capsys: pytest.CaptureFixture) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for text in ("--conf YAML", "--backbone {debug,llamafactory,swift}", "--resume [PATH]", "--cfg",
                 "ajet eval --conf", "ajet serve --model", "ajet export --checkpoint"):
        assert text in out


@pytest.mark.parametrize("command", ["eval", "serve", "export"])
def test_command_help(command: str, capsys: pytest.CaptureFixture) -> None:
    assert main([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: ajet {command} ")


def test_help_config_prints_the_reference(capsys: pytest.CaptureFixture) -> None:
    assert main(["--help-config"]) == 0
    assert "| `ajet.rollout.group_size` | int, >= 1 | `4` |" in capsys.readouterr().out


def test_no_config_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    assert main([]) == 2
    assert "error: no config given; run `ajet --conf my.yaml` (see `ajet --help`)" in capsys.readouterr().err


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    assert main(["--conf", "x.yaml", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


# ---------------------------------------------------------------- dispatch to the implementations


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list:
    """Record what each command's implementation receives."""
    seen: list = []

    def recorder(name: str, result=None):
        def call(*args, **kwargs):
            seen.append((name, args, kwargs))
            return result
        return call

    modules = {
        "ajet.backbone.registry": types.SimpleNamespace(run_backbone=recorder("run")),
        "ajet.export.dispatch": types.SimpleNamespace(export_checkpoint=recorder("export", result=3)),
        "ajet.eval.run": types.SimpleNamespace(run_eval=recorder("run_eval", result={"reward": 0.5})),
        "ajet.serving.app": types.SimpleNamespace(main=recorder("serve")),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return seen


def test_train_passes_the_loaded_config(conf: Path, calls: list) -> None:
    assert main(["--conf", str(conf), "--backbone", "swift", "trainer.steps=2"]) == 0
    (name, args, kwargs), = calls
    cfg = args[0]
    assert name == "run" and isinstance(cfg, AjetConfig)
    assert (cfg.trainer.steps, cfg.backbone.name, kwargs) == (2, "swift", {"resume": False})


@pytest.mark.parametrize(
    ("argv", "resume", "steps"),
    [
        (["--resume"], True, 50),
        (["--resume", "trainer.steps=4"], True, 4),  # a bare --resume followed by an override
        (["trainer.steps=4", "--resume", "ckpt/step-3"], "ABS", 4),
    ],
)
def test_train_resume(conf: Path, calls: list, tmp_path: Path, monkeypatch, argv, resume, steps) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--conf", str(conf), *argv]) == 0
    (_, args, kwargs), = calls
    expected = str(tmp_path / "ckpt" / "step-3") if resume == "ABS" else resume
    assert (kwargs["resume"], args[0].trainer.steps) == (expected, steps)


def test_cfg_runs_nothing(conf: Path, calls: list, capsys: pytest.CaptureFixture) -> None:
    assert main(["--conf", str(conf), "--cfg"]) == 0
    assert calls == []
    assert yaml.safe_load(capsys.readouterr().out)["ajet"]["project"] == "energy"


def test_eval_passes_model(conf: Path, calls: list) -> None:
    assert main(["eval", "--conf", str(conf), "--model", "tiny-random", "eval.limit=3"]) == 0
    (name, args, kwargs), = calls
    assert (name, args[0].eval.limit, kwargs) == ("run_eval", 3, {"model": "tiny-random"})


def test_serve_arguments(calls: list, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    assert main(["serve", "--model", "tiny-random", "--port", "8123"]) == 0
    assert calls == [("serve", (), {"model": "tiny-random", "host": "127.0.0.1", "port": 8123,
                                    "chat_template": None, "max_batch_size": 16, "device": "auto",
                                    "dtype": "auto", "served_model_name": None, "default_max_tokens": 512,
                                    "max_request_bytes": 4_000_000, "body_timeout_s": 30.0, "seed": 0,
                                    "log_level": "info", "enable_lora": False, "api_key": None})]
    calls.clear()
    assert main(["serve", "--model", "tiny-random", "--enable-lora"]) == 0
    assert calls[0][2]["enable_lora"] is True
    calls.clear()
    assert main(["serve", "--model", "m", "--max-batch-size", "4", "--max-tokens", "64", "--dtype", "bfloat16",
                 "--served-model-name", "x", "--body-timeout", "2.5"]) == 0
    kwargs = calls[0][2]
    assert (kwargs["max_batch_size"], kwargs["default_max_tokens"], kwargs["dtype"], kwargs["served_model_name"],
            kwargs["body_timeout_s"]) == (4, 64, "bfloat16", "x", 2.5)
    assert main(["serve", "--model", "m", "--max-tokens", "0"]) == 2  # refused before anything loads
    calls.clear()
    assert main(["serve", "--model", "m", "--api-key", "k1"]) == 0 and calls[0][2]["api_key"] == "k1"
    monkeypatch.setenv("VLLM_API_KEY", "k2")  # vLLM's variable, when no --api-key is given
    assert main(["serve", "--model", "m"]) == 0 and calls[1][2]["api_key"] == "k2"


def test_serve_has_one_command_line() -> None:
    """`ajet serve` is the only parser: ajet/serving/ holds none of its own."""
    for module in (Path(__file__).resolve().parents[2] / "ajet" / "serving").glob("*.py"):
        source = module.read_text()
        assert "argparse" not in source and "__main__" not in source, module


def test_export_arguments_and_exit_code(calls: list) -> None:
    # An implementation that returns an int sets the exit code.
    assert main(["export", "--checkpoint", "runs/x/step-2", "--out", "merged", "--merge"]) == 3
    assert calls == [("export", (), {"checkpoint": "runs/x/step-2", "out": "merged", "merge": True})]


def test_ajet_error_from_a_command_exits_2(monkeypatch, capsys: pytest.CaptureFixture) -> None:
    def fail(**kwargs):
        raise CheckpointError("checkpoint 'runs/x' is partial (no trainer_state.json); pick an earlier one")

    monkeypatch.setitem(sys.modules, "ajet.export.dispatch", types.SimpleNamespace(export_checkpoint=fail))
    assert main(["export", "--checkpoint", "runs/x", "--out", "o"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: checkpoint 'runs/x' is partial (no trainer_state.json); pick an earlier one"
    )


def test_ctrl_c_exits_130(conf: Path, monkeypatch, capsys: pytest.CaptureFixture) -> None:
    def interrupted(cfg, resume):
        raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "ajet.backbone.registry", types.SimpleNamespace(run_backbone=interrupted))
    assert main(["--conf", str(conf)]) == 130
    assert capsys.readouterr().err.strip() == "error: interrupted"
