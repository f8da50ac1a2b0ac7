"""GGUF export: files that load back with transformers' GGUF loader and answer like their source."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ajet.cli import main
from ajet.errors import CheckpointError
from ajet.export.gguf import export_gguf, load_gguf, load_gguf_model, verify_export
from ajet.export.gguf_writer import permute_qk, write_gguf
from ajet.tool_template import served_template
from tests.unit.test_export import TEMPLATE, lora_ckpt  # noqa: F401  (a trained LoRA checkpoint of tiny-random)


def test_permute_matches_llama_cpp_layout():
    # 2 heads of dimension 4, one input column: rows (h0: a0 a1 b0 b1)(h1: ...) interleave to (a0 b0 a1 b1)
    w = np.arange(8, dtype=np.float32).reshape(8, 1)
    assert permute_qk(w, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


@pytest.fixture(scope="module")
def tiny_f16(tiny_model_path, tmp_path_factory) -> Path:
    """tiny-random written once as f16: the f16 test reads it, the quantized ones compare sizes with it."""
    return write_gguf(tiny_model_path, tmp_path_factory.mktemp("gguf") / "tiny-f16.gguf", "f16")


def test_f16_holds_the_source_weights_rounded_to_float16_exactly(tiny_model_path, tiny_f16):
    exported, tokenizer = load_gguf(tiny_f16)
    source = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    got = exported.state_dict()
    for name, tensor in source.state_dict().items():
        if name == "lm_head.weight":  # tied to the embeddings, not stored twice
            continue
        assert torch.equal(got[name], tensor.half().float()), name
    ids = AutoTokenizer.from_pretrained(tiny_model_path)("Hello there, tools!")["input_ids"]
    assert tokenizer("Hello there, tools!")["input_ids"] == ids  # the vocabulary and merges round-trip


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_quantized_exports_load_and_stay_close(tiny_model_path, tiny_f16, tmp_path, kind):
    gguf_file = write_gguf(tiny_model_path, tmp_path / f"tiny-{kind}.gguf", kind)
    assert gguf_file.stat().st_size < tiny_f16.stat().st_size
    exported = load_gguf_model(gguf_file)  # the weights alone: the tokenizer round trip is the f16 test's
    source = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).state_dict()
    w = "model.layers.0.mlp.up_proj.weight"
    error = (exported.state_dict()[w] - source[w]).abs().max().item()
    scale = source[w].abs().max().item()
    assert 0 < error < (0.02 if kind == "q8_0" else 0.2) * scale


def test_export_of_a_lora_checkpoint_merges_measures_and_writes_a_card(lora_ckpt, tmp_path):  # noqa: F811
    _, ckpt, run = lora_ckpt
    (run / "config.yaml").write_text("ajet:\n  algorithm: [sft, grpo]\n  task_reader: {type: xlam, train: x.json}\n"
                                     "  trainer: {steps: 6, lr: 5.0e-05, seed: 0}\n  judge: {type: function_call}\n")
    (run / "metrics.jsonl").write_text(json.dumps({"step": 6, "reward_mean": 0.5}) + "\n")
    bfcl = tmp_path / "bfcl.json"
    bfcl.write_text(json.dumps({"benchmark": "bfcl", "mode": "fc", "bfcl_eval_version": "x", "model": "m",
                                "accuracy_mean": 0.25, "correct": 1, "total": 4,
                                "categories": {"simple_python": {"accuracy": 0.25, "correct": 1, "total": 4}}}))
    report = export_gguf(run, tmp_path / "out", "f16", max_new_tokens=8, card_evals=[bfcl])
    assert report["step"] == 2 and report["lora"] is True
    assert report["agreement"]["identical"] == report["agreement"]["prompts"] == 4  # f16: same greedy answers
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "export.json", report["gguf"]]
    card = (out / "README.md").read_text()
    for text in ("Base model: `tiny-random`", "checkpoint step 2 (LoRA merged", "train `x.json`",
                 "Algorithm: ['sft', 'grpo']; judge: function_call", "reward_mean 0.5",
                 "simple_python: 25.0% (1/4)", "4/4 identical"):
        assert text in card, text
    merged = AutoModelForCausalLM.from_pretrained(str(out), gguf_file=report["gguf"], dtype=torch.float32)
    served = AutoTokenizer.from_pretrained(str(out), gguf_file=report["gguf"]).chat_template
    assert served == served_template(TEMPLATE)  # tools render in any server as in training (ajet.tool_template)
    policy, _, _ = lora_ckpt
    ids = torch.tensor([[1, 504, 3458, 282, 4649]])
    with torch.no_grad():  # the file holds base + adapter, not the bare base
        want = policy.model(input_ids=ids).logits
        got = merged(input_ids=ids).logits
    assert torch.allclose(got, want, atol=0.05)


@pytest.mark.slow
def test_cli_gguf_and_verify(tiny_model_path, tmp_path, capsys):
    src = tmp_path / "tiny"
    shutil.copytree(tiny_model_path, src)
    assert main(["export", "--gguf", "q8_0", "--checkpoint", str(src), "--out", str(tmp_path / "g")]) == 0
    out = capsys.readouterr().out
    assert "greedy agreement q8_0:" in out and "prompts identical" in out
    assert main(["export", "--verify", str(tmp_path / "g")]) == 0
    assert "verified GGUF tiny-q8_0.gguf" in capsys.readouterr().out
    assert main(["export", "--gguf", "q8_0", "--checkpoint", str(src), "--out", str(tmp_path / "g")]) == 2
    assert "exists and is not empty" in capsys.readouterr().err


def test_refusals(tmp_path, tiny_model_path):
    folder = tmp_path / "gpt2ish"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(CheckpointError, match="GGUF export writes the Llama and Qwen architectures"):
        write_gguf(folder, tmp_path / "x.gguf", "f16")
    with pytest.raises(CheckpointError, match="--gguf must be one of f16, q8_0, q4_0"):
        export_gguf(tiny_model_path, tmp_path / "y", "q5_k")
    with pytest.raises(CheckpointError, match="holds neither a .gguf file nor a model folder"):
        verify_export(tmp_path)
    assert not (tmp_path / "y").exists()


def test_a_gguf_tokenizer_takes_the_files_own_eos(tiny_f16):
    # transformers 5.17's GGUF loader made SmolLM2's bos (<|im_start|>) its eos: every completion then ran
    # to max_tokens and no SFT row had a turn end to train. The file's own id decides instead.
    from ajet.models import gguf_special_token_ids, load_gguf_tokenizer, set_special_tokens

    ids = gguf_special_token_ids(tiny_f16)
    assert ids["eos"] == 2 and ids["pad"] == 2 and ids["unk"] == 0
    loaded = load_gguf_tokenizer(tiny_f16)
    assert loaded.eos_token == "<|im_end|>" and loaded.eos_token_id == 2
    plain = AutoTokenizer.from_pretrained(str(tiny_f16.parent), gguf_file=tiny_f16.name)  # ~15 s: 49k tokens
    assert loaded("Hello there, tools!")["input_ids"] == plain("Hello there, tools!")["input_ids"]  # nothing prepended
    plain.eos_token = "<|im_start|>"  # what the 5.17 loader gave
    set_special_tokens(plain, {"eos": ids["eos"]})
    assert plain.eos_token == "<|im_end|>" and plain.eos_token_id == 2
