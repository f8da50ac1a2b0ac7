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
