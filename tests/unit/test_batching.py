"""Packing samples into token-budget micro-batches."""

from __future__ import annotations

import pytest
import torch

from ajet.samples import Sample
from ajet.trainer.batching import pack_micro_batches, split_mini_batches


def sample(n: int, trained: int, start_id: int = 10) -> Sample:
    """n tokens, the last `trained` of them trained, old logprob -0.5 there."""
    ids = list(range(start_id, start_id + n))
    mask = [0] * (n - trained) + [1] * trained
    return Sample(ids, mask, [-0.5 * m for m in mask], 0.0, "g", "a")


def test_budget_sorting_and_padding():
    # lengths 3, 8, 5, 7 with budget 16: sorted 8, 7, 5, 3 -> [8, 7] is 2 x 8 = 16 (fits), adding 5 -> 3 x 8 = 24
    # (no) -> [5, 3] is 2 x 5 = 10 (fits)
    samples = [sample(3, 1), sample(8, 2), sample(5, 2), sample(7, 3)]
    plan = pack_micro_batches(samples, 16, advantages=[0.1, 0.2, 0.3, 0.4], pad_token_id=0)
    assert [mb.indices for mb in plan.micro_batches] == [[1, 3], [2, 0]]
    assert all(mb.padded_tokens <= 16 for mb in plan.micro_batches)
    first, second = plan.micro_batches
    assert first.input_ids.shape == (2, 8) and second.input_ids.shape == (2, 5)
    # right padding: row 1 of the first batch is sample 3 (7 tokens) + one pad
    assert first.input_ids[1].tolist() == [10, 11, 12, 13, 14, 15, 16, 0]
    assert first.attention_mask[1].tolist() == [1, 1, 1, 1, 1, 1, 1, 0]
    assert first.loss_mask[1].tolist() == [0, 0, 0, 0, 1, 1, 1, 0]
    assert first.old_logprobs[1].tolist() == [0, 0, 0, 0, -0.5, -0.5, -0.5, 0]
    assert first.advantages.tolist() == pytest.approx([0.2, 0.4])
    assert second.advantages.tolist() == pytest.approx([0.3, 0.1])
    assert second.lengths == [5, 3]
    assert plan.trained_tokens == 1 + 2 + 2 + 3 and plan.sequences == 4
    assert plan.num_tokens == 23 and plan.padded_tokens == 26
    assert plan.oversize == [] and plan.truncated == [] and plan.empty == []


def test_long_sample_gets_its_own_micro_batch_not_dropped():
    samples = [sample(4, 1), sample(30, 5), sample(4, 1)]
    plan = pack_micro_batches(samples, 10)
    assert [mb.indices for mb in plan.micro_batches] == [[1], [0, 2]]
    assert plan.oversize == [1]
    assert plan.micro_batches[0].input_ids.shape == (1, 30)
    assert plan.trained_tokens == 7


def test_truncation_is_reported():
    # 10 tokens, last 4 trained; cut to 8 -> 2 trained tokens lost
    plan = pack_micro_batches([sample(10, 4), sample(5, 1)], 100, max_length=8)
    assert plan.truncated == [0]
    assert plan.truncated_trained_tokens == 2
    assert plan.micro_batches[0].lengths == [8, 5]
    assert plan.trained_tokens == 2 + 1
    # a sample whose trained tokens all lie past the cut becomes empty, and is listed as such
    plan = pack_micro_batches([sample(10, 2)], 100, max_length=6)
    assert plan.truncated == [0] and plan.empty == [0] and plan.micro_batches == []


def test_first_position_and_untrained_samples():
    s = Sample([5, 6, 7], [1, 1, 1], [-1.0, -1.0, -1.0], 0.0, "g", "a")
    plan = pack_micro_batches([s, sample(4, 0)], 100)
    assert plan.micro_batches[0].loss_mask.tolist() == [[0.0, 1.0, 1.0]]  # position 0 has no logprob
    assert plan.micro_batches[0].old_logprobs.tolist() == [[0.0, -1.0, -1.0]]
    assert plan.empty == [1]
    assert plan.trained_tokens == 2


def test_argument_errors():
    with pytest.raises(ValueError, match="2 samples but 1 advantages"):
        pack_micro_batches([sample(3, 1), sample(3, 1)], 10, advantages=[1.0])
    with pytest.raises(ValueError, match="max_length"):
        pack_micro_batches([sample(3, 1)], 10, max_length=1)


def test_to_device_keeps_values():
    plan = pack_micro_batches([sample(3, 1)], 10)
    moved = plan.micro_batches[0].to("cpu")
    assert torch.equal(moved.input_ids, plan.micro_batches[0].input_ids) and moved.indices == [0]


def test_split_mini_batches():
    assert split_mini_batches(7, 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert split_mini_batches(4, 1) == [[0, 1, 2, 3]]
    # fewer samples than updates: every update still happens, each over all samples
    assert split_mini_batches(2, 3) == [[0, 1], [0, 1], [0, 1]]
    assert split_mini_batches(0, 2) == []
