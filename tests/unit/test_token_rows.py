"""Trained embedding and head rows for a few tokens beside LoRA (`model.lora.train_tokens`,
ajet/trainer/token_rows.py): which tokens `auto` picks, that the rows start as the base and then
change only those tokens, that training reaches them, and that checkpoints, peft, the merge of
`ajet export` and the engine all see the same rows."""

from __future__ import annotations

import asyncio

import pytest
import torch
from peft import LoraConfig as PeftLoraConfig
from peft import PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from ajet.config.schema import ModelConfig, TrainerConfig
from ajet.engine.base import SamplingParams
from ajet.engine.hf import HFEngine
from ajet.errors import CheckpointError, EngineError, ModelError
from ajet.trainer import token_rows
from ajet.trainer.checkpoint import load_checkpoint, save_checkpoint
from ajet.trainer.export import export_checkpoint
from ajet.trainer.logprobs import token_logprobs
from ajet.trainer.optim import build_optimizer
from ajet.trainer.policy import load_policy, train_token_ids

WORDS = [" hello", " world"]  # single tokens of SmolLM2's tokenizer (tiny-random's)


def policy_with_rows(words=WORDS, **lora):
    torch.manual_seed(0)
    cfg = ModelConfig(path="tiny-random", autocast="off")
    cfg.lora.train_tokens = list(words)
    for key, value in lora.items():
        setattr(cfg.lora, key, value)
    return load_policy(cfg)


def logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def word_ids(tokenizer) -> list[int]:
    return [tokenizer.encode(w, add_special_tokens=False)[0] for w in WORDS]


def test_auto_picks_the_tool_tags_a_tokenizer_holds_as_single_tokens(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    cfg = ModelConfig(path="tiny-random")
    assert train_token_ids(cfg, tokenizer) == []  # SmolLM2 spells <tool_call> in 5 pieces: nothing to train
    tokenizer.add_special_tokens({"additional_special_tokens": ["<tool_call>", "</tool_call>"]})
    tags = tokenizer.convert_tokens_to_ids(["<tool_call>", "</tool_call>"])
    assert train_token_ids(cfg, tokenizer) == tags
    cfg.lora.layers = 1  # the embedding sits below a frozen trunk: auto trains none
    assert train_token_ids(cfg, tokenizer) == []
    cfg.lora.train_tokens = []
    cfg.lora.layers = None
    assert train_token_ids(cfg, tokenizer) == []


def test_a_token_in_pieces_or_rows_below_a_frozen_trunk_are_refused(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    cfg = ModelConfig(path="tiny-random")
    cfg.lora.train_tokens = ["<tool_call>"]
    with pytest.raises(ModelError, match=r"'<tool_call>' is 5 tokens"):
        train_token_ids(cfg, tokenizer)
    cfg.lora.train_tokens = [" hello"]
    cfg.lora.layers = 1
    with pytest.raises(ModelError, match="frozen"):
        train_token_ids(cfg, tokenizer)


def test_rows_start_as_the_base_and_then_move_only_their_tokens():
    policy = policy_with_rows()
    rows = token_rows.rows_of(policy.model)
    ids = torch.tensor([[1, 504, *word_ids(policy.tokenizer), 3458, 282]])
    with policy.base_model_context() as base:
        before = logits(base, ids)
    assert torch.allclose(logits(policy.model, ids), before, atol=1e-5, rtol=0)
    with torch.no_grad():
        rows.head.add_(torch.randn_like(rows.head))
    after = logits(policy.model, ids)
    chosen = torch.zeros(after.shape[-1], dtype=torch.bool)
    chosen[rows.token_ids] = True
    # tiny-random ties its head to its embedding: the rows moved both, so every logit from the word on moves,
    # and before it only the chosen tokens' logits
    assert rows.tied and rows.head is rows.embed
    assert torch.equal(after[0, :2, ~chosen], before[0, :2, ~chosen])
    assert (after[0, :2, chosen] - before[0, :2, chosen]).abs().min() > 1e-3
    with policy.base_model_context() as base:  # the reference (KL, DPO) is still the base
        assert torch.equal(logits(base, ids), before)


def test_a_loss_on_a_chosen_token_trains_its_rows_and_they_take_no_weight_decay():
    policy = policy_with_rows()
    rows = token_rows.rows_of(policy.model)
    first, second = word_ids(policy.tokenizer)
    ids = torch.tensor([[1, 504, 3458, first, 282, second]])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1]])
    policy.model.train()
    (-token_logprobs(policy.model, ids, torch.ones_like(ids), mask).sum()).backward()
    assert rows.embed.grad is not None and (rows.embed.grad.abs().sum(dim=1) > 0).all()
    optimizer = build_optimizer(policy.trainable_parameters(), TrainerConfig(weight_decay=0.1))
    decay_free = {id(p) for g in optimizer.param_groups if g["weight_decay"] == 0.0 for p in g["params"]}
    assert id(rows.embed) in decay_free
    assert any(g["weight_decay"] == 0.1 and g["params"] for g in optimizer.param_groups)  # LoRA still decays


