"""Config loading through the real loader: Hydra composition of packaged defaults, a user YAML and
command-line overrides; pydantic validation; error messages (asserted exactly); relative paths;
the saved config; and the generated configuration reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ajet.config import walk
from ajet.config.groups import package_of, packaged_conf_dir
from ajet.config.loader import config_to_yaml, load_config, save_resolved_config
from ajet.config.reference import missing_descriptions, render
from ajet.config.schema import AjetConfig
from ajet.errors import ConfigError
from ajet.plugins import load_object

REPO = Path(__file__).resolve().parents[2]

BASE_YAML = """\
ajet:
  project: energy
  trainable_agents: [assistant]
  workflow: agent.py:EnergyAgent
  task_reader: {type: jsonl, train: train.jsonl}
  rollout: {group_size: 8, batch_tasks: 2}
  trainer: {steps: 50, lr: 1e-5}
"""

AGENT_PY = """\
from ajet import Workflow, WorkflowOutput


class EnergyAgent(Workflow):
    async def execute(self, task, tuner):
        return WorkflowOutput(answer="ok")
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    return write(tmp_path / "proj" / "my.yaml", BASE_YAML)


def dig(cfg: AjetConfig, dotted: str):
    node = cfg.model_dump()
    for part in dotted.split("."):
        node = node[part]
    return node


# ---------------------------------------------------------------- composition and overrides


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ([], {"rollout.group_size": 8, "trainer.steps": 50, "trainer.lr": 1e-5, "algorithm": "grpo"}),
        (["trainer.steps=3"], {"trainer.steps": 3, "trainer.lr": 1e-5}),
        (["ajet.trainer.steps=3"], {"trainer.steps": 3}),
        (["rollout.group_size=2", "ajet.rollout.group_size=5"], {"rollout.group_size": 5}),
        (["algorithm=[sft,grpo]", "sft.data=demo.jsonl"], {"algorithm": ["sft", "grpo"]}),
        (["ajet.algorithm=dpo"], {"algorithm": "dpo"}),
        (["+workflow_args.x=1", "+ajet.workflow_args.name=two"], {"workflow_args": {"x": 1, "name": "two"}}),
        (["~trainable_agents"], {"trainable_agents": None}),
        (["~ajet.rollout.group_size"], {"rollout.group_size": 4}),  # back to the model default
        (["model.lora.target_modules=[q_proj,v_proj]"], {"model.lora.target_modules": ["q_proj", "v_proj"]}),
        (["trainable_agents=[planner]"], {"trainable_agents": ["planner"]}),
        (["engine.model=${ajet.project}-v2"], {"engine.model": "energy-v2"}),
        (["tracker.merge=off", "engine.seed=7"], {"tracker.merge": "off", "engine.seed": 7}),
    ],
)
def test_overrides_compose_over_yaml(conf: Path, overrides: list[str], expected: dict) -> None:
    cfg = load_config(conf, overrides)
    assert {key: dig(cfg, key) for key in expected} == expected


def test_whole_section_equals_plain_dict(conf: Path) -> None:
    cfg = load_config(conf, ["rollout.concurrency=3", "ajet.rollout.temperature=0.7"])
    assert cfg.model_dump()["rollout"] == {
        "group_size": 8, "batch_tasks": 2, "concurrency": 3, "temperature": 0.7, "top_p": 1.0,
        "val_temperature": 0.0, "max_turns": 6, "max_tokens_per_turn": 256, "max_prompt_tokens": 4096,
        "episode_timeout_s": 120.0, "retries": 1, "task_weights": None,
    }


def test_unset_keys_take_the_model_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path / "m.yaml", "ajet: {workflow: pkg.mod:Agent}\n"), [])
    plain = AjetConfig(workflow="pkg.mod:Agent")
    assert cfg.model_dump(exclude={"output_dir"}) == plain.model_dump(exclude={"output_dir"})
    # The packaged output_dir interpolates the project and the start time.
    assert re.fullmatch(r"runs/ajet/\d{8}-\d{6}", cfg.output_dir), cfg.output_dir


