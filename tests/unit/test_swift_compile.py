"""The swift backbone's compilation of a config into swift command lines and datasets (no swift needed).

Golden files (tests/golden/swift/*.json, reviewed by hand) hold the compiled command line and the
first dataset rows of each algorithm for the tool-agent tutorial; regenerate them after a deliberate
change with `AJET_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_swift_compile.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from ajet.backbone.envs import ajet_path_entry
from ajet.backbone.swift import args as swift_args
from ajet.backbone.swift import data as swift_data
from ajet.backbone.swift.run import SwiftRun
from ajet.config.backbones import SwiftConfig
from ajet.config.loader import load_config
from ajet.errors import CheckpointError, ConfigError
from ajet.models import resolve_model_path

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "swift"
TUTORIAL = REPO / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


def _cfg(tmp_path: Path, *overrides: str):
    return load_config(TUTORIAL, [f"output_dir={tmp_path / 'run'}", "model.path=tiny-random", *overrides],
                       backbone="swift")


def _normalise(value, tmp_path: Path):
    text = json.dumps(value, indent=1, ensure_ascii=False)
    for real, alias in ((str(tmp_path), "<tmp>"), (resolve_model_path("tiny-random"), "<tiny-random>"),
                        (str(REPO), "<repo>")):
        text = text.replace(real, alias)
    return json.loads(text)


def _check_golden(name: str, value, tmp_path: Path) -> None:
    value = _normalise(value, tmp_path)
    path = GOLDEN / name
    if os.environ.get("AJET_UPDATE_GOLDEN"):
        path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert value == json.loads(path.read_text(encoding="utf-8")), f"{name} changed; review and update the golden"


@pytest.mark.parametrize("stage", ["sft", "grpo", "dpo"])
def test_compiled_stage_matches_golden(tmp_path: Path, stage: str) -> None:
    cfg = _cfg(tmp_path, f"algorithm={stage}", f"dpo.data={GOLDEN / 'preferences.jsonl'}", "rollout.batch_tasks=2",
               "rollout.group_size=2", "trainer.steps=2", "sft.batch_size=2")
    start = tmp_path / "run" / "swift" / "sft" / "output" / "checkpoint-9" if stage != "sft" else None
    plan, dataset = SwiftRun(cfg).plan(stage, start)
    compiled = {"command": plan.command, "args": plan.args, "steps": plan.steps,
                "rows": len(dataset.rows), "first_rows": dataset.rows[:2], "skipped": dataset.skipped}
    _check_golden(f"{stage}.json", compiled, tmp_path)
    assert plan.argv()[:2] == ["--model", resolve_model_path("tiny-random")]
    plugin = (plan.stage_dir / "ajet_plugin.py").read_text()
    assert ("install(" in plugin) == (stage == "grpo")


def test_grpo_plugin_spec_carries_the_resolved_config(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "algorithm=grpo", "trainer.updates_per_step=2", "rollout.batch_tasks=2")
    plan, _ = SwiftRun(cfg).plan("grpo", None)
    spec = json.loads((plan.stage_dir / "ajet_run.json").read_text())
    assert spec["config"]["workflow"] == "ajet.workflows.mcp_agent:McpAgent"
    assert spec["updates_per_step"] == 2 and spec["run_dir"] == str((tmp_path / "run").resolve())
    # 2 tasks x 4 episodes = 8 per RL step, 2 updates: 4 episodes per device per update
    assert plan.args["per_device_train_batch_size"] == 4 and plan.args["steps_per_generation"] == 2
    assert plan.args["max_steps"] == cfg.trainer.steps * 2


def test_dpo_rows_train_only_the_response(tmp_path: Path) -> None:
    dataset = swift_data.preference_dataset(GOLDEN / "preferences.jsonl", tmp_path / "dpo.jsonl")
    assert len(dataset.rows) == 3 and dataset.source_lines == [1, 2, 3]
    assert dataset.skipped == [f"{GOLDEN / 'preferences.jsonl'}:4: preference row has no 'chosen'"]
    second = dataset.rows[1]
    prompt_turn = [m for m in second["messages"] if m["role"] == "tool_call"][0]
    assert prompt_turn["loss"] is False  # the assistant call inside the prompt is context, not response
    assert second["messages"][-1] == {"role": "assistant", "content": "Natural gas in Denver costs 2.9 USD per MMBtu."}
    assert second["rejected_messages"][-1] == {"role": "assistant", "content": "I do not know."}


def test_sft_rows_skip_what_ajet_cannot_read_and_name_the_line(tmp_path: Path) -> None:
    source = tmp_path / "sft.jsonl"
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    source.write_text("\n".join(json.dumps(r) for r in [
        good,
        {"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"},
                      {"role": "assistant", "content": "y"}]},
        {"messages": [{"role": "user", "content": "no answer"}]},
        {"conversations": [{"from": "human", "value": "q"}, {"from": "function_call",
                                                             "value": '{"name": "f", "arguments": {"a": 1}}'},
                           {"from": "observation", "value": "3"}, {"from": "gpt", "value": "it is 3"}]},
    ]) + "\n")
    dataset = swift_data.sft_dataset(source, tmp_path / "out.jsonl")
    assert dataset.source_lines == [1, 4]
    assert dataset.skipped == [f"{source}:2: messages[1].role is 'robot'; expected one of "
                               "['assistant', 'developer', 'system', 'tool', 'user']",
                               f"{source}:3: conversation has no assistant turn to train on"]
    assert dataset.rows[1]["messages"] == [
        {"role": "user", "content": "q"}, {"role": "tool_call", "content": '{"name": "f", "arguments": {"a": 1}}'},
        {"role": "tool_response", "content": "3"}, {"role": "assistant", "content": "it is 3"}]
    source.write_text(json.dumps({"messages": [{"role": "user", "content": "only"}]}) + "\n")
    with pytest.raises(Exception, match=r"no usable rows"):
        swift_data.sft_dataset(source, tmp_path / "out.jsonl")


def test_passthrough_args_per_stage_and_refused_when_ajet_owns_the_key(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "algorithm=[sft,grpo]", "+backbone.swift.args.gradient_checkpointing=false",
               "+backbone.swift.args.grpo.log_completions=true")
    run = SwiftRun(cfg)
    sft, _ = run.plan("sft", None)
    grpo, _ = run.plan("grpo", None)
    assert sft.args["gradient_checkpointing"] is False and "log_completions" not in sft.args
    assert grpo.args["log_completions"] is True and "--log_completions" in grpo.argv()
    with pytest.raises(ConfigError, match=r"backbone.swift.args.learning_rate is set by ajet from ajet.trainer.lr; "
                                          r"set that key instead"):
        SwiftRun(_cfg(tmp_path / "b", "+backbone.swift.args.learning_rate=1"))


def test_unsupported_settings_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"trains DPO from a preference file: set ajet.dpo.data"):
        SwiftRun(_cfg(tmp_path / "a", "algorithm=dpo"))
    with pytest.raises(ConfigError, match=r"trainer.eval_every is not supported by the swift backbone"):
        SwiftRun(_cfg(tmp_path / "b", "trainer.eval_every=2"))
    with pytest.raises(ConfigError, match=r"model.lora.layers is applied by the debug backbone only"):
        SwiftRun(_cfg(tmp_path / "b2", "model.lora.layers=8"))
    with pytest.raises(ConfigError, match=r"model.lora.train_tokens is applied by the debug backbone only"):
        SwiftRun(_cfg(tmp_path / "b3", "model.lora.train_tokens=[x]"))
    with pytest.raises(ConfigError, match=r"8 episodes per step must split evenly into "
                                          r"trainer.updates_per_step=3 updates"):
        SwiftRun(_cfg(tmp_path / "c", "algorithm=grpo", "rollout.batch_tasks=2",
                      "trainer.updates_per_step=3")).plan("grpo", None)
    with pytest.raises(ConfigError, match=r"sft.batch_size=8 is not a multiple of backbone.swift.micro_batch_size"):
        SwiftRun(_cfg(tmp_path / "d", "algorithm=sft", "backbone.swift.micro_batch_size=3")).plan("sft", None)
    with pytest.raises(ConfigError, match=r"node_rank=2 must be below nnodes=2"):
        _cfg(tmp_path / "e", "backbone.swift.nnodes=2", "backbone.swift.node_rank=2")
    with pytest.raises(ConfigError, match=r"grpo.dynamic_sampling_rounds, grpo.turn_reward_weight are applied by the "
                                          r"debug backbone only"):
        SwiftRun(_cfg(tmp_path / "f", "grpo.dynamic_sampling_rounds=2", "grpo.turn_reward_weight=1"))


def test_ppo_is_refused_with_the_reason() -> None:
    from ajet.backbones import get

    cfg = load_config(TUTORIAL, ["model.path=tiny-random", "algorithm=[sft,ppo]"], backbone="swift")
    with pytest.raises(ConfigError) as info:
        get("swift").check(cfg)
    assert str(info.value) == (
        "invalid config: algorithm 'ppo' is not trained by the swift backbone (it trains sft, grpo, dpo): swift's "
        "own PPO (`swift rlhf --rlhf_type ppo`, TRL's PPOTrainer) scores single-turn completions with a "
        "reward-model checkpoint, so it cannot run your workflow and judge; use --backbone=debug")


def test_a_run_folder_is_not_reused_without_resume(tmp_path: Path) -> None:
    SwiftRun(_cfg(tmp_path))
    with pytest.raises(CheckpointError, match=r"already holds a swift run; add --resume"):
        SwiftRun(_cfg(tmp_path))
    with pytest.raises(CheckpointError, match=r"nothing to resume in .* it has no ajet_checkpoint.json"):
        SwiftRun(_cfg(tmp_path / "new"), resume=True)


def test_launch_environment(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "model.device=cpu", "backbone.swift.nproc_per_node=2", "backbone.swift.nnodes=2",
               "backbone.swift.node_rank=1", "backbone.swift.master_addr=10.0.0.1")
    env = SwiftRun(cfg).env
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert (env["NPROC_PER_NODE"], env["NNODES"], env["NODE_RANK"], env["MASTER_ADDR"]) == ("2", "2", "1", "10.0.0.1")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ajet_path_entry())  # this very ajet inside swift
    assert swift_args.world_size(cfg) == 4


def test_conf_file_lists_the_pydantic_defaults() -> None:
    listed = yaml.safe_load((REPO / "conf" / "backbone" / "swift.yaml").read_text())
    assert listed["name"] == "swift"
    assert listed["swift"] == SwiftConfig().model_dump()


@pytest.mark.parametrize(("overrides", "flags"), [
    ([], {"rlhf_type": "dpo"}),
    (["dpo.loss_type=ipo"], {"rlhf_type": "dpo", "loss_type": ["ipo"]}),
    (["dpo.reference_free=true"], {"rlhf_type": "dpo", "reference_free": True}),
    (["dpo.loss_type=simpo", "dpo.beta=2.0", "dpo.simpo_gamma=1.0"],
     {"rlhf_type": "simpo", "simpo_gamma": 1.0, "cpo_alpha": 0.0, "beta": 2.0}),
])
def test_dpo_loss_variants_compile_to_swifts_flags(tmp_path: Path, overrides: list[str], flags: dict) -> None:
    cfg = _cfg(tmp_path, "algorithm=dpo", f"dpo.data={GOLDEN / 'preferences.jsonl'}", *overrides)
    plan, _ = SwiftRun(cfg).plan("dpo", None)
    assert {k: plan.args.get(k) for k in flags} == flags
    assert ("loss_type" in plan.args) == ("loss_type" in flags)  # sigmoid: swift's own default, no flag


@pytest.mark.parametrize("name", ["smollm2-135m-instruct", "smollm2-135m"])
def test_the_embedded_model_is_a_llama_to_swift_under_either_of_its_names(tmp_path: Path, name: str) -> None:
    # swift cannot tell SmolLM2's type from its config; the preset name must not lose it
    cfg = _cfg(tmp_path, f"model.path={name}")
    assert swift_args.model_args(cfg, None)["model_type"] == "llama"
