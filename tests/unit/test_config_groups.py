"""Config groups through the real loader: presets picked on the command line or in a YAML
`defaults:` list, a user's own conf/ folder, error texts, and the packaged tree inside a wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ajet.config import walk
from ajet.config.groups import packaged_conf_dir
from ajet.config.loader import load_config
from ajet.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
MATH = REPO / "tutorial" / "example_math_agent" / "math_agent.yaml"
TUTORIALS = sorted(REPO.glob("tutorial/*/*.yaml"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_command_line_pick_replaces_the_yamls_judge() -> None:
    assert load_config(MATH).judge.type == "math_boxed"
    cfg = load_config(MATH, ["judge=function_call"])
    assert cfg.judge.model_dump() == {"type": "function_call", "args": {"expected_key": "calls"},
                                      "success_threshold": 1.0, "reward": "total"}


def test_judger_is_an_alias_of_judge() -> None:
    assert load_config(MATH, ["judger=exact_match"]).judge.type == "exact_match"


@pytest.mark.parametrize("conf", TUTORIALS, ids=lambda p: p.parent.name)
def test_model_tiny_random_works_on_every_tutorial(conf: Path) -> None:
    cfg = load_config(conf, ["model=tiny-random", "model.lora.rank=4"])
    assert (cfg.model.path, cfg.model.lora.rank) == ("tiny-random", 4)


def test_model_pick_merges_into_the_yamls_model(tmp_path: Path) -> None:
    conf = write(tmp_path / "my.yaml", "ajet:\n  workflow: x.py:A\n  model: {path: smollm2-135m-instruct, lora: {rank: 8}}\n")
    cfg = load_config(conf, ["model=qwen3-0.6b"])
    assert (cfg.model.path, cfg.model.lora.rank, cfg.model.lora.alpha) == ("Qwen/Qwen3-0.6B", 32, 64)
    cfg = load_config(conf, ["model=tiny-random"])
    assert (cfg.model.path, cfg.model.lora.rank) == ("tiny-random", 8)  # the preset sets only the path


def test_defaults_list_in_the_yaml_sits_beneath_its_own_keys(tmp_path: Path) -> None:
    conf = write(tmp_path / "my.yaml", """\
defaults:
  - judge: function_call
  - model: tiny-random
  - workflow: chat
ajet:
  judge:
    args: {expected_key: expected}
  workflow_args: {system_prompt: Be brief.}