def test_output_dir_interpolation_follows_project(conf: Path) -> None:
    cfg = load_config(conf, ["project=gas"])
    assert re.fullmatch(r"runs/gas/\d{8}-\d{6}", cfg.output_dir), cfg.output_dir


def test_no_yaml_only_overrides() -> None:
    cfg = load_config(None, ["workflow=pkg.mod:Agent", "trainer.steps=1"])
    assert (cfg.workflow, cfg.trainer.steps, cfg.source_file) == ("pkg.mod:Agent", 1, None)
    assert cfg.base_dir == Path.cwd()


@pytest.mark.parametrize(
    ("yaml_backbone", "arg", "overrides", "expected"),
    [
        (None, None, [], "debug"),
        (None, "swift", [], "swift"),
        ("llamafactory", None, [], "llamafactory"),
        ("llamafactory", "swift", [], "swift"),  # --backbone beats the YAML
        (None, None, ["backbone=llamafactory"], "llamafactory"),  # the group, like --backbone
    ],
)
def test_backbone_choice(tmp_path: Path, yaml_backbone, arg, overrides, expected) -> None:
    text = "ajet:\n  workflow: m:A\n" + (f"  backbone: {{name: {yaml_backbone}}}\n" if yaml_backbone else "")
    cfg = load_config(write(tmp_path / "b.yaml", text), overrides, backbone=arg)
    assert cfg.backbone.name == expected


def test_load_keeps_an_outer_hydra_initialisation(conf: Path, tmp_path: Path) -> None:
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"):
        outer = GlobalHydra.instance().hydra
        load_config(conf, [])
        assert GlobalHydra.instance().hydra is outer
    assert not GlobalHydra.instance().is_initialized()


# ---------------------------------------------------------------- errors, asserted exactly


def error_of(conf: Path | None, overrides: list[str], backbone: str | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(conf, overrides, backbone=backbone)
    return str(info.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["rollout.group_size=abc"],
         "invalid config: ajet.rollout.group_size = 'abc' (from the command line): "
         "expected a valid integer, unable to parse string as an integer"),
        (["ajet.rollout.group_sise=3"],
         "invalid config: ajet.rollout.group_sise (from the command line): unknown key; did you mean 'group_size'?"),
        (["+rollout.group_sise=3"],
         "invalid config: ajet.rollout.group_sise (from the command line): unknown key; did you mean 'group_size'?"),
        (["trainer.stepz=3"],
         "invalid config: ajet.trainer.stepz (from the command line): unknown key; did you mean 'steps'?"),
        (["rollout.group_size.x=1"],
         "invalid config: ajet.rollout.group_size.x (from the command line): unknown key; this value takes no keys"),
        (["tracker.merge=tokens"],
         "invalid config: ajet.tracker.merge = 'tokens' (from the command line): expected 'token', 'text' or 'off'"),
        (["algorithm=a2c"],
         "invalid config: ajet.algorithm = 'a2c' (from the command line): "
         "expected 'grpo', 'sft', 'dpo' or 'ppo'; or a valid list"),
        (["algorithm=[grpo,a2c]"],
         "invalid config: ajet.algorithm.1 = 'a2c' (from the command line): expected 'grpo', 'sft', 'dpo' or 'ppo'"),
        (["model.lora.target_modules=5"],
         "invalid config: ajet.model.lora.target_modules = 5 (from the command line): "
         "expected a valid list; or 'all-linear'"),
        (["rollout=5"],
         "invalid config: ajet.rollout = 5 (from the command line): "
         "expected a valid dictionary or instance of RolloutConfig"),
        (["engine.type=remote"],
         "invalid config: ajet: engine.type is 'remote' but engine.base_url is not set"),
        (["~workflow"],
         "invalid config: ajet.workflow: required but not set; add it to the YAML or pass workflow=... "
         "on the command line"),
        (["workflow_args.x=1"],
         "invalid config: Could not override 'ajet.workflow_args.x'. To append to your config use "
         "+ajet.workflow_args.x=1 (from the command line)"),
        (["trainer.steps==3"],
         "bad command-line override 'trainer.steps==3': extraneous input '='; overrides look like key=value, "
         "+key=value (add a key), ~key (delete a key), key=[a,b] (a list)"),
        (["output_dir=${ajet.projekt}"],
         "invalid config: ajet.output_dir (from the command line): cannot resolve the interpolation: "
         "Interpolation key 'ajet.projekt' not found"),
        (["rollout.temperature=1e-9"],
         "invalid config: ajet.rollout.temperature = 1e-09 (from the command line): 1e-09 is too small to sample "
         "with; use 0 for greedy decoding or a value >= 1e-05"),
        (["backbone=swfit"],
         "unknown backbone 'swfit' (from the command line); expected one of: debug, llamafactory, swift; "
         "did you mean 'swift'?"),
    ],
)
def test_command_line_errors(conf: Path, overrides: list[str], message: str) -> None:
    assert error_of(conf, overrides) == message