def untied_peft_model(seed: int, vocab_size: int = 96):
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    return Qwen2ForCausalLM(config).eval()


def test_peft_loads_the_rows_of_an_untied_model_from_ajet_entries(tmp_path):
    model = get_peft_model(untied_peft_model(1), PeftLoraConfig(r=2, target_modules="all-linear"))
    rows = token_rows.attach(model, [7, 3])
    assert not rows.tied and rows.head is not rows.embed
    with torch.no_grad():
        rows.embed.add_(torch.randn_like(rows.embed))
        rows.head.add_(torch.randn_like(rows.head))
    ids = torch.tensor([[1, 3, 5, 7, 9]])
    expected = logits(model, ids)
    tensors, indices = token_rows.peft_entries(model, rows)
    assert indices == {"embed_tokens": [3, 7], "lm_head": [3, 7]}
    # written as ajet's checkpoint writes it: peft's own files, then the rows added in peft's format
    model.save_pretrained(tmp_path)
    from ajet.trainer.checkpoint import _add_token_rows

    _add_token_rows(tmp_path, model, rows)
    loaded = PeftModel.from_pretrained(untied_peft_model(1), str(tmp_path))
    assert torch.allclose(logits(loaded, ids), expected, atol=1e-5, rtol=0)
    merged = PeftModel.from_pretrained(untied_peft_model(1), str(tmp_path)).merge_and_unload()
    assert torch.allclose(logits(merged, ids), expected, atol=1e-5, rtol=0)


def test_checkpoint_resume_and_merged_export_keep_the_rows(tmp_path):
    policy = policy_with_rows()
    rows = token_rows.rows_of(policy.model)
    with torch.no_grad():
        rows.embed.add_(torch.randn_like(rows.embed))
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.05)
    ids = torch.tensor([[1, 504, *word_ids(policy.tokenizer), 3458, 282]])
    expected = logits(policy.model, ids)
    ckpt = save_checkpoint(tmp_path / "run", 1, policy, None, None)

    resumed = policy_with_rows()
    assert not torch.allclose(logits(resumed.model, ids), expected, atol=1e-3)
    load_checkpoint(ckpt, resumed)
    assert torch.allclose(logits(resumed.model, ids), expected, atol=1e-5, rtol=0)

    merged = AutoModelForCausalLM.from_pretrained(export_checkpoint(ckpt, tmp_path / "merged", merge=True))
    assert torch.allclose(logits(merged, ids), expected, atol=1e-4, rtol=0)  # summed in another order

    plain = load_policy(ModelConfig(path="tiny-random", autocast="off"))  # no rows: the checkpoint does not fit
    with pytest.raises(CheckpointError, match="train_tokens"):
        load_checkpoint(ckpt, plain)
    other = policy_with_rows(words=[" hello"])
    with pytest.raises(CheckpointError, match="same tokens"):
        load_checkpoint(ckpt, other)


def greedy_by_hand(model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(logits(model, torch.tensor([ids]))[0, -1].argmax()))
    return ids[len(prompt):]


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("fast_paths", [True, False])
def test_the_engine_generates_from_the_trained_rows(fast_paths, tied, tiny_model_path):
    """Folded, cast and laid-out weights (the fast paths) or not, tied head or not, a step runs the rows."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    if tied:
        model = policy_with_rows().model
    else:  # Qwen2.5-Coder-0.5B's shape of head: its own weight (which the engine lays out), beside the embedding
        model = get_peft_model(untied_peft_model(2, vocab_size=len(tokenizer)),
                               PeftLoraConfig(r=2, target_modules="all-linear"))
        token_rows.attach(model, word_ids(tokenizer))
    rows = token_rows.rows_of(model)
    torch.manual_seed(5)
    with torch.no_grad():  # rows far from the base's: the chosen words take over the greedy continuation
        rows.embed.mul_(0).add_(torch.randn_like(rows.embed) * 3)
        rows.head.mul_(0).add_(torch.randn_like(rows.head) * 3)
    prompt = [1, 504, 3458, 282]
    expected = greedy_by_hand(model, prompt, 4)
    with token_rows.disabled(model):
        assert greedy_by_hand(model, prompt, 4) != expected
    assert set(expected) & set(rows.token_ids.tolist())
    engine = HFEngine(model, tokenizer, fold_lora=fast_paths, pack_weights=fast_paths, prefix_cache_mb=0)
    generated = asyncio.run(engine.generate(prompt, SamplingParams(max_tokens=4, temperature=0.0)))
    assert generated.token_ids == expected
    if fast_paths and not tied:  # the head really ran laid out: the rows did not depend on its weight
        assert engine.runner.step_weights._packs


def test_an_adapter_with_rows_is_refused_as_a_served_adapter_with_the_way_out(tmp_path, tiny_model_path):
    policy = policy_with_rows()
    ckpt = save_checkpoint(tmp_path / "run", 1, policy, None, None)
    engine = HFEngine(AutoModelForCausalLM.from_pretrained(tiny_model_path), policy.tokenizer)
    with pytest.raises(EngineError, match="export --merge"):
        engine.adapters.load("tuned", ckpt / "adapter")
