"""SFT on agent data runs the prefix its rows share (system prompt + tools) once per micro-batch, or once
per step when a step has several micro-batches, and packs micro-batches counting that prefix once; the
loss and the update equal the plain path."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

import ajet.trainer.step as step_module
from ajet.config.schema import LoraConfig, ModelConfig, TrainerConfig
from ajet.render import ChatRenderer
from ajet.samples import Sample
from ajet.trainer.batching import pack_micro_batches
from ajet.trainer.logprobs import (PrefixPass, common_prefix_length, full_token_logprobs, shared_prefix_length,
                                  token_logprobs)
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


def _lora_policy():
    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(rank=4)), autocast=None)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    return policy


def _stepper(policy, rows, cfg, algo="sft", advantages=None):
    """step(pack_prefix, run_prefix, once_per_step) -> (stats, update) of one train_step from the same start."""
    start = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}

    def step(pack_prefix: int, run_prefix: int, once_per_step: bool):
        with torch.no_grad():
            for n, p in policy.model.named_parameters():
                if n in start:
                    p.copy_(start[n])
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=1.0)  # update = -gradient
        saved = step_module.pack_micro_batches, step_module.token_logprobs, step_module._prefix_pass
        step_module.pack_micro_batches = functools.partial(pack_micro_batches, shared_prefix=pack_prefix)
        step_module.token_logprobs = functools.partial(token_logprobs, min_shared_prefix=run_prefix)
        if not once_per_step:
            step_module._prefix_pass = lambda *args, **kwargs: None
        try:
            stats = step_module.train_step(policy, optimizer, None, rows, advantages, cfg, algo=algo)
        finally:
            step_module.pack_micro_batches, step_module.token_logprobs, step_module._prefix_pass = saved
        return stats, {n: p.detach() - start[n] for n, p in policy.model.named_parameters() if n in start}

    return step


def _assert_same_step(stats, update, plain, plain_update):
    assert abs(stats["loss"] - plain["loss"]) <= 1e-5 * abs(plain["loss"])
    for name, expected in plain_update.items():
        scale = float(expected.abs().max())
        assert scale > 0, name
        assert float((update[name] - expected).abs().max()) <= 1e-4 * scale + 1e-7, name


def test_sft_step_with_the_shared_prefix_equals_the_plain_step(tiny_tokenizer):
    """The same SFT step four ways (plain; prefix run once per micro-batch; once per step for both
    micro-batches; once and counted once in packing, one micro-batch): equal loss and equal update, in float32."""
    policy = _lora_policy()
    step = _stepper(policy, tutorial_rows(tiny_tokenizer, 6), TrainerConfig(micro_batch_tokens=4096, grad_clip=1e9))
    plain, plain_update = step(0, 0, once_per_step=False)
    assert plain["micro_batches"] == 2
    for pack_prefix, once_per_step, micro_batches in ((0, False, 2), (0, True, 2), (64, True, 1)):
        stats, update = step(pack_prefix, 64, once_per_step)
        assert stats["micro_batches"] == micro_batches
        _assert_same_step(stats, update, plain, plain_update)


def test_grpo_step_runs_the_system_prompt_once_and_each_group_prompt_once_per_micro_batch(tiny_tokenizer, monkeypatch):
    """GRPO rows share the system prompt (200 tokens), each group its own task prompt (80 more), each episode
    its own completion. With one group per micro-batch the system prompt runs once for the step and each
    group's prompt once on top of it; the first trained token right after the system prompt reads the step
    pass's last hidden state. Loss and update equal the plain step."""
    system = list(range(100, 300))
    rows, advantages = [], []
    for group in range(3):
        task = [400 + group * 100 + i for i in range(80)]
        for episode in range(2):
            own = [40 + (7 * group + 3 * episode + i) % 50 for i in range(4 + 3 * group + episode)]
            ids = system + task + own
            mask = [0] * len(system) + [1] * 3 + [0] * (len(task) - 3) + [1] * len(own)
            old = [-1.5 if m else 0.0 for m in mask]
            rows.append(Sample(ids, mask, old, 0.0, f"g{group}", f"e{episode}"))
            advantages.append(1.0 if episode else -0.5)
    policy = _lora_policy()
    micro_batches = pack_micro_batches(rows, 320, advantages=advantages).micro_batches
    assert len(micro_batches) == 3 and all(len(set(rows[i].group_id for i in mb.indices)) == 1 for mb in micro_batches)
    assert common_prefix_length([mb.input_ids for mb in micro_batches], [mb.lengths for mb in micro_batches]) == 200
    step = _stepper(policy, rows, TrainerConfig(micro_batch_tokens=320, grad_clip=1e9), algo="grpo",
                    advantages=advantages)
    plain, plain_update = step(0, 0, once_per_step=False)
    stats, update = step(64, 64, once_per_step=True)
    assert stats["micro_batches"] == 3 and plain["micro_batches"] == 6  # plain: no prefix counted once
    _assert_same_step(stats, update, plain, plain_update)
    # one micro-batch: an RL update still runs its prefix as a checkpointed pass of its own
    whole = _stepper(policy, rows, TrainerConfig(micro_batch_tokens=4096, grad_clip=1e9), algo="grpo",
                     advantages=advantages)
    passes = []
    original = PrefixPass.__init__

    def counted(self, *args, **kwargs):
        passes.append(kwargs.get("checkpointed"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(PrefixPass, "__init__", counted)
    stats, update = whole(64, 64, once_per_step=True)
    assert stats["micro_batches"] == 1 and passes == [True]
    _assert_same_step(stats, update, plain, plain_update)


def test_prefix_pass_gives_the_logprobs_of_the_plain_forward(tiny_tokenizer):
    policy = _lora_policy()
    micro_batches = pack_micro_batches(tutorial_rows(tiny_tokenizer, 6), 4096, shared_prefix=0).micro_batches
    ids, lengths = [mb.input_ids for mb in micro_batches], [mb.lengths for mb in micro_batches]
    prefix = PrefixPass.shared_by(policy.model, ids, lengths)
    assert prefix is not None and prefix.length == common_prefix_length(ids, lengths) > 400
    for mb in micro_batches:
        got = token_logprobs(policy.model, mb.input_ids, mb.attention_mask, mb.loss_mask, prefix=prefix)
        expected = full_token_logprobs(policy.model, mb.input_ids, mb.attention_mask, mb.loss_mask)
        assert float((got - expected).abs().max()) < 1e-4
    assert PrefixPass.shared_by(policy.model, ids, lengths, min_shared_prefix=prefix.length + 1) is None


def test_common_prefix_length_leaves_every_row_a_token_of_its_own():
    a = torch.tensor([[1, 2, 3, 4, 5], [1, 2, 3, 9, 0]])  # second row is 4 tokens, right-padded
    b = torch.tensor([[1, 2, 3, 4, 6, 7]])
    assert common_prefix_length([a, b], [[5, 4], [6]]) == 3
    assert common_prefix_length([b, b], [[6], [6]]) == 5  # identical rows keep their last token
    assert common_prefix_length([a[:1], torch.tensor([[2, 2, 3, 4, 5]])], [[5], [5]]) == 0


def test_prefix_pass_keeps_no_activations_until_its_backward(tiny_tokenizer):
    """The step-wide prefix pass, checkpointed (RL updates), holds only its outputs (hidden states, keys,
    values) while the micro-batches run, not the activations of its layers, which backward() recomputes."""
    policy = _lora_policy()
    micro_batches = pack_micro_batches(tutorial_rows(tiny_tokenizer, 6), 4096, shared_prefix=0).micro_batches
    saved: list[torch.Tensor] = []

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor)
        return tensor

    def saved_by_pass(checkpointed: bool) -> list[torch.Tensor]:
        saved.clear()
        with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
            prefix = PrefixPass.shared_by(policy.model, [mb.input_ids for mb in micro_batches],
                                          [mb.lengths for mb in micro_batches], checkpointed=checkpointed)
        assert prefix is not None and prefix.length > 400
        return [t for t in saved if t.is_floating_point()]

    assert saved_by_pass(checkpointed=True) == []  # the prefix's token ids only, nothing the layers made
    assert len(saved_by_pass(checkpointed=False)) > 10  # SFT's faster pass keeps them


def test_prefix_pass_recomputes_with_the_dropout_masks_of_its_forward(tiny_tokenizer):
    """With LoRA dropout the recomputation in backward() draws the same masks as the forward: the gradient
    equals that of the same pass run plainly from the same random state."""
    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(rank=4, dropout=0.5)), autocast=None)
    policy.model.train()
    ids = torch.tensor(tutorial_rows(tiny_tokenizer, 1)[0].input_ids[:300])
    params = policy.trainable_parameters()

    def gradients(checkpointed: bool) -> list[torch.Tensor]:
        for p in params:
            p.grad = None
        torch.manual_seed(1)
        if checkpointed:
            prefix = PrefixPass(policy.model, ids)
            prefix.hidden.grad = torch.ones_like(prefix.hidden)
            prefix.backward()
        else:
            hidden = policy.model.get_base_model().model(input_ids=ids.unsqueeze(0)).last_hidden_state
            hidden.backward(torch.ones_like(hidden))
        return [p.grad.clone() for p in params]

    for got, expected in zip(gradients(True), gradients(False), strict=True):
        assert torch.equal(got, expected)
