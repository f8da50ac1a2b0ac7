"""A LoRA policy trained under bf16 autocast keeps its frozen linear weights in bf16 (ajet.trainer.policy):
the same losses and updates bit for bit as casting float32 weights at every call, no cast copies kept
for backward, and every pass over it (SFT/GRPO steps, DPO, SFT curation, the engine) runs."""

from __future__ import annotations

import asyncio

import torch

from ajet.config.schema import DpoConfig, LoraConfig, ModelConfig, TrainerConfig
from ajet.engine.base import SamplingParams
from ajet.engine.hf import HFEngine
from ajet.trainer.optim import build_optimizer
from ajet.trainer.policy import Policy, load_policy
from ajet.trainer.preference import dpo_step
from ajet.trainer.sft_curation import sample_losses
from ajet.trainer.step import train_step
from tests.unit.test_trainer_step import PROMPT, completion_sample, perturb_adapters

BF16 = torch.bfloat16


def policy_under(autocast: str | None) -> Policy:
    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(rank=4)), autocast=autocast)
    perturb_adapters(policy)
    return policy


def test_frozen_linears_are_kept_in_the_autocast_dtype():
    policy = policy_under("bfloat16")
    lm = policy.causal_lm()
    frozen = [m.weight for m in policy.model.modules() if type(m) is torch.nn.Linear and not m.weight.requires_grad]
    assert frozen and all(w.dtype == BF16 for w in frozen if w is not lm.get_input_embeddings().weight)
    assert lm.get_input_embeddings().weight.dtype == torch.float32  # the lookup and the tied head stay
    assert all(p.dtype == torch.float32 for p in policy.trainable_parameters())  # adapters and their optimizer
    assert policy.dtype == torch.float32 and policy.autocast_dtype == BF16
    assert all(m.weight.dtype == torch.float32 for m in policy_under(None).model.modules() if type(m) is torch.nn.Linear)


def test_the_same_updates_as_casting_float32_weights_at_every_call():
    kept, cast = policy_under("bfloat16"), policy_under(None)  # cast: float32 weights, autocast per call
    prompt = " ".join([PROMPT] * 10)  # ~80 shared tokens: the shared prefix runs once for both micro-batches
    samples = [completion_sample(cast, prompt, " Paris."), completion_sample(cast, prompt, " It is Paris, of course.")]
    cfg = TrainerConfig(lr=1e-2, micro_batch_tokens=64)
    stats = []
    for policy, dtype in ((kept, None), (cast, BF16)):
        optimizer = build_optimizer(policy.trainable_parameters(), cfg)
        for _ in range(2):
            stats.append(train_step(policy, optimizer, None, samples, [1.0, -1.0], cfg, algo="grpo", autocast_dtype=dtype))
    assert [s["loss"] for s in stats[:2]] == [s["loss"] for s in stats[2:]] and stats[0]["micro_batches"] > 1
    assert all(torch.equal(a, b) for a, b in zip(kept.trainable_parameters(), cast.trainable_parameters()))


def test_a_step_keeps_no_cast_copies_of_the_weights():
    policy = policy_under("bfloat16")
    weight_shapes = {tuple(m.weight.shape) for m in policy.model.modules()  # the frozen ones (adapters are cast, small)
                     if type(m) is torch.nn.Linear and not m.weight.requires_grad}
    params = {p.untyped_storage().data_ptr() for p in policy.model.parameters()}
    copies = []

    def pack(t):
        if t.dim() == 2 and tuple(t.shape) in weight_shapes and t.untyped_storage().data_ptr() not in params:
            copies.append(t.shape)
        return t

    with policy.autocast():
        samples = [completion_sample(policy, PROMPT, " Paris.")]
    optimizer = build_optimizer(policy.trainable_parameters(), TrainerConfig())
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        train_step(policy, optimizer, None, samples, None, TrainerConfig(), algo="sft")
    assert copies == []


def test_a_pass_outside_autocast_still_runs():
    policy = policy_under("bfloat16")
    ids = torch.tensor([policy.tokenizer(PROMPT)["input_ids"]])
    with torch.no_grad():
        plain = policy.model(input_ids=ids).logits
        with policy.autocast():
            autocast = policy.model(input_ids=ids).logits
    assert plain.dtype == torch.float32 and torch.allclose(plain, autocast.float(), atol=0.05)


def test_dpo_curation_and_the_engine_run_on_such_a_policy():
    policy = policy_under("bfloat16")
    pairs = [(completion_sample(policy, PROMPT, " Paris."), completion_sample(policy, PROMPT, " Rome."))]
    optimizer = build_optimizer(policy.trainable_parameters(), TrainerConfig(lr=1e-2))
    assert dpo_step(policy, optimizer, None, pairs, TrainerConfig(), DpoConfig())["updates"] == 1.0
    losses = sample_losses(policy.model, 0, policy.autocast)([pairs[0][0]])
    assert losses[0] > 0
    engine = HFEngine(policy.model, policy.tokenizer, autocast_dtype=policy.autocast_dtype)
    ids = policy.tokenizer(PROMPT)["input_ids"]
    generation = asyncio.run(engine.generate(ids, SamplingParams(max_tokens=4, temperature=0.0)))
    assert len(generation.token_ids) == 4
