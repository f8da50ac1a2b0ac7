"""Online DPO pairs from rollout groups, worked out by hand."""

from __future__ import annotations

from dataclasses import dataclass, field

from ajet.algorithm.online_dpo import online_pairs
from ajet.reward import Reward
from ajet.samples import Sample


def sample(name: str, trained: int) -> Sample:
    """A sample whose episode_id names it and whose loss mask trains `trained` tokens."""
    n = trained + 2
    return Sample(input_ids=list(range(n)), loss_mask=[0, 0] + [1] * trained, old_logprobs=[0.0] * n,
                  reward=0.0, group_id="", agent="main", episode_id=name)


@dataclass
class Episode:
    group_id: str
    reward: Reward | None
    samples: list[Sample] = field(default_factory=list)


def ep(group: str, name: str, reward: float | None, trained: int = 3) -> Episode:
    """An episode with one sample; reward None stands for a failed (unscored, sample-less) episode."""
    if reward is None:
        return Episode(group, None, [])
    return Episode(group, Reward(total=reward), [sample(name, trained)])


def names(pairs) -> list[tuple[str, str]]:
    return [(chosen.episode_id, rejected.episode_id) for chosen, rejected in pairs]


def test_best_and_worst_of_each_group_in_group_order():
    # group b first seen first: best b2 (0.9) over worst b1 (0.1); group a: a1 (1.0) over a3 (0.0)
    episodes = [ep("b", "b1", 0.1), ep("a", "a1", 1.0), ep("b", "b2", 0.9), ep("a", "a2", 0.5), ep("a", "a3", 0.0),
                ep("b", "b3", 0.5)]
    assert names(online_pairs(episodes)) == [("b2", "b1"), ("a1", "a3")]


def test_all_equal_and_single_episode_groups_make_no_pair():
    episodes = [ep("same", "s1", 1.0), ep("same", "s2", 1.0), ep("same", "s3", 1.0), ep("solo", "o1", 0.7),
                ep("zero", "z1", 0.0), ep("zero", "z2", 0.0)]
    assert online_pairs(episodes) == []
    assert online_pairs([]) == []


def test_ties_pick_the_first_episode_with_the_top_or_bottom_reward():
    # rewards 1, 1, 0, 0: chosen t1 (first of the 1s), rejected t3 (first of the 0s)
    episodes = [ep("t", "t1", 1.0), ep("t", "t2", 1.0), ep("t", "t3", 0.0), ep("t", "t4", 0.0)]
    assert names(online_pairs(episodes)) == [("t1", "t3")]


def test_failed_episodes_take_no_part():
    # f1 failed (no reward, no samples): the group's worst scored episode is f3 (0.2), not f1
    episodes = [ep("f", "f1", None), ep("f", "f2", 0.8), ep("f", "f3", 0.2)]
    assert names(online_pairs(episodes)) == [("f2", "f3")]
    # every other episode of the group failed: one scored episode left, nothing to compare it with
    assert online_pairs([ep("g", "g1", None), ep("g", "g2", 1.0), ep("g", "g3", None)]) == []
    # scored but no trained call (no samples): skipped like a failure
    assert online_pairs([Episode("h", Reward(total=1.0), []), ep("h", "h2", 0.0)]) == []


def test_an_episode_with_several_samples_is_represented_by_its_most_trained_one():
    chosen = Episode("m", Reward(total=1.0), [sample("short", 2), sample("long", 5), sample("long-too", 5)])
    rejected = Episode("m", Reward(total=-1.0), [sample("only", 1)])
    pairs = online_pairs([rejected, chosen])
    assert names(pairs) == [("long", "only")]  # the first of the two 5-token samples
    assert pairs[0][0] is chosen.samples[1] and pairs[0][1] is rejected.samples[0]