""")
    cfg = load_config(conf)
    assert (cfg.judge.type, cfg.judge.args) == ("function_call", {"expected_key": "expected"})
    assert cfg.model.path == "tiny-random"
    assert cfg.workflow == "ajet.workflows.chat:ChatWorkflow"
    assert cfg.workflow_args == {"system_prompt": "Be brief.", "tools_key": "tools"}
    # The command line still wins over both.
    assert load_config(conf, ["judge=exact_match"]).judge.args == {"mode": "equals", "ignore_case": True}


def test_workflow_value_that_names_no_preset_is_a_plugin_reference(tmp_path: Path) -> None:
    conf = write(tmp_path / "my.yaml", "ajet:\n  workflow: agent.py:A\n")
    assert load_config(conf, ["workflow=other.py:B"]).workflow == str(Path.cwd() / "other.py") + ":B"
    cfg = load_config(conf, ["workflow=chat"])
    assert cfg.workflow == "ajet.workflows.chat:ChatWorkflow" and cfg.workflow_args["tools_key"] == "tools"


def test_users_own_conf_folder_adds_and_shadows_presets(tmp_path: Path) -> None:
    conf = write(tmp_path / "proj" / "my.yaml", "defaults:\n  - judge: strict\najet:\n  workflow: agent.py:A\n")
    write(tmp_path / "proj" / "conf" / "judge" / "strict.yaml",
          "type: exact_match\nargs: {mode: equals, ignore_case: false}\nsuccess_threshold: 1.0\n")
    write(tmp_path / "proj" / "conf" / "judge" / "math_boxed.yaml", "type: math_boxed\nargs: {rel_tol: 0.5}\n")
    write(tmp_path / "proj" / "conf" / "rollout" / "fast.yaml", "group_size: 2\nmax_turns: 1\n")
    assert load_config(conf).judge.args == {"mode": "equals", "ignore_case": False}
    assert load_config(conf, ["judge=math_boxed"]).judge.args == {"rel_tol": 0.5}  # shadows the packaged one
    cfg = load_config(conf, ["rollout=fast"])
    assert (cfg.rollout.group_size, cfg.rollout.max_turns, cfg.rollout.concurrency) == (2, 1, 16)


def test_unknown_preset_names_the_presets_there_are() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(MATH, ["judge=function_cal"])
    assert str(info.value) == (
        f"invalid config: judge=function_cal (from the command line): no preset named 'function_cal' in "
        f"{packaged_conf_dir() / 'judge'}; did you mean 'function_call'? presets: agent, exact_match, function_call, "
        "llm_judge, math_boxed, tool_agent; to set a value instead, use judge.type=function_cal")


def test_bad_defaults_entry(tmp_path: Path) -> None:
    conf = write(tmp_path / "my.yaml", "defaults:\n  - judge\najet: {workflow: a.py:A}\n")
    with pytest.raises(ConfigError, match=r"defaults entry 'judge' is not `group: option`"):
        load_config(conf)
    conf = write(tmp_path / "my.yaml", "defaults:\n  - trainer_x: fast\najet: {workflow: a.py:A}\n")
    with pytest.raises(ConfigError, match=r"picks a preset of 'trainer_x', which is not a config group"):
        load_config(conf)


def test_a_bad_value_in_a_preset_is_reported_with_the_preset(tmp_path: Path) -> None:
    conf = write(tmp_path / "proj" / "my.yaml", "ajet:\n  workflow: agent.py:A\n")
    write(tmp_path / "proj" / "conf" / "rollout" / "bad.yaml", "group_size: many\n")
    with pytest.raises(ConfigError) as info:
        load_config(conf, ["rollout=bad"])
    bad = tmp_path / "proj" / "conf" / "rollout" / "bad.yaml"
    assert str(info.value) == (f"invalid config: ajet.rollout.group_size = 'many' (from the preset {bad}): "
                               "expected a valid integer, unable to parse string as an integer")


def test_backbone_pick_and_unknown_backbone(tmp_path: Path) -> None:
    assert load_config(MATH, ["backbone=swift"]).backbone.name == "swift"
    assert load_config(MATH, backbone="llamafactory").backbone.name == "llamafactory"
    with pytest.raises(ConfigError, match=r"unknown backbone 'swfit' \(from the command line\); expected one of: "
                                          r"debug, llamafactory, swift; did you mean 'swift'\?"):
        load_config(MATH, ["backbone=swfit"])
    conf = write(tmp_path / "my.yaml", "ajet:\n  workflow: a.py:A\n  backbone: {name: verl}\n")
    with pytest.raises(ConfigError, match=rf"unknown backbone 'verl' \(from {conf}\); expected one of"):
        load_config(conf)


PRESETS = sorted(p.relative_to(packaged_conf_dir()) for p in packaged_conf_dir().glob("*/*.yaml"))


@pytest.mark.parametrize("preset", PRESETS, ids=str)
def test_every_packaged_preset_composes_into_a_valid_config(tmp_path: Path, preset: Path) -> None:
    conf = write(tmp_path / "my.yaml", "ajet:\n  workflow: a.py:A\n")
    group, option = preset.parent.name, preset.stem
    extra = ["judge.args.base_url=http://127.0.0.1:9/v1", "judge.args.model=m"] if option == "llm_judge" else []
    cfg = load_config(conf, [f"{group}={option}", *extra])
    data = OmegaConf.to_container(OmegaConf.load(packaged_conf_dir() / preset))
    package = ("workflow",) if group == "workflow" else (group,)
    for key in _leaf_keys(data):  # every key the preset sets exists and arrived as written
        path = key if group == "workflow" else (*package, *key)
        assert walk.unknown_key(("ajet", *path)) is None, path
        value = cfg.model_dump()
        for part in path:
            value = value[part]
        expected = data
        for part in key:
            expected = expected[part]
        if isinstance(expected, dict):  # args: the '???' values were given on the command line above
            value = {k: v for k, v in value.items() if expected.get(k) != "???"}
            expected = {k: v for k, v in expected.items() if v != "???"}
        assert value == expected, path


def _leaf_keys(node, prefix=()):
    for key, value in node.items():
        if isinstance(value, dict) and value and key not in ("args", "workflow_args", "kwargs"):
            yield from _leaf_keys(value, (*prefix, key))
        else:
            yield (*prefix, key)


def test_the_wheel_ships_the_config_tree(tmp_path: Path) -> None:
    # A copy: setuptools would leave build/ in the repository, and a stale build/ can leak into wheels.
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", "build", "runs", "*.egg-info", "__pycache__",
                                                               ".venv*", "tutorial", "tests", "docs", "benchmarks"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist")], check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("ajet-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    tree = {f"ajet/conf/{p.relative_to(REPO / 'conf').as_posix()}" for p in (REPO / "conf").rglob("*.yaml")}
    assert tree and tree <= names
    assert not any(n.startswith("conf/") for n in names)
    # Installed from the wheel (not editable), the loader finds the tree inside the package.
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(tmp_path / "site"),
                    str(wheel)], check=True, capture_output=True)
    probe = ("from ajet.config.groups import packaged_conf_dir; from ajet.config.loader import load_config; "
             f"print(packaged_conf_dir()); print(load_config({str(MATH)!r}, ['judge=tool_agent']).judge.type)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(tmp_path / "site" / "ajet" / "conf"), "composite"]
