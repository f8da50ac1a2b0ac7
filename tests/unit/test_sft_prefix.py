"""SFT on agent data runs the prefix its rows share (system prompt + tools) once per micro-batch, and
packs micro-batches counting that prefix once; the loss and the update equal the plain path."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

import ajet.trainer.step as step_module
from ajet.config.schema import LoraConfig, ModelConfig, TrainerConfig
from ajet.render import ChatRenderer
from ajet.samples import Sample
from ajet.trainer.batching import pack_micro_batches
from ajet.trainer.logprobs import shared_prefix_length, token_logprobs
from ajet.trainer.policy import load_policy
from ajet.trainer.sft_data import load_sft_samples

DATA = Path(__file__).resolve().parents[2] / "tutorial" / "example_tool_agent" / "sft.jsonl"


def tutorial_rows(tokenizer, n: int) -> list[Sample]:
    samples, _ = load_sft_samples(DATA, ChatRenderer(tokenizer))
    return samples[:n]


def test_tutorial_sft_batch_shares_its_prefix_in_one_micro_batch(tiny_tokenizer):
    rows = tutorial_rows(tiny_tokenizer, 8)
    plain = pack_micro_batches(rows, 4096, shared_prefix=0)
    packed = pack_micro_batches(rows, 4096)
    assert len(plain.micro_batches) == 2 and len(packed.micro_batches) == 1  # ~620 tokens a row
    mb = packed.micro_batches[0]
    shared = shared_prefix_length(mb.input_ids, mb.attention_mask)
    assert shared > 400  # the system prompt and eight tool signatures
    width = mb.input_ids.shape[1]
    assert shared + mb.rows * (width - shared) <= 4096 < mb.padded_tokens
    assert sorted(mb.indices) == list(range(8)) and packed.trained_tokens == plain.trained_tokens


def test_prefix_is_counted_once_only_when_it_runs_once():
    prefix = list(range(100, 200))  # 100 shared tokens
    rows = [Sample(prefix + [7, 8 + i, 9], [0] * 101 + [1, 1], [0.0] * 103, 0.0, "g", "a") for i in range(4)]
    assert len(pack_micro_batches(rows, 120).micro_batches) == 1  # 100 + 4 x 3 = 112
    assert len(pack_micro_batches(rows, 120, shared_prefix=0).micro_batches) == 4  # 103 each
    assert len(pack_micro_batches(rows, 120, shared_prefix=102).micro_batches) == 4  # 101 shared < 102
    same = [rows[0]] * 4  # identical rows run whole (nothing left after the prefix): counted whole
    assert len(pack_micro_batches(same, 250).micro_batches) == 2
    short = [Sample(list(range(50)) + [i], [0] * 50 + [1], [0.0] * 51, 0.0, "g", "a") for i in range(3)]
    assert len(pack_micro_batches(short, 100).micro_batches) == 3  # 50 shared < 64: not counted once


def test_sft_step_with_the_shared_prefix_equals_the_plain_step(tiny_tokenizer):
    """The same SFT step three ways (plain; prefix run once; prefix run once and counted once in
    packing): equal loss and equal update, in float32."""
    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(rank=4)), autocast=None)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    start = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
    rows = tutorial_rows(tiny_tokenizer, 6)
    cfg = TrainerConfig(micro_batch_tokens=4096, grad_clip=1e9)

    def step(pack_prefix: int, run_prefix: int):
        with torch.no_grad():
            for n, p in policy.model.named_parameters():
                if n in start:
                    p.copy_(start[n])
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=1.0)  # update = -gradient
        step_module.pack_micro_batches = functools.partial(pack_micro_batches, shared_prefix=pack_prefix)
        step_module.token_logprobs = functools.partial(token_logprobs, min_shared_prefix=run_prefix)
        try:
            stats = step_module.train_step(policy, optimizer, None, rows, None, cfg, algo="sft")
        finally:
            step_module.pack_micro_batches, step_module.token_logprobs = pack_micro_batches, token_logprobs
        return stats, {n: p.detach() - start[n] for n, p in policy.model.named_parameters() if n in start}

    plain, plain_update = step(0, 0)
    for pack_prefix in (0, 64):
        stats, update = step(pack_prefix, 64)
        assert stats["micro_batches"] == (2 if pack_prefix == 0 else 1) and plain["micro_batches"] == 2
        assert abs(stats["loss"] - plain["loss"]) <= 1e-5 * abs(plain["loss"])
        for name, expected in plain_update.items():
            scale = float(expected.abs().max())
            assert scale > 0, name
            assert float((update[name] - expected).abs().max()) <= 1e-4 * scale + 1e-7, name
