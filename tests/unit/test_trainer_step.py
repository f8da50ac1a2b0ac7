"""The trainer on the tiny model: logprobs, one GRPO / SFT update, LoRA, accumulation, reference model."""

from __future__ import annotations

import pytest
import torch

from ajet.config.schema import GrpoConfig, LoraConfig, ModelConfig, TrainerConfig
from ajet.errors import ModelError
from ajet.samples import Sample
from ajet.trainer.batching import pack_micro_batches
from ajet.trainer.logprobs import full_token_logprobs, sequence_logprobs, token_logprobs
from ajet.trainer.optim import build_optimizer, build_scheduler
from ajet.trainer.policy import Policy, load_policy
from ajet.trainer.step import train_step

PROMPT = "What is the capital of France?"


def make_policy(lora: bool = True, **kwargs) -> Policy:
    torch.manual_seed(0)
    return load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(enabled=lora)), **kwargs)


def perturb_adapters(policy: Policy) -> None:
    """Fresh LoRA B matrices are zero (the adapter starts as a no-op); give them values so it matters."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)


def own_logprobs(policy: Policy, ids: list[int], mask: list[int]) -> list[float]:
    t = torch.tensor([ids])
    with torch.no_grad():
        lp = token_logprobs(policy.model, t, torch.ones_like(t), torch.tensor([mask]))
    return lp[0].tolist()


def completion_sample(policy: Policy, prompt: str, completion: str, reward: float = 0.0) -> Sample:
    """prompt + completion tokens, the completion trained, old logprobs from the policy itself (on-policy)."""
    tok = policy.tokenizer
    p_ids = tok(prompt)["input_ids"]
    c_ids = tok(completion)["input_ids"]
    ids, mask = p_ids + c_ids, [0] * len(p_ids) + [1] * len(c_ids)
    return Sample(ids, mask, own_logprobs(policy, ids, mask), reward, "g0", "assistant")


def sample_logprob(policy: Policy, s: Sample) -> float:
    return sum(own_logprobs(policy, s.input_ids, s.loss_mask))


def snapshot(policy: Policy) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in policy.model.state_dict().items()}


def changed(before: dict[str, torch.Tensor], policy: Policy) -> set[str]:
    return {k for k, v in policy.model.state_dict().items() if not torch.equal(before[k], v)}


@pytest.mark.parametrize("lora", [True, False])
def test_masked_logprobs_equal_full_logits(lora):
    policy = make_policy(lora=lora)
    if lora:
        perturb_adapters(policy)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 49152, (3, 12), generator=g)
    attn = torch.ones_like(ids)
    attn[1, 9:] = 0  # right padding
    attn[2, 5:] = 0
    mask = torch.zeros_like(ids)
    mask[:, 0] = 1  # position 0 must be ignored
    mask[:, 3:] = 1
    mask = mask * attn
    fast = token_logprobs(policy.model, ids, attn, mask)
    slow = full_token_logprobs(policy.model, ids, attn, mask)
    assert fast.shape == (3, 12) and fast.dtype == torch.float32
    assert torch.allclose(fast, slow, atol=1e-5, rtol=0)
    assert fast[:, 0].abs().sum() == 0 and fast[1, 9:].abs().sum() == 0
    assert (fast[0, 3:] < 0).all()
    assert sequence_logprobs(fast, mask).tolist() == pytest.approx((fast * mask).sum(1).tolist())
    if lora:  # adapters disabled -> a different (the base) distribution
        with torch.no_grad(), policy.base_model_context() as base:
            base_lp = token_logprobs(base, ids, attn, mask)
        assert not torch.allclose(base_lp, fast, atol=1e-4)
    # the head saw only the trained positions: gradients flow through them
    fast.sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.trainable_parameters())


def test_grpo_update_raises_the_better_completion_and_lowers_the_other():
    policy = make_policy()
    good = completion_sample(policy, PROMPT, " Paris is the capital.", reward=1.0)
    bad = completion_sample(policy, PROMPT, " I do not know, sorry.", reward=0.0)
    before_good, before_bad = sample_logprob(policy, good), sample_logprob(policy, bad)
    before = snapshot(policy)
    cfg = TrainerConfig(lr=1e-3, steps=1)
    opt = build_optimizer(policy.model.parameters(), cfg)
    stats = train_step(policy, opt, build_scheduler(opt, cfg), [good, bad], [1.0, -1.0], cfg)
    after_good, after_bad = sample_logprob(policy, good), sample_logprob(policy, bad)
    assert after_good > before_good + 1e-3
    assert after_bad < before_bad - 1e-3
    # on-policy old logprobs: the trainer agrees with them, ratio 1, nothing clipped
    assert stats["logprob_gap"] < 1e-5
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert stats["clip_fraction"] == 0.0
    assert stats["updates"] == 1 and stats["grad_norm"] > 0
    assert stats["tokens"] == sum(good.loss_mask) + sum(bad.loss_mask)
    assert stats["tokens_per_s"] > 0 and stats["lr"] == 1e-3
    # LoRA: only adapter weights moved, the base is untouched
    moved = changed(before, policy)
    assert moved and all("lora_" in k for k in moved)
    assert not policy.model.training  # back in eval mode for the engine


def test_sft_step_lowers_masked_loss():
    policy = make_policy()
    samples = [completion_sample(policy, PROMPT, " Paris."),
               completion_sample(policy, "Hi!", " Hello, how can I help?")]
    cfg = TrainerConfig(lr=1e-2, steps=3)
    opt = build_optimizer(policy.model.parameters(), cfg)
    sched = build_scheduler(opt, cfg)
    first = train_step(policy, opt, sched, samples, None, cfg, algo="sft")
    # loss of the first step = mean CE over trained tokens under the untouched model
    tokens = sum(sum(s.loss_mask) for s in samples)
    expected = -sum(sum(s.old_logprobs) for s in samples) / tokens
    assert first["loss"] == pytest.approx(expected, rel=1e-5)
    second = train_step(policy, opt, sched, samples, None, cfg, algo="sft")
    assert second["loss"] < first["loss"] - 0.01


def _sgd_delta(micro_batch_tokens: int, agg: str) -> dict[str, torch.Tensor]:
    """Parameter change of one SGD(lr=1) update: exactly minus the accumulated gradient."""
    policy = make_policy()
    perturb_adapters(policy)  # so that lora_A receives gradient too
    texts = [(" Paris.", 1.0), (" Lyon is a big city in France.", -0.5), (" no", 0.3),
             (" It is Paris, of course!", -0.8)]
    # prompts of ~40 tokens, so that budget 64 fits one row per micro-batch
    long_prompt = "You are a helpful geography assistant. Answer briefly and correctly. " * 3 + PROMPT
    samples = [completion_sample(policy, long_prompt, c) for c, _ in texts]
    # off-policy old logprobs so the ratio is not 1 everywhere
    samples = [Sample(s.input_ids, s.loss_mask, [v - 0.1 * m for v, m in zip(s.old_logprobs, s.loss_mask)],
                      0.0, "g", "a") for s in samples]
    before = snapshot(policy)
    cfg = TrainerConfig(lr=1.0, steps=1, grad_clip=1e9, micro_batch_tokens=micro_batch_tokens)
    opt = torch.optim.SGD(policy.trainable_parameters(), lr=1.0)
    stats = train_step(policy, opt, None, samples, [a for _, a in texts], cfg, grpo=GrpoConfig(loss_agg=agg))
    assert stats["micro_batches"] == (1 if micro_batch_tokens >= 1000 else 4)
    return {k: v - before[k] for k, v in policy.model.state_dict().items() if "lora_" in k}


@pytest.mark.parametrize("agg", ["token", "sequence"])
def test_micro_batching_gives_the_same_gradient(agg):
    small, big = _sgd_delta(64, agg), _sgd_delta(100_000, agg)
    assert any(d.abs().sum() > 0 for d in big.values())
    for key in big:
        assert torch.allclose(small[key], big[key], atol=1e-6, rtol=1e-4), key


def test_updates_per_step_and_schedule():
    policy = make_policy()
    samples = [completion_sample(policy, PROMPT, " Paris."), completion_sample(policy, PROMPT, " Rome.")]
    cfg = TrainerConfig(lr=1e-3, steps=4, updates_per_step=3, lr_schedule="linear", warmup_steps=1)
    opt = build_optimizer(policy.model.parameters(), cfg)
    sched = build_scheduler(opt, cfg)
    stats = train_step(policy, opt, sched, samples, [1.0, -1.0], cfg)
    assert stats["updates"] == 3  # 3 updates from 2 samples: each update sees both
    assert stats["lr"] == pytest.approx(1e-3)  # warm-up step 0: 1e-3 * 1 / 1
    # one scheduler step per call: step 1 of linear decay over 3 post-warmup steps -> 1e-3 * (1 - 0/3)
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3)
    train_step(policy, opt, sched, samples, [1.0, -1.0], cfg)
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 * (1 - 1 / 3))
    # after the first update the ratio moved away from 1 in later updates
    assert stats["ratio_mean"] != pytest.approx(1.0, abs=1e-7)


def test_full_finetune_with_reference_and_kl():
    policy = make_policy(lora=False, reference=True)
    samples = [completion_sample(policy, PROMPT, " Paris."), completion_sample(policy, PROMPT, " Rome.")]
    ref_before = {k: v.clone() for k, v in policy.reference_model.state_dict().items()}
    before = snapshot(policy)
    cfg = TrainerConfig(lr=1e-3, steps=2)
    opt = build_optimizer(policy.model.parameters(), cfg)
    sched = build_scheduler(opt, cfg)
    grpo = GrpoConfig(beta=0.1)
    first = train_step(policy, opt, sched, samples, [1.0, -1.0], cfg, grpo=grpo)
    assert first["kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference before any update
    second = train_step(policy, opt, sched, samples, [1.0, -1.0], cfg, grpo=grpo)
    assert second["kl"] > 1e-6
    moved = changed(before, policy)
    assert "model.embed_tokens.weight" in moved and any("layers.0.mlp" in k for k in moved)
    assert all(torch.equal(v, ref_before[k]) for k, v in policy.reference_model.state_dict().items())


def test_full_finetune_without_reference_refuses_kl():
    policy = make_policy(lora=False)
    samples = [completion_sample(policy, PROMPT, " Paris.")]
    cfg = TrainerConfig(lr=1e-3)
    opt = build_optimizer(policy.model.parameters(), cfg)
    with pytest.raises(ModelError, match="reference=True"):
        train_step(policy, opt, None, samples, [1.0], cfg, grpo=GrpoConfig(beta=0.1))


def test_recompute_old_logprobs_measures_engine_gap():
    policy = make_policy()
    s = completion_sample(policy, PROMPT, " Paris is the capital.")
    engine_like = Sample(s.input_ids, s.loss_mask, [v - 0.25 * m for v, m in zip(s.old_logprobs, s.loss_mask)],
                         0.0, "g", "a")  # engine 0.25 nats below the trainer on every trained token
    cfg = TrainerConfig(lr=1e-3)
    opt = build_optimizer(policy.model.parameters(), cfg)
    engine = train_step(policy, opt, None, [engine_like], [1.0], cfg)
    assert engine["logprob_gap"] == pytest.approx(0.25, abs=1e-4)
    assert engine["ratio_mean"] == pytest.approx(float(torch.exp(torch.tensor(0.25))), rel=1e-4)
    policy = make_policy()
    opt = build_optimizer(policy.model.parameters(), cfg)
    recomputed = train_step(policy, opt, None, [engine_like], [1.0], cfg, old_logprobs="recompute")
    assert recomputed["logprob_gap"] == pytest.approx(0.25, abs=1e-4)
    assert recomputed["ratio_mean"] == pytest.approx(1.0, abs=1e-5)


def test_bad_arguments():
    policy = make_policy()
    s = completion_sample(policy, PROMPT, " Paris.")
    cfg = TrainerConfig()
    opt = build_optimizer(policy.model.parameters(), cfg)
    with pytest.raises(ValueError, match="one advantage per sample"):
        train_step(policy, opt, None, [s], None, cfg)
    with pytest.raises(ValueError, match="'grpo', 'ppo' or 'sft'"):
        train_step(policy, opt, None, [s], None, cfg, algo="a2c")
    with pytest.raises(ValueError, match="value head and one PpoTargets per sample"):
        train_step(policy, opt, None, [s], None, cfg, algo="ppo")
    plan = pack_micro_batches([s], 64)
    assert plan.trained_tokens == sum(s.loss_mask)


def test_bf16_autocast_step_matches_float32_loss():
    samples_by_run = []
    for autocast in (None, "bfloat16"):
        torch.manual_seed(0)
        policy = load_policy(ModelConfig(path="tiny-random"), autocast=autocast)
        s = completion_sample(policy, PROMPT, " Paris is the capital of France.")
        cfg = TrainerConfig(lr=1e-3)
        opt = build_optimizer(policy.model.parameters(), cfg)
        samples_by_run.append(train_step(policy, opt, None, [s], None, cfg, algo="sft"))
    fp32, bf16 = samples_by_run
    assert bf16["loss"] == pytest.approx(fp32["loss"], rel=1e-2)
    assert bf16["loss"] != fp32["loss"]  # autocast really ran in bf16


def test_lr_schedules_by_hand():
    from ajet.trainer.optim import lr_factor

    # warmup 2 of 6 steps: 1/2, 2/2, then decay over the 4 remaining steps, p = (s - 2) / 4
    lin = TrainerConfig(steps=6, warmup_steps=2, lr_schedule="linear")
    assert [lr_factor(s, lin) for s in range(6)] == pytest.approx([0.5, 1.0, 1.0, 0.75, 0.5, 0.25])
    cos = TrainerConfig(steps=6, warmup_steps=2, lr_schedule="cosine")
    # 0.5 * (1 + cos(pi * p)): p = 0, 1/4, 1/2, 3/4 -> 1, 0.853553, 0.5, 0.146447
    assert [lr_factor(s, cos) for s in range(2, 6)] == pytest.approx([1.0, 0.853553, 0.5, 0.146447], abs=1e-6)
    const = TrainerConfig(steps=6, lr_schedule="constant")
    assert {lr_factor(s, const) for s in range(6)} == {1.0}


def test_policy_options(tmp_path):
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}[{{ m['content'] }}]{% endfor %}")
    policy = load_policy(ModelConfig(path="tiny-random", chat_template=str(template),
                                     lora=LoraConfig(rank=4, target_modules=["q_proj", "v_proj"])))
    assert policy.tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False) == "[x]"
    assert policy.chat_template == template.read_text()
    names = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert names and all(("q_proj" in n or "v_proj" in n) and "lora_" in n for n in names)
    # per layer, rank 4: q_proj 64->64: A 4x64 + B 64x4 = 512; v_proj 64->32 (2 kv heads x 16): A 4x64 + B 32x4 = 384
    assert policy.num_parameters()[0] == 2 * (512 + 384)
    assert policy.dtype == torch.float32 and policy.device.type == "cpu"
    frozen = load_policy(ModelConfig(path="tiny-random"), for_training=False)
    assert not frozen.trainable_parameters()
    with pytest.raises(ModelError, match="target_modules"):
        load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(target_modules=["no_such_layer"])))
    with pytest.raises(ModelError, match="neither a Jinja template nor an existing file"):
        load_policy(ModelConfig(path="tiny-random", chat_template="missing.jinja"))


def test_gradient_checkpointing_gives_the_same_updates():
    losses = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        policy = load_policy(ModelConfig(path="tiny-random"), gradient_checkpointing=checkpointing)
        s = completion_sample(policy, PROMPT, " Paris is the capital of France.")
        cfg = TrainerConfig(lr=1e-2)
        opt = build_optimizer(policy.model.parameters(), cfg)
        losses.append([train_step(policy, opt, None, [s], None, cfg, algo="sft")["loss"] for _ in range(2)])
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    assert losses[0][1] < losses[0][0]


def test_gradient_checkpointing_runs_rows_that_share_a_long_prefix_and_gives_the_same_updates():
    # rows sharing a prefix over MIN_SHARED_PREFIX take the KV-cache path, which checkpointing turns off
    losses = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        policy = load_policy(ModelConfig(path="tiny-random"), gradient_checkpointing=checkpointing)
        rows = [completion_sample(policy, PROMPT * 12, answer) for answer in (" Paris.", " It is Paris, in France.")]
        cfg = TrainerConfig(lr=1e-2)
        opt = build_optimizer(policy.model.parameters(), cfg)
        losses.append([train_step(policy, opt, None, rows, None, cfg, algo="sft")["loss"] for _ in range(2)])
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    assert losses[0][1] < losses[0][0]


def test_step_reports_truncated_oversize_and_empty_samples_once():
    policy = make_policy()
    long = completion_sample(policy, PROMPT * 8, " Paris is the capital of France, and a large city.")
    empty = Sample(long.input_ids[:10], [0] * 10, [0.0] * 10, 0.0, "g", "a")
    cfg = TrainerConfig(lr=1e-3, updates_per_step=3, micro_batch_tokens=64)
    opt = build_optimizer(policy.model.parameters(), cfg)
    stats = train_step(policy, opt, None, [long, empty], None, cfg, algo="sft", max_length=len(long.input_ids) - 3)
    assert len(long.input_ids) - 3 > 64  # still over budget after the cut: its own micro-batch
    assert (stats["truncated"], stats["oversize"], stats["empty"]) == (1.0, 1.0, 1.0)
    assert stats["updates"] == 3 and stats["tokens"] == 3 * (sum(long.loss_mask) - 3)


def test_token_outputs_entropy_and_values_match_the_full_computation():
    from ajet.trainer.logprobs import token_outputs
    from ajet.trainer.value import ValueHead

    policy = make_policy()
    perturb_adapters(policy)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 49152, (2, 10), generator=g)
    attn = torch.ones_like(ids)
    attn[1, 7:] = 0
    mask = torch.zeros_like(ids)
    mask[:, 4:] = 1
    mask = mask * attn
    head = ValueHead(64)
    with torch.no_grad():
        head.linear.weight.normal_(generator=g)
        out = token_outputs(policy.model, ids, attn, mask, entropy=True, value_head=head)
        logits = policy.model(input_ids=ids, attention_mask=attn, use_cache=False).logits.float()  # (B, T, V)
        logp = logits[:, :-1].log_softmax(-1)  # (B, T-1, V): position t-1 gives token t's distribution
        entropy = torch.cat([torch.zeros(2, 1), -(logp.exp() * logp).sum(-1)], dim=1)  # (B, T)
        hidden = policy.causal_lm().get_decoder()(input_ids=ids, attention_mask=attn).last_hidden_state
    trained = mask.bool()
    assert torch.allclose(out.entropy[trained], entropy[trained], atol=1e-4)
    assert (out.entropy[~trained] == 0).all()
    real = attn.bool()
    assert torch.allclose(out.values[real], head(hidden).squeeze(-1)[real], atol=1e-5)
    assert torch.equal(out.logprobs, token_logprobs(policy.model, ids, attn, mask))


def test_value_head_is_saved_and_restored_with_the_checkpoint(tmp_path):
    from ajet.trainer.checkpoint import load_checkpoint, save_checkpoint
    from ajet.trainer.value import attach_value_head

    policy = make_policy()
    head = attach_value_head(policy)
    assert attach_value_head(policy) is head and float(head.linear.weight.detach().abs().sum()) == 0.0  # starts at zero
    with torch.no_grad():
        head.linear.weight.fill_(0.5)
        head.linear.bias.fill_(-1.0)
    path = save_checkpoint(tmp_path, 1, policy, None, None)
    fresh = make_policy()
    attach_value_head(fresh)
    load_checkpoint(path, fresh)
    assert torch.equal(fresh.value_head.linear.weight, head.linear.weight)
    assert fresh.value_head.linear.bias.item() == -1.0
    plain = make_policy()
    load_checkpoint(path, plain)  # a policy without a critic (eval, export) ignores the file
    assert plain.value_head is None


def test_per_token_advantages_and_token_values_are_packed_with_their_rows():
    s0 = Sample([1, 2, 3, 4], [0, 1, 1, 0], [0.0] * 4, 0.0, "g", "a")
    s1 = Sample([5, 6, 7], [0, 0, 1], [0.0] * 3, 0.0, "g", "a")
    plan = pack_micro_batches([s0, s1], 100, advantages=[[0.0, 2.0, -1.0, 0.0], 0.5],
                              token_values={"returns": [[0.0, 1.0, 0.0, 0.0], [0.0, 3.0, 0.0]]}, max_length=3)
    mb = plan.micro_batches[0]
    # s0 was cut to 3 tokens, s1 broadcasts its scalar over its length; padding is 0
    assert mb.token_values["advantages"].tolist() == [[0.0, 2.0, -1.0], [0.5, 0.5, 0.5]]
    assert mb.token_values["returns"].tolist() == [[0.0, 1.0, 0.0], [0.0, 3.0, 0.0]]
    with pytest.raises(ValueError, match="one value per token"):
        pack_micro_batches([s0], 100, token_values={"returns": [[1.0]]})
