"""Group-normalised advantages, computed by hand."""

from __future__ import annotations

import math

import pytest

from ajet.algorithm.advantages import group_advantages


def test_scaled_group_advantages():
    # group a: rewards 1, 0 -> mean 0.5, population std 0.5 -> (1 - 0.5) / 0.5 = +1, -1
    # group b: rewards 0, 0, 3 -> mean 1, std sqrt((1 + 1 + 4) / 3) = sqrt(2) -> -1/sqrt2, -1/sqrt2, 2/sqrt2
    adv, stats = group_advantages([1.0, 0.0, 0.0, 0.0, 3.0], ["a", "a", "b", "b", "b"], eps=0.0)
    s2 = math.sqrt(2)
    assert adv == pytest.approx([1.0, -1.0, -1 / s2, -1 / s2, 2 / s2])
    assert stats.groups == 2 and stats.informative_groups == 2
    assert stats.skip == []
    assert stats.reward_mean == pytest.approx(0.8)  # 4 / 5


def test_unscaled_is_centred_only():
    # group a: mean 0.5 -> +0.5, -0.5; interleaved ids keep their positions
    adv, _ = group_advantages([1.0, 7.0, 0.0, 5.0], ["a", "b", "a", "b"], scale=False)
    # group b: 7, 5 -> mean 6 -> +1, -1
    assert adv == pytest.approx([0.5, 1.0, -0.5, -1.0])


def test_leave_one_out_baseline():
    # group a: 1, 0, 0 -> each baseline is the mean of the other two: 1 - 0 = 1, 0 - 1/2, 0 - 1/2
    # (= (r - 1/3) * 3/2: 1, -1/2, -1/2). Unscaled (RLOO):
    adv, stats = group_advantages([1.0, 0.0, 0.0], ["a", "a", "a"], scale=False, baseline="leave_one_out")
    assert adv == pytest.approx([1.0, -0.5, -0.5]) and stats.informative_groups == 1
    # scaled: divided by the group's population std sqrt(2)/3 -> 3/sqrt2, -1.5/sqrt2, -1.5/sqrt2
    adv, _ = group_advantages([1.0, 0.0, 0.0], ["a", "a", "a"], eps=0.0, baseline="leave_one_out")
    s2 = math.sqrt(2)
    assert adv == pytest.approx([3 / s2, -1.5 / s2, -1.5 / s2])
    # zero-variance groups stay skipped whatever the baseline
    adv, stats = group_advantages([1.0, 1.0], ["b", "b"], baseline="leave_one_out")
    assert adv == [0.0, 0.0] and stats.skip == [0, 1]
    with pytest.raises(ValueError, match="baseline"):
        group_advantages([1.0, 0.0], ["a", "a"], baseline="median")


def test_eps_in_denominator():
    # rewards 1, 0: (1 - 0.5) / (0.5 + 0.4) = 0.5 / 0.9 with eps = 0.4 (the std 0.5 > eps, so not skipped)
    adv, _ = group_advantages([1.0, 0.0], ["g", "g"], eps=0.4)
    assert adv == pytest.approx([0.5 / 0.9, -0.5 / 0.9])


def test_zero_variance_and_singleton_groups_are_reported():
    rewards = [1.0, 1.0, 1.0, 0.5, 0.0, 1.0]
    groups = ["same", "same", "same", "solo", "mix", "mix"]
    adv, stats = group_advantages(rewards, groups)
    assert adv[:4] == [0.0, 0.0, 0.0, 0.0]
    assert adv[4] < 0 < adv[5]
    assert stats.zero_variance_groups == 1
    assert stats.singleton_groups == 1
    assert stats.informative_groups == 1
    assert stats.skip == [0, 1, 2, 3]
    d = stats.to_dict()
    assert d["skipped_samples"] == 4.0 and d["groups"] == 3.0


def test_empty_and_mismatched():
    adv, stats = group_advantages([], [])
    assert adv == [] and stats.groups == 0
    with pytest.raises(ValueError, match="2 rewards but 1 group"):
        group_advantages([1.0, 2.0], ["a"])


def test_huge_finite_rewards_do_not_overflow_and_other_groups_keep_their_signal():
    # group big: 1e308, 1e308, 0. Divided by 1e308: 1, 1, 0 -> mean 2/3, var (1/9 + 1/9 + 4/9) / 3 = 2/9,
    # std sqrt(2)/3; back in scale the mean is 2/3 * 1e308 (a plain sum would be inf, the mean inf, NaN after).
    # advantages: (1 - 2/3) / (sqrt2/3) = 1/sqrt2 twice, (0 - 2/3) / (sqrt2/3) = -sqrt2.
    # group ok: 1, 0 -> +1, -1, untouched by its neighbour.
    adv, stats = group_advantages([1e308, 1e308, 0.0, 1.0, 0.0], ["big", "big", "big", "ok", "ok"], eps=0.0)
    s2 = math.sqrt(2)
    assert adv == pytest.approx([1 / s2, 1 / s2, -s2, 1.0, -1.0])
    assert stats.informative_groups == 2 and stats.nonfinite_groups == 0
    # whole batch: 2e308 / 5 as the mean of the values divided by 1e308 (0.4), times 1e308
    assert stats.reward_mean == pytest.approx(0.4e308) and math.isfinite(stats.reward_std)


def test_opposite_huge_rewards_give_finite_advantages():
    # 1e308, -1e308: (v - mean)**2 alone overflows. Divided by 1e308: 1, -1 -> mean 0, std 1 -> +1, -1.
    adv, stats = group_advantages([1e308, -1e308], ["g", "g"], eps=0.0)
    assert adv == [1.0, -1.0] and stats.informative_groups == 1
    # unscaled (Dr. GRPO): 1e308 - 0 is finite, so is -1e308 - 0
    adv, _ = group_advantages([1e308, -1e308], ["g", "g"], scale=False)
    assert adv == [1e308, -1e308]


def test_a_non_finite_group_is_skipped_and_counted_alone():
    # group bad holds inf and NaN: advantage 0, skipped, counted; group ok: 3, 1 -> mean 2, std 1 -> +1, -1
    rewards = [math.inf, 1.0, math.nan, 3.0, 1.0]
    adv, stats = group_advantages(rewards, ["bad", "bad", "bad", "ok", "ok"], eps=0.0)
    assert adv == [0.0, 0.0, 0.0, 1.0, -1.0]
    assert stats.nonfinite_groups == 1 and stats.informative_groups == 1 and stats.skip == [0, 1, 2]
    # the batch stats leave the non-finite rewards out: mean of 1, 3, 1 = 5/3
    assert stats.reward_mean == pytest.approx(5 / 3) and stats.to_dict()["nonfinite_groups"] == 1.0


def test_unscaled_overflow_is_a_nonfinite_group():
    # 1.5e308 and -1.5e308 are finite, but 1.5e308 - (-1.5e308)... the mean is 0, the advantages are the
    # rewards themselves; with 1.7e308 and -1e308 the mean is 0.35e308 and 1.7e308 - 0.35e308 is finite too.
    # Only a difference past 1.8e308 overflows: rewards 1.7e308, 1.7e308, -1.7e308 -> mean 0.567e308,
    # -1.7e308 - 0.567e308 = -2.27e308 -> -inf: the group is skipped, the other keeps +0.5, -0.5.
    adv, stats = group_advantages([1.7e308, 1.7e308, -1.7e308, 1.0, 0.0], ["x", "x", "x", "ok", "ok"], scale=False)
    assert adv == [0.0, 0.0, 0.0, 0.5, -0.5] and stats.nonfinite_groups == 1
