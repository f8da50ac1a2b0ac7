"""The llamafactory backbone without its environment: data conversion against hand-checked golden
files, the change/drop report, the compiled arguments and the errors for what it cannot do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ajet.backbone.llamafactory.args import OWNED, TUNABLE, check_config, dataset_info, stage_args
from ajet.backbone.llamafactory.convert import convert_file
from ajet.backbone.registry import run_backbone
from ajet.backbones import get
from ajet.config.backbones import LlamaFactoryConfig
from ajet.config.loader import load_config
from ajet.errors import ConfigError, TaskReaderError

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).with_name("data") / "llamafactory"
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


@pytest.mark.parametrize("kind", ["sft", "dpo"])
def test_conversion_matches_the_hand_checked_golden_file(kind: str) -> None:
    rows, report = convert_file(DATA / f"{kind}_input.jsonl", kind)
    expected = json.loads((DATA / f"{kind}_expected.json").read_text(encoding="utf-8"))
    assert rows == expected["rows"]
    got = report.to_dict()
    assert Path(got.pop("source")).name == expected["report"].pop("source")
    assert got == expected["report"]
    # every input row is accounted for: written unchanged, written changed, or dropped with a reason
    assert report.unchanged + report.rows_changed + report.rows_dropped == report.rows
    assert sum(report.dropped.values()) == report.rows_dropped


def test_report_text_names_counts_reasons_and_lines() -> None:
    _, report = convert_file(DATA / "sft_input.jsonl", "sft")
    lines = report.lines()
    assert lines[0].endswith("sft_input.jsonl: 12 rows -> 6 written (2 unchanged, 4 changed, 6 dropped)")
    assert ("  dropped 1x: a tool result with no tool call before it (e.g. sft_input.jsonl:8)") in lines
    assert ("  changed 1x: tool results of parallel calls merged into one observation (a JSON list) "
            "(e.g. sft_input.jsonl:2)") in lines


def test_openai_and_sharegpt_forms_of_the_tutorial_data_convert_alike() -> None:
    folder = ROOT / "tutorial" / "example_tool_agent"
    openai_rows, openai_report = convert_file(folder / "sft.jsonl", "sft")
    sharegpt_rows, _ = convert_file(folder / "sft_sharegpt.jsonl", "sft")
    assert openai_rows == sharegpt_rows and openai_report.unchanged == openai_report.rows == 74
    assert openai_rows[0]["system"].startswith("You are a natural gas expert")  # ShareGPT's system column kept


def test_a_file_with_nothing_trainable_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "q"},
                                            {"role": "assistant", "content": "a"}]}) + "\n")
    with pytest.raises(TaskReaderError, match=r"none of its 1 rows can be trained by LLaMA-Factory; .*starts with "
                                              r"an assistant turn"):
        convert_file(bad, "sft")


def _cfg(*overrides: str):
    return load_config(TOOL_YAML, ["model.path=tiny-random", "algorithm=sft", *overrides], backbone="llamafactory")


def test_stage_arguments_come_from_ajet_keys_and_args_add_the_rest(tmp_path: Path) -> None:
    cfg = _cfg("model.lora.rank=4", "trainer.save_every=3", "trainer.keep_last=2", "sft.lr=2e-4",
               "+backbone.llamafactory.args.max_steps=2")
    args = stage_args(cfg, "sft", model_path="/m", dataset_dir=tmp_path / "d", output_dir=tmp_path / "o",
                      adapter=None, cuda=False)
    assert args["stage"] == "sft" and args["finetuning_type"] == "lora" and args["lora_rank"] == 4
    assert args["lora_target"] == "all" and args["learning_rate"] == 2e-4 and args["save_steps"] == 3
    assert args["save_total_limit"] == 2 and args["use_cpu"] is True and args["bf16"] is False
    # 8 conversations per update as micro-batches of 4096 // 4096 = 1 conversation, accumulated
    assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"]) == (1, 8)
    assert args["num_train_epochs"] == 2.0  # the tutorial's sft.epochs
    assert args["tool_format"] == "qwen" and "template" not in args  # None: LLaMA-Factory parses the model's own
    assert args["max_steps"] == 2 and args["logging_steps"] == TUNABLE["logging_steps"]
    assert set(args) - set(TUNABLE) - {"max_steps", "per_device_train_batch_size", "gradient_accumulation_steps"} \
        <= set(OWNED)
    wide = _cfg("trainer.micro_batch_tokens=16384", "backbone.llamafactory.cutoff_len=2048", "sft.batch_size=6")
    args = stage_args(wide, "sft", model_path="/m", dataset_dir=tmp_path, output_dir=tmp_path / "o", adapter=None,
                      cuda=False)
    assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"]) == (6, 1)  # 8 fit, 6 asked
    odd = _cfg("trainer.micro_batch_tokens=12288", "backbone.llamafactory.cutoff_len=2048", "sft.batch_size=8")
    args = stage_args(odd, "sft", model_path="/m", dataset_dir=tmp_path, output_dir=tmp_path / "o", adapter=None,
                      cuda=False)
    assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"]) == (4, 2)  # 6 fit, 4 divides 8
    dpo = _cfg("algorithm=dpo", "dpo.data=x.jsonl", "model.lora.enabled=false")
    args = stage_args(dpo, "dpo", model_path="/m", dataset_dir=tmp_path, output_dir=tmp_path / "o",
                      adapter=tmp_path / "sft", cuda=True)
    assert args["model_name_or_path"] == str(tmp_path / "sft") and args["finetuning_type"] == "full"
    assert args["pref_beta"] == 0.1 and args["bf16"] is True and args["use_cpu"] is False
    assert dataset_info("dpo", "dpo.json")["ajet_dpo"]["ranking"] is True
    assert args["pref_loss"] == "sigmoid" and "simpo_gamma" not in args
    simpo = _cfg("algorithm=dpo", "dpo.data=x.jsonl", "dpo.loss_type=simpo", "dpo.beta=2.0", "dpo.simpo_gamma=1.0")
    args = stage_args(simpo, "dpo", model_path="/m", dataset_dir=tmp_path, output_dir=tmp_path / "o", adapter=None,
                      cuda=False)
    assert (args["pref_loss"], args["pref_beta"], args["simpo_gamma"]) == ("simpo", 2.0, 1.0)


@pytest.mark.parametrize(("overrides", "message"), [
    (["+backbone.llamafactory.args.lora_rank=4"],
     "ajet.backbone.llamafactory.args.lora_rank is set from ajet's model.lora.rank; set that instead"),
    (["algorithm=dpo"], "the llamafactory backbone trains DPO from a preference file: set dpo.data=pairs.jsonl"),
    (["trainer.eval_every=2"], "trainer.eval_every=2 is not supported by the llamafactory backbone"),
    (["model.lora.layers=8"], "model.lora.layers is applied by the debug backbone only"),
    (["model.lora.train_tokens=[x]"], "model.lora.train_tokens is applied by the debug backbone only"),
    (["algorithm=dpo", "dpo.data=x.jsonl", "dpo.reference_free=true"],
     "dpo.reference_free is not supported by the llamafactory backbone"),
    (["algorithm=dpo", "dpo.data=x.jsonl", "dpo.loss_type=simpo", "dpo.label_smoothing=0.1"],
     "dpo.label_smoothing with dpo.loss_type=simpo is not supported by the llamafactory backbone"),
    (["model.chat_template=x.jinja", "backbone.llamafactory.render=llamafactory"],
     "model.chat_template is not used with backbone.llamafactory.render=llamafactory"),
])
def test_what_the_backbone_cannot_do_is_refused_before_anything_runs(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_config(_cfg(*overrides))
    assert message in str(info.value)


def test_grpo_asked_of_llamafactory_names_the_backbones_that_train_it() -> None:
    cfg = load_config(TOOL_YAML, ["model.path=tiny-random"], backbone="llamafactory")  # the YAML asks sft, grpo
    with pytest.raises(ConfigError) as info:
        run_backbone(cfg)
    assert str(info.value) == ("invalid config: algorithm 'grpo' is not trained by the llamafactory backbone "
                               "(it trains sft, dpo); use --backbone=debug or --backbone=swift")


def test_ppo_asked_of_llamafactory_says_why_its_own_ppo_is_not_used() -> None:
    cfg = load_config(TOOL_YAML, ["model.path=tiny-random", "algorithm=ppo"], backbone="llamafactory")
    with pytest.raises(ConfigError, match=r"\(it trains sft, dpo\): LLaMA-Factory's PPO \(stage ppo\) scores "
                                          r"single-turn completions with a reward-model checkpoint, so it cannot run "
                                          r"your workflow and judge; use --backbone=debug$"):
        run_backbone(cfg)


def test_registry_record_and_conf_file_list_the_real_keys() -> None:
    backbone = get("llamafactory")
    assert backbone.algorithms == ("sft", "dpo") and backbone.setup and backbone.export
    assert backbone.run == "ajet.backbone.llamafactory.run:run"
    conf = yaml.safe_load((ROOT / "conf" / "backbone" / "llamafactory.yaml").read_text(encoding="utf-8"))
    assert conf["name"] == "llamafactory"
    assert conf["llamafactory"] == LlamaFactoryConfig().model_dump()


def test_setup_command_and_checkpoint_dispatch(tmp_path: Path, capsys) -> None:
    from ajet.backbones import checkpoint_owner
    from ajet.cli import main

    assert main(["setup", "debug"]) == 0
    assert "the debug backbone runs in this environment; nothing to set up" in capsys.readouterr().out
    assert checkpoint_owner(tmp_path) is None  # no marker: ajet's own checkpoint format
    (tmp_path / "ajet_checkpoint.json").write_text('{"backbone": "llamafactory", "latest": "checkpoints/sft"}')
    assert checkpoint_owner(tmp_path) == (get("llamafactory"), tmp_path / "checkpoints" / "sft")
    (tmp_path / "ajet_checkpoint.json").write_text('{"backbone": "nope"}')
    with pytest.raises(ConfigError, match="unknown backbone 'nope'"):
        checkpoint_owner(tmp_path)


def test_render_ajet_rows_are_the_gateways_tokens_with_the_loss_on_assistant_turns(tmp_path: Path) -> None:
    from ajet.backbone.llamafactory.tokens import IGNORE, token_rows
    from ajet.models import resolve_model_path
    from ajet.render import ChatRenderer
    from ajet.trainer.sft_data import load_sft_samples
    from transformers import AutoTokenizer

    model = resolve_model_path("tiny-random")
    cfg = _cfg()
    rows, report = token_rows(cfg, "sft", model)
    samples, _ = load_sft_samples(cfg.sft.data, ChatRenderer(AutoTokenizer.from_pretrained(model)))
    assert len(rows) == len(samples) == 74 and not report.skipped
    for row, sample in zip(rows, samples):
        assert row["input_ids"] == sample.input_ids and row["attention_mask"] == [1] * len(sample.input_ids)
        assert row["labels"] == [t if m else IGNORE for t, m in zip(sample.input_ids, sample.loss_mask)]
    tokenizer = AutoTokenizer.from_pretrained(model)
    text = tokenizer.decode(rows[0]["input_ids"])
    assert "<tool_response>" in text  # tool results as the gateway shows them, not as a user turn
    trained = tokenizer.decode([t for t in rows[0]["labels"] if t != IGNORE])
    assert "<tool_call>" in trained and "<tool_response>" not in trained

    short, report = token_rows(_cfg("backbone.llamafactory.cutoff_len=600"), "sft", model)
    assert len(short) + len(report.skipped) == 74 and report.skipped and "cutoff_len=600" in report.skipped[0]

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"prompt": "Say hi.", "chosen": "Hi!", "rejected": "No."}) + "\n")
    (row,), _ = token_rows(_cfg("algorithm=dpo", f"dpo.data={pairs}"), "dpo", model)
    for side, reply in (("chosen", "Hi!"), ("rejected", "No.")):
        labels = [t for t in row[f"{side}_labels"] if t != IGNORE]
        assert tokenizer.decode(labels).startswith(reply) and len(row[f"{side}_input_ids"]) == len(row[f"{side}_labels"])