def test_bad_values_in_yaml_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "ajet:\n  workflow: m:A\n  rollout: {group_sise: 3, group_size: 0}\n")
    assert error_of(path, []) == (
        "invalid config (2 errors):\n"
        f"  - ajet.rollout.group_size = 0 (from {path}): expected greater than or equal to 1\n"
        f"  - ajet.rollout.group_sise = 3 (from {path}): unknown key; did you mean 'group_size'?"
    )


def test_unknown_key_in_yaml_vs_command_line(tmp_path: Path) -> None:
    path = write(tmp_path / "u.yaml", "ajet:\n  workflow: m:A\n  judge: {typ: exact_match}\n")
    assert error_of(path, []) == (
        f"invalid config: ajet.judge.typ = 'exact_match' (from {path}): unknown key; did you mean 'type'?"
    )
    # The same key given on the command line names the command line.
    clean = write(tmp_path / "c.yaml", "ajet:\n  workflow: m:A\n")
    assert error_of(clean, ["judge.typ=x"]) == (
        "invalid config: ajet.judge.typ (from the command line): unknown key; did you mean 'type'?"
    )


def test_command_line_value_wins_and_is_blamed(tmp_path: Path) -> None:
    path = write(tmp_path / "v.yaml", "ajet:\n  workflow: m:A\n  rollout: {group_size: 0}\n")
    assert error_of(path, ["rollout.group_size=-1"]) == (
        "invalid config: ajet.rollout.group_size = -1 (from the command line): expected greater than or equal to 1"
    )


def test_agent_sections_are_checked(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", "ajet:\n  workflow: m:A\n  agents:\n    critic: {model: {base_url: http://x, modle: m}}\n")
    assert error_of(path, []) == (
        "invalid config (2 errors):\n"
        "  - ajet.agents.critic.model.model: required but not set; add it to the YAML or pass "
        "agents.critic.model.model=... on the command line\n"
        f"  - ajet.agents.critic.model.modle = 'm' (from {path}): unknown key; did you mean 'model'?"
    )


def test_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert error_of(Path("nope.yaml"), []) == f"config file 'nope.yaml' does not exist (current directory: {tmp_path})"
    assert error_of(tmp_path, []) == f"config path {str(tmp_path)!r} is not a file; pass the YAML file itself to --conf"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ajet:\n  rollout: {group_size: 3\n",
         "YAML syntax error at line 3, column 1: expected ',' or '}', but got '<stream end>' "
         "(while parsing a flow mapping at line 2, column 12); fix the YAML and run again"),
        ("ajet:\n  project: a\n  project: b\n",
         "YAML syntax error at line 3, column 3: found duplicate key project "
         "(while constructing a mapping at line 2, column 3); fix the YAML and run again"),
        ("- ajet\n", "the file must be a mapping with one top-level key 'ajet:'; found a list"),
        ("ajte: {workflow: m:A}\n", "unknown top-level key 'ajte'; did you mean 'ajet'?"),
        ("workflow: m:A\n", "unknown top-level key 'workflow'; settings live under 'ajet:'; move it to ajet.workflow"),
        ("hydra: {searchpath: [pkg://x]}\najet: {workflow: m:A}\n",
         "unknown top-level key 'hydra'; a user YAML holds an 'ajet:' section and optionally a 'defaults:' "
         "list of presets; ajet finds its packaged config and your conf/ folder itself, so remove the Hydra "
         "boilerplate"),
        ("defaults: {judge: x}\najet: {workflow: m:A}\n",
         "'defaults:' must be a list of `- group: option` entries, e.g. `- judge: function_call`; got "
         "{'judge': 'x'}"),
        ("ajet: 5\n", "'ajet:' must be a mapping of settings, got 5"),
    ],
)
def test_bad_yaml_files(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "f.yaml", text)
    assert error_of(path, []) == f"{path}: {message}"


def test_interpolation_error_in_yaml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "i.yaml", "ajet:\n  workflow: m:A\n  project: ${oc.env:AJET_TEST_UNSET_VARIABLE}\n")
    assert error_of(path, []) == (
        f"invalid config: ajet.project (from {path}): cannot resolve the interpolation: "
        "Environment variable 'AJET_TEST_UNSET_VARIABLE' not found"
    )


