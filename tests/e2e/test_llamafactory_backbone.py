"""The llamafactory backbone for real: LLaMA-Factory 0.9.5 in its managed environment (built on first
use, ~1.5 GB, reused after), the tiny model on CPU. SFT then DPO, 2 steps each, on the golden
conversion files (so LLaMA-Factory itself accepts every converted row); checkpoints load, `ajet eval
--model` runs on them, export (adapter and merged) loads; bad input fails with a clear message."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ajet.backbone.registry import run_backbone
from ajet.cli import main
from ajet.config.loader import load_config
from ajet.errors import BackboneError

pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[2]
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
DATA = ROOT / "tests" / "unit" / "data" / "llamafactory"
FAST = ["model.path=tiny-random", f"sft.data={DATA / 'sft_input.jsonl'}", f"dpo.data={DATA / 'dpo_input.jsonl'}",
        "sft.batch_size=2", "dpo.batch_size=2", "+backbone.llamafactory.args.max_steps=2",
        "backbone.llamafactory.cutoff_len=512"]


def lf_config(run_dir: Path, *overrides: str):
    return load_config(TOOL_YAML, [*FAST, f"output_dir={run_dir}", *overrides], backbone="llamafactory")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("lf") / "run"
    # sft.neftune_alpha: LLaMA-Factory's own parser must take neftune_noise_alpha
    result = run_backbone(lf_config(run_dir, "algorithm=[sft,dpo]", "trainer.save_every=1", "sft.neftune_alpha=5"))
    assert result["run_dir"] == str(run_dir) and result["steps"] == 4
    return run_dir


def test_sft_then_dpo_train_two_steps_each_and_record_metrics(trained: Path) -> None:
    rows = [json.loads(line) for line in (trained / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["stage"]) for r in rows] == [(1, "sft"), (2, "sft"), (3, "dpo"), (4, "dpo")]
    assert all(r["loss"] > 0 and r["grad_norm"] >= 0 and r["lr"] > 0 for r in rows)
    assert all("reward_margin" in r and "reward_accuracy" in r for r in rows[2:])
    assert "neftune_noise_alpha: 5.0" in (trained / "llamafactory" / "sft.yaml").read_text()
    # render=ajet (the default): LLaMA-Factory trained on the ids ajet rendered, not its own template's
    for stage in ("sft", "dpo"):
        assert "Loaded tokenized dataset from" in (trained / "llamafactory" / f"{stage}.log").read_text()
        assert (trained / "llamafactory" / "data" / f"{stage}.tokenized").is_dir()
    # LLaMA-Factory trained on from the SFT adapter, and both stages changed it
    sft = load_file(trained / "checkpoints" / "sft" / "adapter_model.safetensors")
    dpo = load_file(trained / "checkpoints" / "dpo" / "adapter_model.safetensors")
    lora_b = [k for k in sft if "lora_B" in k]
    assert lora_b and any(sft[k].abs().sum() > 0 for k in lora_b)  # B starts at zero
    assert any(not torch.equal(sft[k], dpo[k]) for k in sft)


def test_simpo_runs_on_llamafactorys_own_simpo_loss(tmp_path: Path) -> None:
    run_backbone(lf_config(tmp_path / "run", "algorithm=dpo", "dpo.loss_type=simpo", "dpo.beta=2.0",
                           "dpo.simpo_gamma=1.0", "backbone.llamafactory.args.max_steps=1"))
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["stage"]) for r in rows] == [(1, "dpo")] and rows[0]["loss"] > 0
    launched = (tmp_path / "run" / "llamafactory" / "dpo.yaml").read_text()  # what llamafactory-cli was given
    assert "pref_loss: simpo" in launched and "simpo_gamma: 1.0" in launched and "pref_beta: 2.0" in launched


def test_render_llamafactory_trains_on_the_converted_sharegpt_data(tmp_path: Path) -> None:
    run_backbone(lf_config(tmp_path / "run", "algorithm=sft", "backbone.llamafactory.render=llamafactory",
                           "backbone.llamafactory.args.max_steps=1"))
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["stage"]) for r in rows] == [(1, "sft")] and rows[0]["loss"] > 0
    assert "Loaded tokenized dataset" not in (tmp_path / "run" / "llamafactory" / "sft.log").read_text()
    report = json.loads((tmp_path / "run" / "llamafactory" / "sft.conversion.json").read_text())
    assert (report["rows"], report["written"], report["rows_dropped"]) == (12, 6, 6)


def test_checkpoints_carry_markers_that_ajet_dispatches_on(trained: Path) -> None:
    assert json.loads((trained / "ajet_checkpoint.json").read_text()) == {"backbone": "llamafactory",
                                                                          "latest": "checkpoints/dpo"}
    final = json.loads((trained / "checkpoints" / "dpo" / "ajet_checkpoint.json").read_text())
    assert final["final"] and final["stage"] == "dpo" and final["step"] == 2 and final["finetuning_type"] == "lora"
    for step in (1, 2):
        marker = json.loads((trained / "checkpoints" / "sft" / f"checkpoint-{step}" / "ajet_checkpoint.json").read_text())
        assert marker["step"] == step and not marker["final"]


def test_ajet_eval_runs_on_the_run_folder(trained: Path, tmp_path: Path) -> None:
    code = main(["eval", "--conf", str(TOOL_YAML), "--model", str(trained), "eval.limit=2",
                 "rollout.max_tokens_per_turn=8", "rollout.max_turns=1", f"output_dir={tmp_path}"])
    assert code == 0
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["episodes"] == 2 and report["model"] == str(tmp_path / "model-llamafactory-dpo")
    assert (tmp_path / "model-llamafactory-dpo" / "config.json").is_file()


def test_export_adapter_and_merge_load_and_agree(trained: Path, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    assert main(["export", "--checkpoint", str(trained / "checkpoints" / "sft"), "--out", str(tmp_path / "a")]) == 0
    assert main(["export", "--checkpoint", str(trained / "checkpoints" / "sft"), "--out", str(tmp_path / "m"),
                 "--merge"]) == 0
    adapter_cfg = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    base = AutoModelForCausalLM.from_pretrained(adapter_cfg["base_model_name_or_path"], dtype=torch.float32)
    with_adapter = PeftModel.from_pretrained(base, str(tmp_path / "a")).eval()
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "m"), dtype=torch.float32).eval()
    ids = torch.tensor([[1, 400, 2000, 31, 7]])
    with torch.no_grad():
        torch.testing.assert_close(merged(ids).logits, with_adapter(ids).logits, rtol=1e-4, atol=1e-4)
    assert (tmp_path / "m" / "tokenizer.json").is_file()


def test_a_key_llamafactory_rejects_is_named_with_its_own_message(tmp_path: Path, capsys) -> None:
    code = main(["--conf", str(TOOL_YAML), "--backbone=llamafactory", *FAST, "algorithm=sft",
                 "+backbone.llamafactory.args.lora_rnk=4", f"output_dir={tmp_path}"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1  # BackboneError: the config was valid for ajet, the backend refused it
    assert "LLaMA-Factory rejected the sft arguments" in err
    assert "Some keys are not used by the HfArgumentParser: ['lora_rnk']" in err
    assert "'lora_rnk': did you mean 'lora_rank'?" in err
    assert (tmp_path / "llamafactory" / "sft.yaml").is_file()  # the run folder is kept


def test_a_dying_llamafactory_fails_the_run_with_its_last_lines(tmp_path: Path) -> None:
    cfg = lf_config(tmp_path, "algorithm=sft", "backbone.llamafactory.template=no_such_template")
    with pytest.raises(BackboneError) as info:
        run_backbone(cfg)
    message = str(info.value)
    assert "llamafactory-cli train (sft) failed (exit 1)" in message
    assert "Template no_such_template does not exist." in message
    assert (tmp_path / "llamafactory" / "sft.log").is_file()


def test_a_broken_environment_is_named(tmp_path: Path) -> None:
    with pytest.raises(BackboneError, match=r"ajet.backbone.llamafactory.python='/no/such/python' does not exist"):
        run_backbone(lf_config(tmp_path / "a", "algorithm=sft", "backbone.llamafactory.python=/no/such/python"))
    with pytest.raises(BackboneError, match=r"(?s)cannot run the llamafactory backbone: .*No module named 'llamafactory'"):
        run_backbone(lf_config(tmp_path / "b", "algorithm=sft", f"backbone.llamafactory.python={sys.executable}"))
