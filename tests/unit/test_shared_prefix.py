"""Running a prefix shared by every row once (the agent's system prompt, a GRPO group's prompt) gives
the same logprobs and the same gradients as running every row whole."""

from __future__ import annotations

import torch

from ajet.config.schema import LoraConfig, ModelConfig
from ajet.trainer.logprobs import full_token_logprobs, shared_prefix_length, token_logprobs
from ajet.trainer.policy import load_policy


def batch(prefix_len: int, tails: list[int]):
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(100, 40000, (prefix_len,), generator=gen)
    rows = [torch.cat([prefix, torch.randint(100, 40000, (n,), generator=gen)]) for n in tails]
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    attention = torch.zeros_like(ids)
    mask = torch.zeros(len(rows), width)
    for i, row in enumerate(rows):
        ids[i, : len(row)], attention[i, : len(row)] = row, 1
        mask[i, prefix_len - 10: len(row)] = 1  # trained tokens inside the shared prefix too
    return ids, attention, mask


def test_shared_prefix_length_by_hand():
    ids = torch.tensor([[5, 6, 7, 8, 0], [5, 6, 9, 1, 2]])
    assert shared_prefix_length(ids, torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])) == 2
    assert shared_prefix_length(ids[:1], torch.ones(1, 5)) == 0  # one row: nothing to share
    same = torch.tensor([[5, 6, 7, 0], [5, 6, 7, 8]])
    assert shared_prefix_length(same, torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])) == 3


def test_shared_prefix_gives_the_same_logprobs_and_gradients():
    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(rank=4)))
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    model = policy.model.train()
    ids, attention, mask = batch(100, [30, 50, 10])
    weights = torch.arange(ids.shape[1], dtype=torch.float32)  # a loss that weighs every position differently

    def run(min_shared_prefix: int):
        model.zero_grad()
        lp = token_logprobs(model, ids, attention, mask, min_shared_prefix=min_shared_prefix)
        (lp * weights).sum().backward()
        return lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}

    shared, shared_grads = run(64)
    plain, plain_grads = run(0)
    torch.testing.assert_close(shared, plain, rtol=0, atol=1e-5)
    torch.testing.assert_close(shared, full_token_logprobs(model, ids, attention, mask).detach(), rtol=0, atol=1e-5)
    for name, expected in plain_grads.items():  # equal up to float32 summation order
        scale = float(expected.abs().max())
        assert float((shared_grads[name] - expected).abs().max()) <= 1e-5 * scale + 1e-7, name