# ---------------------------------------------------------------- relative paths


def test_relative_paths_resolve_against_the_yaml_from_any_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = tmp_path / "proj"
    write(proj / "agent.py", AGENT_PY)
    (proj / "local_ds").mkdir()
    write(proj / "my.yaml", """\
ajet:
  workflow: agent.py:EnergyAgent
  model: {path: tiny-random, chat_template: "{% for m in messages %}{{ m.content }}{% endfor %}"}
  task_reader: {type: huggingface, path: local_ds, train: train, val: data/val.jsonl, function: pkg.mod:fn}
  judge: {type: judges/mine.py:MyJudge}
  sft: {data: ../shared/sft.jsonl}
""")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(Path("../proj/my.yaml"), ["engine.replay_file=rec/episodes.jsonl", "dpo.data=/abs/pairs.jsonl"])
    assert cfg.workflow == f"{proj}/agent.py:EnergyAgent"
    assert cfg.task_reader.path == str(proj / "local_ds")         # exists there: a path
    assert cfg.task_reader.train == "train"                        # a split name: unchanged
    assert cfg.task_reader.val == str(proj / "data" / "val.jsonl")  # file suffix: a path, even if missing
    assert cfg.task_reader.function == "pkg.mod:fn"                # module reference: unchanged
    assert cfg.judge.type == f"{proj}/judges/mine.py:MyJudge"
    assert cfg.sft.data == str(tmp_path / "shared" / "sft.jsonl")
    assert cfg.model.path == "tiny-random"
    assert cfg.model.chat_template == "{% for m in messages %}{{ m.content }}{% endfor %}"
    assert cfg.engine.replay_file == str(elsewhere / "rec" / "episodes.jsonl")  # command line: the cwd
    assert cfg.dpo.data == "/abs/pairs.jsonl"
    assert (cfg.base_dir, cfg.source_file) == (proj, proj / "my.yaml")
    # The resolved reference loads from here, though the file is in another folder.
    assert load_object(cfg.workflow, cfg.base_dir).__name__ == "EnergyAgent"


