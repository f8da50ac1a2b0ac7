"""The losses against values computed by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest
import torch

from ajet.algorithm.losses import dpo_loss, grpo_loss, kl_k3, sft_loss, token_entropy

LN = math.log


def t(rows):
    return torch.tensor(rows, dtype=torch.float64)


def test_grpo_unclipped_is_minus_ratio_times_advantage():
    # mask [0,1,1]; ratios exp(ln 1.1 - 0) = 1.1 and 0.9, both inside [0.8, 1.2]; A = 2
    # per-token loss = -(1.1 * 2), -(0.9 * 2) -> token mean = -(2.2 + 1.8) / 2 = -2.0
    logp = t([[0.0, LN(1.1), LN(0.9)]]).requires_grad_()
    loss, stats = grpo_loss(logp, t([[0.0, 0.0, 0.0]]), t([2.0]), t([[0, 1, 1]]), epsilon=0.2)
    assert loss.item() == pytest.approx(-2.0, abs=1e-12)
    assert stats["clip_fraction"] == 0.0
    assert stats["ratio_mean"] == pytest.approx(1.0)  # (1.1 + 0.9) / 2
    assert stats["tokens"] == 2.0
    loss.backward()
    # d/dlogp of -(r * A) / 2 = -(r * A) / 2: -1.1, -0.9; position 0 is masked -> 0
    assert logp.grad.tolist()[0] == pytest.approx([0.0, -1.1, -0.9])


def test_grpo_clipped_positive_advantage():
    # A = +1, eps 0.2. token 1: r = 1.5 -> min(1.5, clip 1.2) = 1.2 (clip active, no gradient)
    # token 2: r = 0.5 -> min(0.5, clip 0.8) = 0.5 (a positive advantage is not clipped below)
    # loss = -(1.2 + 0.5) / 2 = -0.85; clip fraction 1/2
    logp = t([[LN(1.5), LN(0.5)]]).requires_grad_()
    loss, stats = grpo_loss(logp, t([[0.0, 0.0]]), t([1.0]), t([[1, 1]]), epsilon=0.2)
    assert loss.item() == pytest.approx(-0.85, abs=1e-12)
    assert stats["clip_fraction"] == 0.5
    assert stats["clip_high"] == 0.5 and stats["clip_low"] == 0.0
    assert stats["ratio_max"] == pytest.approx(1.5)
    loss.backward()
    # token 1 clipped -> 0; token 2: -(r * A) / 2 = -0.25
    assert logp.grad.tolist()[0] == pytest.approx([0.0, -0.25])


def test_grpo_clipped_negative_advantage():
    # A = -1. token 1: r = 1.5 -> min(-1.5, -1.2) = -1.5 (unclipped); token 2: r = 0.5 -> min(-0.5, -0.8) = -0.8
    # loss = -(-1.5 - 0.8) / 2 = 1.15; clip fraction 1/2 (low side)
    logp = t([[LN(1.5), LN(0.5)]])
    loss, stats = grpo_loss(logp, t([[0.0, 0.0]]), t([-1.0]), t([[1, 1]]), epsilon=0.2)
    assert loss.item() == pytest.approx(1.15, abs=1e-12)
    assert stats["clip_low"] == 0.5 and stats["clip_high"] == 0.0


def test_grpo_epsilon_high_widens_upper_clip():
    # r = 1.25, A = 1. eps 0.2: min(1.25, 1.2) = 1.2 -> loss -1.2. eps_high 0.28: 1.25 < 1.28 -> loss -1.25
    logp, old, adv, mask = t([[LN(1.25)]]), t([[0.0]]), t([1.0]), t([[1]])
    loss, _ = grpo_loss(logp, old, adv, mask, epsilon=0.2)
    assert loss.item() == pytest.approx(-1.2, abs=1e-12)
    loss, stats = grpo_loss(logp, old, adv, mask, epsilon=0.2, epsilon_high=0.28)
    assert loss.item() == pytest.approx(-1.25, abs=1e-12)
    assert stats["clip_fraction"] == 0.0
    # the lower side still uses epsilon: r = 0.7 < 0.8 with A = -1 -> min(-0.7, -0.8) = -0.8 -> loss 0.8
    loss, _ = grpo_loss(t([[LN(0.7)]]), old, t([-1.0]), mask, epsilon=0.2, epsilon_high=0.28)
    assert loss.item() == pytest.approx(0.8, abs=1e-12)


def test_grpo_kl_term_k3():
    # logp = old = 0 -> r = 1, A = 1 -> surrogate 1 per token.
    # k3 with ref = ln 2: delta = ln 2 -> 2 - ln 2 - 1 = 0.306853; ref = ln 0.5: 0.5 + ln 2 - 1 = 0.193147
    # mean KL = (2 - 1 + 0.5 - 1) / 2 = 0.25 exactly; loss = -1 + 0.1 * 0.25 = -0.975
    logp, old, mask = t([[0.0, 0.0]]), t([[0.0, 0.0]]), t([[1, 1]])
    ref = t([[LN(2.0), LN(0.5)]])
    assert kl_k3(logp, ref).tolist()[0] == pytest.approx([2 - LN(2) - 1, 0.5 + LN(2) - 1])
    loss, stats = grpo_loss(logp, old, t([1.0]), mask, epsilon=0.2, ref_logprobs=ref, beta=0.1)
    assert loss.item() == pytest.approx(-0.975, abs=1e-12)
    assert stats["kl"] == pytest.approx(0.25, abs=1e-12)
    # beta 0 with a reference: KL is reported but not added
    loss, stats = grpo_loss(logp, old, t([1.0]), mask, epsilon=0.2, ref_logprobs=ref, beta=0.0)
    assert loss.item() == pytest.approx(-1.0, abs=1e-12) and stats["kl"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo_loss(logp, old, t([1.0]), mask, epsilon=0.2, beta=0.1)


def test_grpo_token_vs_sequence_aggregation_and_normalizer():
    # r = 1 everywhere, so per-token loss = -A. row 0: 1 token, A = +1; row 1: 3 tokens, A = -1.
    # token mean: (-1 * 1 + 1 * 3) / 4 = 0.5.  sequence: row means -1 and +1 -> (−1 + 1) / 2 = 0.0
    logp = t([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    mask = t([[0, 1, 0, 0], [0, 1, 1, 1]])
    adv = t([1.0, -1.0])
    loss_tok, _ = grpo_loss(logp, logp, adv, mask, epsilon=0.2, agg="token")
    loss_seq, _ = grpo_loss(logp, logp, adv, mask, epsilon=0.2, agg="sequence")
    assert loss_tok.item() == pytest.approx(0.5)
    assert loss_seq.item() == pytest.approx(0.0)
    # split into one-row micro-batches with the mini-batch normalizer: the sums give the same losses
    # token: -1/4 + 3/4 = 0.5; sequence: -1/2 + 1/2 = 0
    parts_tok = [grpo_loss(logp[i : i + 1], logp[i : i + 1], adv[i : i + 1], mask[i : i + 1], epsilon=0.2,
                           agg="token", normalizer=4)[0].item() for i in range(2)]
    assert parts_tok == pytest.approx([-0.25, 0.75])
    parts_seq = [grpo_loss(logp[i : i + 1], logp[i : i + 1], adv[i : i + 1], mask[i : i + 1], epsilon=0.2,
                           agg="sequence", normalizer=2)[0].item() for i in range(2)]
    assert parts_seq == pytest.approx([-0.5, 0.5])


def test_grpo_ignores_garbage_outside_mask():
    # padding positions hold -inf / huge values: they must not leak into the loss or the gradient
    logp = t([[float("-inf"), 0.0, 50.0]]).requires_grad_()
    old = t([[0.0, 0.0, -50.0]])
    loss, stats = grpo_loss(logp, old, t([1.0]), t([[0, 1, 0]]), epsilon=0.2)
    assert loss.item() == pytest.approx(-1.0)
    loss.backward()
    assert torch.isfinite(logp.grad).all()
    assert stats["ratio_max"] == pytest.approx(1.0)


def test_token_entropy():
    # logits [0, 0] -> p = 1/2, 1/2 -> H = ln 2; logits [ln 3, 0] -> p = 3/4, 1/4
    # -> H = -(3/4 ln 3/4 + 1/4 ln 1/4) = 0.562335
    h = token_entropy(t([[0.0, 0.0], [LN(3), 0.0]]).log_softmax(dim=-1))
    assert h.tolist() == pytest.approx([LN(2), -(0.75 * LN(0.75) + 0.25 * LN(0.25))])


def test_grpo_entropy_bonus():
    # r = 1, A = 1 -> surrogate -1 per token; entropies ln 2 and 0.5 on the trained tokens, 9 on a masked one.
    # coef 0.1: loss = mean(-1 - 0.1 * H) = -1 - 0.1 * (ln 2 + 0.5) / 2 = -1.059657
    logp, mask = t([[0.0, 0.0, 0.0]]), t([[1, 1, 0]])
    entropy = t([[LN(2), 0.5, 9.0]]).requires_grad_()
    loss, stats = grpo_loss(logp, logp, t([1.0]), mask, epsilon=0.2, entropy=entropy, entropy_coef=0.1)
    assert loss.item() == pytest.approx(-1 - 0.1 * (LN(2) + 0.5) / 2, abs=1e-12)
    assert stats["entropy"] == pytest.approx((LN(2) + 0.5) / 2)
    loss.backward()
    assert entropy.grad.tolist()[0] == pytest.approx([-0.05, -0.05, 0.0])  # -coef / 2 tokens; masked: 0
    # coef 0: reported, not added
    loss, stats = grpo_loss(logp, logp, t([1.0]), mask, epsilon=0.2, entropy=entropy.detach())
    assert loss.item() == pytest.approx(-1.0) and "entropy" in stats
    with pytest.raises(ValueError, match="entropy"):
        grpo_loss(logp, logp, t([1.0]), mask, epsilon=0.2, entropy_coef=0.1)


def test_grpo_per_token_advantages():
    # turn credit / PPO hand (B, T) advantages: r = 1 -> per-token loss -A_t: tokens 1, 2 of row 0 get 2 and -1,
    # token 3 (masked) 100: token mean = -(2 - 1) / 2 = -0.5
    logp = t([[0.0, 0.0, 0.0, 0.0]])
    loss, stats = grpo_loss(logp, logp, t([[0.0, 2.0, -1.0, 100.0]]), t([[0, 1, 1, 0]]), epsilon=0.2)
    assert loss.item() == pytest.approx(-0.5) and stats["adv_mean"] == pytest.approx(0.5)


def test_sft_masked_cross_entropy_from_logits_and_logprobs():
    # position 0 logits [0, 0, 0] -> p = 1/3 each; target 2 -> CE = ln 3 = 1.098612
    # position 1 logits [0, ln 2, 0] -> p = [1/4, 1/2, 1/4]; target 1 -> CE = ln 2 = 0.693147
    logits = t([[[0.0, 0.0, 0.0], [0.0, LN(2), 0.0]]])
    targets = torch.tensor([[2, 1]])
    both = sft_loss(logits, t([[1, 1]]), targets)
    assert both.item() == pytest.approx((LN(3) + LN(2)) / 2, abs=1e-6)  # 0.895880
    second = sft_loss(logits, t([[0, 1]]), targets)
    assert second.item() == pytest.approx(LN(2), abs=1e-6)
    # the same from per-token logprobs
    assert sft_loss(t([[-LN(3), -LN(2)]]), t([[1, 1]])).item() == pytest.approx(0.895880, abs=1e-6)
    # micro-batch normalizer: tokens of a 4-token mini-batch -> (ln 3 + ln 2) / 4
    assert sft_loss(t([[-LN(3), -LN(2)]]), t([[1, 1]]), normalizer=4).item() == pytest.approx(
        (LN(3) + LN(2)) / 4, abs=1e-6
    )


def test_dpo_sigmoid_loss():
    # pair 1: chosen reward 0.5 * (-1 - -1.5) = 0.25, rejected 0.5 * (-2 - -1.5) = -0.25, z = 0.5
    # loss = -log sigmoid(0.5) = log(1 + e^-0.5) = 0.474077
    loss, stats = dpo_loss(t([-1.0]), t([-2.0]), t([-1.5]), t([-1.5]), beta=0.5)
    assert loss.item() == pytest.approx(math.log1p(math.exp(-0.5)), abs=1e-9)
    assert loss.item() == pytest.approx(0.474077, abs=1e-6)
    assert stats["reward_chosen"] == pytest.approx(0.25)
    assert stats["reward_rejected"] == pytest.approx(-0.25)
    assert stats["reward_margin"] == pytest.approx(0.5)
    assert stats["reward_accuracy"] == 1.0
    # pair 2: chosen 0.5 * (-3 - -2) = -0.5, rejected 0.5 * (-1 - -2) = 0.5, z = -1 -> log(1 + e) = 1.313262
    # mean over pairs (0.474077 + 1.313262) / 2 = 0.893669; accuracy 1/2
    loss, stats = dpo_loss(t([-1.0, -3.0]), t([-2.0, -1.0]), t([-1.5, -2.0]), t([-1.5, -2.0]), beta=0.5)
    assert loss.item() == pytest.approx(0.893669, abs=1e-6)
    assert stats["reward_accuracy"] == 0.5


def test_dpo_label_smoothing():
    # z = 0.5, ls = 0.1: 0.9 * log(1 + e^-0.5) + 0.1 * log(1 + e^0.5) = 0.9 * 0.474077 + 0.1 * 0.974077 = 0.524077
    loss, _ = dpo_loss(t([-1.0]), t([-2.0]), t([-1.5]), t([-1.5]), beta=0.5, label_smoothing=0.1)
    assert loss.item() == pytest.approx(0.524077, abs=1e-6)


def test_dpo_reference_free_takes_the_reference_log_ratio_as_zero():
    # z = 0.5 * (-1 - -2) = 0.5 -> log(1 + e^-0.5) = 0.474077, the same as a reference that scores both alike
    loss, stats = dpo_loss(t([-1.0]), t([-2.0]), None, None, beta=0.5)
    assert loss.item() == pytest.approx(0.474077, abs=1e-6)
    assert stats["reward_chosen"] == pytest.approx(-0.5) and stats["reward_rejected"] == pytest.approx(-1.0)


def test_ipo_loss_on_per_token_mean_log_ratios():
    # chosen: (-4 - -5) / 2 tokens = 0.5; rejected: (-6 - -3) / 3 tokens = -1; h = 1.5
    # beta 0.5: (1.5 - 1 / (2 * 0.5))^2 = 0.25; beta 0.1: (1.5 - 5)^2 = 12.25
    args = (t([-4.0]), t([-6.0]), t([-5.0]), t([-3.0]))
    counts = dict(chosen_tokens=t([2.0]), rejected_tokens=t([3.0]))
    loss, stats = dpo_loss(*args, beta=0.5, loss_type="ipo", **counts)
    assert loss.item() == pytest.approx(0.25, abs=1e-9)
    assert stats["reward_chosen"] == pytest.approx(0.25) and stats["reward_rejected"] == pytest.approx(-0.5)
    assert stats["reward_margin"] == pytest.approx(0.75) and stats["reward_accuracy"] == 1.0
    loss, _ = dpo_loss(*args, beta=0.1, loss_type="ipo", **counts)
    assert loss.item() == pytest.approx(12.25, abs=1e-9)
    with pytest.raises(ValueError, match="chosen_tokens"):
        dpo_loss(*args, beta=0.5, loss_type="ipo")


def test_simpo_loss_is_length_normalised_with_a_margin_and_ignores_the_reference():
    # chosen -2 / 4 tokens = -0.5, rejected -6 / 3 tokens = -2; beta 2: rewards -1 and -4
    # z = (-1 - -4) - gamma 1.0 = 2 -> log(1 + e^-2) = 0.126928
    counts = dict(chosen_tokens=t([4.0]), rejected_tokens=t([3.0]))
    loss, stats = dpo_loss(t([-2.0]), t([-6.0]), None, None, beta=2.0, loss_type="simpo", simpo_gamma=1.0, **counts)
    assert loss.item() == pytest.approx(math.log1p(math.exp(-2.0)), abs=1e-9)
    assert loss.item() == pytest.approx(0.126928, abs=1e-6)
    assert stats["reward_chosen"] == pytest.approx(-1.0) and stats["reward_margin"] == pytest.approx(3.0)
    with_ref, _ = dpo_loss(t([-2.0]), t([-6.0]), t([-9.0]), t([0.0]), beta=2.0, loss_type="simpo",
                           simpo_gamma=1.0, **counts)
    assert with_ref.item() == pytest.approx(loss.item(), abs=1e-12)
    # label smoothing as in cDPO: 0.9 * 0.126928 + 0.1 * log(1 + e^2) = 0.114235 + 0.212693 = 0.326928
    smoothed, _ = dpo_loss(t([-2.0]), t([-6.0]), None, None, beta=2.0, label_smoothing=0.1, loss_type="simpo",
                           simpo_gamma=1.0, **counts)
    assert smoothed.item() == pytest.approx(0.326928, abs=1e-6)
