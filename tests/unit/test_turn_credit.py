"""Turn-level credit and PPO's targets on hand-made samples (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest
import torch

from ajet.algorithm.gae import gae
from ajet.algorithm.ppo import ppo_targets, turn_reward_vector, value_loss, whiten
from ajet.algorithm.turns import spread, turn_advantages
from ajet.samples import trained_spans


def test_turn_spans_are_the_runs_of_the_mask():
    assert trained_spans([0, 0, 1, 1, 0, 0, 1, 0, 1, 1]) == [(2, 4), (6, 7), (8, 10)]
    assert trained_spans([0, 0]) == [] and trained_spans([1, 0]) == [(0, 1)]


def test_spread_puts_each_turn_value_on_its_tokens():
    assert spread([0, 1, 1, 0, 1], [0.5, -2.0]) == [0.0, 0.5, 0.5, 0.0, -2.0]
    with pytest.raises(ValueError, match="3 turn values for 2 trained spans"):
        spread([0, 1, 1, 0, 1], [1.0, 2.0, 3.0])


def test_turn_advantages_pool_the_group_turns():
    # group g: sample 0 (outcome +1) has turns rewarded 1, 0; sample 1 (outcome -1) has 1, 1, 0.
    # pooled 1, 0, 1, 1, 0: mean 0.6. Unscaled, weight 0.5: sample 0 -> 1 + 0.5 * 0.4 = 1.2, 1 - 0.3 = 0.7;
    # sample 1 -> -1 + 0.2 = -0.8, -0.8, -1 - 0.3 = -1.3. Sample 2 (group h, no turn rewards) -> None.
    out = turn_advantages([1.0, -1.0, 0.5], [[1.0, 0.0], [1.0, 1.0, 0.0], None], ["g", "g", "h"], 0.5, scale=False)
    assert out[0] == pytest.approx([1.2, 0.7])
    assert out[1] == pytest.approx([-0.8, -0.8, -1.3])
    assert out[2] is None
    # scaled: std = sqrt((3 * 0.16 + 2 * 0.36) / 5) = sqrt(0.24); turn 0 of sample 0: 1 + 0.5 * 0.4 / sqrt(0.24)
    out = turn_advantages([1.0, -1.0], [[1.0, 0.0], [1.0, 1.0, 0.0]], ["g", "g"], 0.5, eps=0.0)
    assert out[0][0] == pytest.approx(1 + 0.5 * 0.4 / math.sqrt(0.24))


def test_equal_turn_rewards_add_nothing():
    # an all-equal group (both episodes failed alike) with equal turn rewards: the outcome advantage alone
    out = turn_advantages([0.0, 0.0], [[1.0, 1.0], [1.0]], ["g", "g"], 1.0)
    assert out == [[0.0, 0.0], [0.0]]
    # equal outcomes, different turns: the turn term alone tells them apart (mean 0.5, unscaled)
    out = turn_advantages([0.0, 0.0], [[1.0, 0.0], [1.0, 0.0]], ["g", "g"], 1.0, scale=False)
    assert out == [[0.5, -0.5], [0.5, -0.5]]


def test_gae_by_hand():
    # rewards 0, 0, 1; values 0.5, 0.2, 0.6; gamma 0.9, lam 0.8 (V_3 = 0)
    # k=2: delta = 1 - 0.6 = 0.4 -> A2 = 0.4
    # k=1: delta = 0.9 * 0.6 - 0.2 = 0.34 -> A1 = 0.34 + 0.72 * 0.4 = 0.628
    # k=0: delta = 0.9 * 0.2 - 0.5 = -0.32 -> A0 = -0.32 + 0.72 * 0.628 = 0.13216
    # returns = A + V: 0.63216, 0.828, 1.0
    adv, ret = gae([0.0, 0.0, 1.0], [0.5, 0.2, 0.6], gamma=0.9, lam=0.8)
    assert adv == pytest.approx([0.13216, 0.628, 0.4])
    assert ret == pytest.approx([0.63216, 0.828, 1.0])
    # lam 1, gamma 1: the return less the value -> 0.5, 0.8, 0.4, every return 1
    adv, ret = gae([0.0, 0.0, 1.0], [0.5, 0.2, 0.6])
    assert adv == pytest.approx([0.5, 0.8, 0.4]) and ret == pytest.approx([1.0, 1.0, 1.0])
    # lam 0: the one-step TD errors 0.2 - 0.5, 0.6 - 0.2, 1 - 0.6
    adv, _ = gae([0.0, 0.0, 1.0], [0.5, 0.2, 0.6], lam=0.0)
    assert adv == pytest.approx([-0.3, 0.4, 0.4])
    with pytest.raises(ValueError):
        gae([1.0], [0.0, 0.0])


def test_turn_reward_vector():
    assert turn_reward_vector(3, 1.0, None, 0.5) == [0.0, 0.0, 1.0]
    assert turn_reward_vector(2, 1.0, [1.0, 0.0], 0.5) == [0.5, 1.0]  # 0.5 * 1; 0.5 * 0 + 1
    with pytest.raises(ValueError, match="3 turn rewards for 2 turns"):
        turn_reward_vector(2, 1.0, [1.0, 0.0, 1.0], 1.0)


def test_ppo_targets_of_a_two_turn_sample():
    # mask: turn 0 at tokens 2-3, turn 1 at token 6; values read at positions 1 and 5: 0.25 and 0.5.
    # rewards 0, 1; gamma = lam = 1: A = (1 - 0.25, 1 - 0.5) = (0.75, 0.5); returns 1, 1.
    mask = [0, 0, 1, 1, 0, 0, 1]
    values = [9.0, 0.25, 9.0, 9.0, 9.0, 0.5, 9.0]
    t = ppo_targets(mask, [0.0, 1.0], values, 1.0, 1.0)
    assert t.turn_advantages == pytest.approx([0.75, 0.5])
    assert t.advantages == pytest.approx([0, 0, 0.75, 0.75, 0, 0, 0.5])
    assert t.value_mask == [0, 1, 0, 0, 0, 1, 0]
    assert t.returns == pytest.approx([0, 1, 0, 0, 0, 1, 0])
    assert t.old_values == pytest.approx([0, 0.25, 0, 0, 0, 0.5, 0])
    # whitening over a batch: turns 0.75, 0.5 and a one-turn sample's -0.25 -> mean 1/3,
    # std sqrt(((5/12)^2 + (1/6)^2 + (7/12)^2) / 3) = sqrt(0.1736) = 0.41667
    other = ppo_targets([0, 1], [0.0], [0.25, 0.0], 1.0, 1.0)  # A = 0 - 0.25
    whiten([t, other], [mask, [0, 1]], eps=0.0)
    std = math.sqrt(((5 / 12) ** 2 + (1 / 6) ** 2 + (7 / 12) ** 2) / 3)
    assert t.advantages[2] == pytest.approx((0.75 - 1 / 3) / std)
    assert other.advantages[1] == pytest.approx((-0.25 - 1 / 3) / std)
    with pytest.raises(ValueError, match="position 0"):
        ppo_targets([1, 0], [1.0], [0.0, 0.0], 1.0, 1.0)


def test_clipped_value_loss_by_hand():
    # two value positions (1, 3), clip 0.2
    # pos 1: V 1.0, V_old 0.5, G 2: unclipped (1 - 2)^2 = 1; clipped V 0.5 + 0.2 = 0.7 -> 1.69; max 1.69 -> 0.845
    # pos 3: V 0.9, V_old 0.5, G 0: unclipped 0.81; clipped 0.7 -> 0.49; max 0.81 -> 0.405
    # loss = (0.845 + 0.405) / 2 = 0.625; the clipped term wins at pos 1 only -> clip fraction 0.5
    values = torch.tensor([[7.0, 1.0, 7.0, 0.9]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[0.0, 0.5, 0.0, 0.5]], dtype=torch.float64)
    returns = torch.tensor([[0.0, 2.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[0, 1, 0, 1]], dtype=torch.float64)
    loss, stats = value_loss(values, old, returns, mask, clip=0.2)
    assert loss.item() == pytest.approx(0.625)
    assert stats["value_clip_fraction"] == 0.5 and stats["value_positions"] == 2.0
    loss.backward()
    # pos 1: the clipped term is active and flat in V -> 0; pos 3: d/dV 0.5 (V - G)^2 / 2 = 0.9 / 2 = 0.45
    assert values.grad.tolist()[0] == pytest.approx([0.0, 0.0, 0.0, 0.45])
    # unclipped: 0.5 * (1 + 0.81) / 2 = 0.4525; a mini-batch normalizer of 4 positions halves it
    assert value_loss(values, old, returns, mask, clip=None)[0].item() == pytest.approx(0.4525)
    assert value_loss(values, old, returns, mask, clip=None, normalizer=4)[0].item() == pytest.approx(0.22625)


async def test_tool_reference_judge_says_which_turn_was_wrong():
    from ajet.judge.tool_reference import ToolReferenceJudge
    from ajet.workflow import Task, WorkflowOutput

    task = Task(task_id="t", query="Gas price in Boston, in EUR?",
                answer={"calls": [{"name": "get_gas_price", "arguments": {"city": "Boston"}},
                                  {"name": "convert", "arguments": {"value": 4.15, "to": "EUR"}}], "final": 3.8})

    def turn(name, args):
        return {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": name, "arguments": args}}]}

    messages = [{"role": "user", "content": task.query},
                turn("get_gas_price", '{"city": "Seattle"}'),  # the wrong city: 0
                {"role": "tool", "content": "3.1"},
                turn("get_gas_price", '{"city": "boston"}'),  # right (values compared leniently): 1
                {"role": "tool", "content": "4.15"},
                turn("convert", '{"value": 4.15, "to": "EUR"}'),  # right: 1
                {"role": "tool", "content": "3.8"},
                {"role": "assistant", "content": "It is 3.8 EUR."}]  # states the gold value: final 1
    reward = await ToolReferenceJudge().score(task, WorkflowOutput(answer="It is 3.8 EUR.", messages=messages))
    assert reward.turn_rewards == [0.0, 1.0, 1.0, 1.0]
    # the same right call made twice matches one gold call once; a wrong final answer scores its turn 0
    messages = [turn("get_gas_price", '{"city": "Boston"}'), turn("get_gas_price", '{"city": "Boston"}'),
                {"role": "assistant", "content": "It is 5 EUR."}]
    reward = await ToolReferenceJudge().score(task, WorkflowOutput(answer="It is 5 EUR.", messages=messages))
    assert reward.turn_rewards == [1.0, 0.0, 0.0]