def test_command_line_workflow_resolves_against_cwd(conf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config(conf, ["workflow=other/agent.py:Agent"])
    assert cfg.workflow == f"{tmp_path}/other/agent.py:Agent"


# ---------------------------------------------------------------- the saved config


def test_saved_config_reloads_to_the_same_config(conf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A literal '${' (escaped in the YAML) must stay literal when the saved file is read again.
    conf.write_text(BASE_YAML + "  workflow_args: {note: 'cost \\${x}'}\n")
    cfg = load_config(conf, ["algorithm=[sft,grpo]", "sft.data=demo.jsonl",
                             "+agents.critic.model={base_url: 'http://127.0.0.1:9/v1', model: judge}"])
    assert cfg.workflow_args == {"note": "cost ${x}"}
    saved = save_resolved_config(cfg, tmp_path / "runs" / "r1")
    assert saved == tmp_path / "runs" / "r1" / "config.yaml"
    assert saved.read_text() == config_to_yaml(cfg)
    monkeypatch.chdir(tmp_path / "runs")
    again = load_config(saved, [])
    assert again.model_dump() == cfg.model_dump()
    assert again.source_file == saved


def test_config_to_yaml_is_plain_yaml(conf: Path) -> None:
    text = config_to_yaml(load_config(conf, []))
    data = OmegaConf.to_container(OmegaConf.create(text))
    assert list(data) == ["ajet"]
    assert data["ajet"]["rollout"]["group_size"] == 8
    assert data["ajet"]["trainer"]["lr"] == 1e-5


# ---------------------------------------------------------------- packaged files and the reference


def test_every_field_has_a_description() -> None:
    assert missing_descriptions() == []


def test_reference_doc_is_up_to_date() -> None:
    doc = REPO / "docs" / "configuration.md"
    assert doc.read_text() == render(), "regenerate: python -m ajet.config.reference > docs/configuration.md"


def test_reference_lists_every_key_path() -> None:
    text = render()
    for path, _field, _section in walk.iter_fields(walk.RootConfig, ""):
        if path != "ajet":
            assert f"| `{path}` |" in text, path
    assert '| `ajet.output_dir` | str | `"runs/${ajet.project}/${now:%Y%m%d-%H%M%S}"` |' in text


def test_packaged_yaml_has_no_dead_keys() -> None:
    root = packaged_conf_dir()
    files = sorted(root.rglob("*.yaml"))
    assert {f.parent.name for f in files if f.parent != root} == {
        "backbone", "judge", "model", "task_reader", "workflow"}
    for f in files:
        text = f.read_text()
        data = OmegaConf.to_container(OmegaConf.load(f)) or {}
        assert "defaults" not in data, f  # the loader builds the defaults list
        package = re.search(r"^# @package (\S+)", text, re.M)
        if f.parent != root:  # a preset says where it lands, as the loader mounts it
            assert package is not None and package.group(1) == package_of(f.parent.name), f
        prefix = tuple(package.group(1).split(".")) if package else ()
        for key in _leaf_keys(data):
            assert walk.unknown_key(prefix + key) is None, (f, key)


def test_backbone_presets_list_their_keys_with_the_schemas_defaults() -> None:
    defaults = walk.schema_defaults(walk.RootConfig)["ajet"]["backbone"]
    for f in sorted((packaged_conf_dir() / "backbone").glob("*.yaml")):
        data = OmegaConf.to_container(OmegaConf.load(f))
        assert data.pop("name") == f.stem
        for section, values in data.items():
            assert values == defaults[section], (f, section)


def _leaf_keys(node, prefix=()):
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from _leaf_keys(value, (*prefix, key))
        else:
            yield (*prefix, key)


def test_every_config_field_is_read_by_some_code() -> None:
    """A key nobody reads is a lie in the docs: each field name must appear in ajet's code outside the
    line that declares it (as an attribute or a string key)."""
    code = "\n".join(p.read_text() for p in (REPO / "ajet").rglob("*.py"))
    code = re.sub(r"(?m)^\s+\w+: [^\n]*= Field\(.*$", "", code)  # the declarations themselves
    unread = []
    for path, _field, _section in walk.iter_fields(walk.RootConfig, ""):
        name = path.rsplit(".", 1)[-1]
        if name not in ("ajet", "<name>") and not re.search(rf"\.{name}\b|[\"']{name}[\"']", code):
            unread.append(path)
    assert unread == []


def test_label_smoothing_with_ipo_is_refused_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="label_smoothing applies to loss_type sigmoid and simpo, not ipo"):
        load_config(REPO / "tutorial" / "example_tool_agent" / "tool_agent.yaml",
                    ["dpo.loss_type=ipo", "dpo.label_smoothing=0.1"])
