"""GGUF export of the Qwen family (qwen2: Q/K/V biases; qwen3: Q/K norms and a head size of its own) on
tiny random models built here, and on the packaged Qwen2.5-Coder-0.5B when it is installed."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, Qwen3Config

from ajet.errors import CheckpointError
from ajet.export.gguf import export_gguf, load_gguf
from ajet.export.gguf_writer import write_gguf


_CORPUS = ["What is the capital of France? Paris.", "Write one sentence about the ocean.", "List three colors: red, green, blue.",
           "What is 12 plus 7? 19.", "Hello there, tools! The gas price in Boston is 3.1 USD per MMBtu."] * 4


@pytest.fixture(scope="module")
def small_tokenizer(tmp_path_factory, tiny_model_path):
    """A byte-level BPE of ~330 tokens with SmolLM2's special tokens and chat template: a GGUF with a
    49,152-token vocabulary takes most of a minute to read back, this one a moment."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(_CORPUS, trainers.BpeTrainer(
        vocab_size=330, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    tokenizer.chat_template = AutoTokenizer.from_pretrained(tiny_model_path).chat_template
    folder = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(folder)
    return str(folder)


def tiny_qwen(folder, tokenizer_path, family: str) -> str:
    """A 2-layer random Qwen2 or Qwen3, its weights rounded to float16 so that an f16 file holds them
    exactly (the source and the file then compute the same logits)."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    shape = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                 tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    # Qwen3's heads are wider than hidden / heads; transformers' GGUF loader reads no head size for
    # qwen3 and takes its config's default, 128, so the tiny model has that width.
    config = Qwen2Config(**shape) if family == "qwen2" else Qwen3Config(**shape, head_dim=128)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:  # give biases and norm weights values of their own
                p.copy_(torch.randn_like(p) * 0.1 + (1.0 if "norm" in name else 0.0))
            p.copy_(p.half().float())
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_f16_holds_the_weights_exactly_and_answers_alike(family, small_tokenizer, tmp_path):
    source_dir = tiny_qwen(tmp_path / family, small_tokenizer, family)
    report = export_gguf(source_dir, tmp_path / "out", "f16", max_new_tokens=8)
    exported, tokenizer = load_gguf(tmp_path / "out" / report["gguf"])
    assert type(exported.config).__name__ == ("Qwen2Config" if family == "qwen2" else "Qwen3Config")
    source = AutoModelForCausalLM.from_pretrained(source_dir, dtype=torch.float32).state_dict()
    got = exported.state_dict()
    special = [n for n in source if n.endswith("bias") or "q_norm" in n or "k_norm" in n]
    assert special, "the family's own tensors are in the source"
    for name, tensor in source.items():
        if name != "lm_head.weight":  # tied to the embeddings, not stored twice
            assert torch.equal(got[name], tensor), name
    ids = torch.tensor([[1, 50, 34, 28, 200, 301]])
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(source_dir, dtype=torch.float32)(input_ids=ids).logits
        assert torch.equal(exported(input_ids=ids).logits, want)
    agreement = report["agreement"]
    assert agreement["identical"] == agreement["prompts"] == 4 and agreement["token_agreement"] == 1.0
    assert tokenizer("Hello there, tools!")["input_ids"] == \
        AutoTokenizer.from_pretrained(source_dir)("Hello there, tools!")["input_ids"]  # vocabulary and merges round-trip


def test_q8_0_of_a_qwen2_stays_close(small_tokenizer, tmp_path):
    source_dir = tiny_qwen(tmp_path / "q", small_tokenizer, "qwen2")
    exported, _ = load_gguf(write_gguf(source_dir, tmp_path / "q8.gguf", "q8_0"))
    source = AutoModelForCausalLM.from_pretrained(source_dir, dtype=torch.float32).state_dict()
    w = "model.layers.1.self_attn.q_proj.weight"
    error = (exported.state_dict()[w] - source[w]).abs().max().item()
    assert 0 < error < 0.02 * source[w].abs().max().item()
    bias = "model.layers.1.self_attn.q_proj.bias"
    assert torch.equal(exported.state_dict()[bias], source[bias])  # 1-D tensors stay float32


def test_scaled_rotary_embeddings_are_refused(small_tokenizer, tmp_path):
    folder = tiny_qwen(tmp_path / "q", small_tokenizer, "qwen2")
    config = json.loads((tmp_path / "q" / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}
    (tmp_path / "q" / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"scales its rotary embeddings \(yarn\)"):
        write_gguf(folder, tmp_path / "x.gguf", "f16")
