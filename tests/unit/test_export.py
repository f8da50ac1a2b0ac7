"""Exporting checkpoints: the adapter alone, a merged HF model, full weights."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ajet.config.schema import LoraConfig, ModelConfig, TrainerConfig
from ajet.errors import CheckpointError
from ajet.trainer.checkpoint import save_checkpoint
from ajet.trainer.export import export_checkpoint
from ajet.trainer.optim import build_optimizer
from ajet.trainer.policy import Policy, load_policy

TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"


def trained_lora_policy() -> Policy:
    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path="tiny-random"))
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():  # stand-in for training: non-zero B matrices, so the adapter changes outputs
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    policy.chat_template = TEMPLATE
    return policy


def logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


IDS = torch.tensor([[1, 504, 3458, 282, 4649, 314, 216, 30, 2]])


@pytest.fixture(scope="module")
def lora_ckpt(tmp_path_factory):
    policy = trained_lora_policy()
    run = tmp_path_factory.mktemp("run")
    opt = build_optimizer(policy.model.parameters(), TrainerConfig())
    path = save_checkpoint(run, 2, policy, opt, None)
    return policy, path, run


def test_merged_export_loads_and_matches_base_plus_adapter(lora_ckpt, tiny_model_path, tmp_path):
    policy, ckpt, _ = lora_ckpt
    out = export_checkpoint(ckpt, tmp_path / "merged", merge=True)
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
            "chat_template.jinja"} <= names
    assert not any(n.startswith("adapter") for n in names)
    merged = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    expected = logits(policy.model, IDS)
    assert torch.allclose(logits(merged, IDS), expected, atol=1e-5, rtol=0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    assert not torch.allclose(logits(base, IDS), expected, atol=1e-3)  # the adapter did change the model
    tok = AutoTokenizer.from_pretrained(out)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert text == "<user>hi"
    assert json.loads((out / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]


def test_adapter_export_loads_with_peft(lora_ckpt, tiny_model_path, tmp_path):
    from peft import PeftModel

    policy, _, run = lora_ckpt
    out = export_checkpoint(run, tmp_path / "adapter")  # a run folder: its latest checkpoint
    names = {p.name for p in out.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "chat_template.jinja"} <= names
    assert "model.safetensors" not in names
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == policy.model_path
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    loaded = PeftModel.from_pretrained(base, str(out))
    assert torch.allclose(logits(loaded, IDS), logits(policy.model, IDS), atol=1e-6)


def test_export_refuses_non_empty_target_and_partial_checkpoint(lora_ckpt, tmp_path):
    _, ckpt, _ = lora_ckpt
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    with pytest.raises(CheckpointError, match="not empty"):
        export_checkpoint(ckpt, tmp_path / "taken")
    with pytest.raises(CheckpointError, match="dtype"):
        export_checkpoint(ckpt, tmp_path / "x", merge=True, dtype="int8")
    with pytest.raises(CheckpointError, match="nothing to resume"):
        export_checkpoint(tmp_path, tmp_path / "y")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # no temp folders left behind


def test_full_finetune_export_in_bf16(tmp_path):
    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(enabled=False)))
    with torch.no_grad():
        policy.model.model.layers[0].mlp.up_proj.weight.add_(0.01)
    ckpt = save_checkpoint(tmp_path / "run", 1, policy, None, None)
    out = export_checkpoint(ckpt, tmp_path / "full")
    loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert torch.equal(logits(loaded, IDS), logits(policy.model, IDS))
    half = export_checkpoint(ckpt, tmp_path / "bf16", dtype="bfloat16")
    assert json.loads((half / "config.json").read_text())["dtype"] == "bfloat16"
    assert (half / "tokenizer.json").is_file()
