"""`judge.reward: success`: the trained reward is the episode's success (1/0), the judge's total kept as a part.
Every total below is worked out by hand in the comment next to it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ajet.config import load_config
from ajet.config.schema import JudgeConfig
from ajet.errors import ConfigError
from ajet.judge import build_judge
from ajet.judge.base import Judge, Reward, checked_reward, success_of
from ajet.workflow import Task, WorkflowOutput

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {"calls": [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}]}
TASK = Task(task_id="t1", query="Weather in Paris, in Celsius?", answer=EXPECTED)


def called(unit: str) -> WorkflowOutput:
    return WorkflowOutput(answer="", tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris", "unit": unit}}])


def function_call_judge(reward: str):
    return build_judge(JudgeConfig(type="function_call", args={"expected_key": "calls"}, success_threshold=0.99,
                                   reward=reward))


async def test_a_near_miss_keeps_partial_credit_under_total_and_scores_0_under_success():
    # No tool schema, so schema_hit_rate is left out: weights 0.1 + 0.3 + 0.3 + 0.2 = 0.9.
    # unit "f": parse 1, name 1, param_f1 = 2 * 1 hit / (2 + 2 pairs) = 0.5, exec 1
    # total = (0.1 + 0.3 + 0.3 * 0.5 + 0.2) / 0.9 = 0.75 / 0.9 = 0.8333...
    near = await function_call_judge("total").score(TASK, called("f"))
    assert near.total == pytest.approx(0.75 / 0.9) and near.is_success is None

    binary = await function_call_judge("success").score(TASK, called("f"))
    assert binary.total == 0.0 and binary.is_success is False
    assert binary.parts["judge_total"] == pytest.approx(0.75 / 0.9)
    assert binary.parts["param_f1"] == 0.5  # the judge's own parts are kept

    exact = await function_call_judge("success").score(TASK, called("c"))
    assert (exact.total, exact.is_success, exact.parts["judge_total"]) == (1.0, True, 1.0)


PLUGIN = textwrap.dedent(
    """
    from ajet import Judge, Reward

    class Verdicts(Judge):
        '''total from the answer's first word; a verdict from its second ('yes', 'no', or none).'''
        scores_groups = True

        async def score(self, task, output):
            total, verdict = (output.answer.split() + ["-"])[:2]
            return Reward(total=float(total), is_success={"yes": True, "no": False}.get(verdict))

    class Broken(Judge):
        async def score(self, task, output):
            return float("nan")
    """
)


@pytest.fixture
def plugin(tmp_path):
    (tmp_path / "verdicts.py").write_text(PLUGIN)
    return lambda name, **cfg: build_judge(JudgeConfig(type=f"verdicts.py:{name}", reward="success", **cfg),
                                           base_dir=tmp_path)


async def test_success_is_decided_as_the_rollout_decides_it(plugin):
    judge = plugin("Verdicts", success_threshold=0.5)
    assert judge.scores_groups  # a ranking judge still sees its whole group
    task = Task(task_id="t", query="q")
    outputs = [
        WorkflowOutput(answer="0.2 yes"),  # the judge's verdict wins over its total
        WorkflowOutput(answer="0.9 no"),
        WorkflowOutput(answer="0.9", is_success=False),  # no verdict: the workflow's
        WorkflowOutput(answer="0.7"),  # neither: 0.7 >= success_threshold 0.5
        WorkflowOutput(answer="0.3"),
    ]
    rewards = await judge.score_group(task, outputs)
    assert [r.total for r in rewards] == [1.0, 0.0, 0.0, 1.0, 0.0]
    assert [r.parts["judge_total"] for r in rewards] == [0.2, 0.9, 0.9, 0.7, 0.3]


async def test_a_broken_reward_is_still_reported_not_turned_into_0(plugin):
    value = await plugin("Broken").score(Task(task_id="t", query="q"), WorkflowOutput(answer="x"))
    reward, error = checked_reward(value, "the judge returned")
    assert reward is None and error.startswith("NonFiniteReward")


def test_the_tutorial_yaml_takes_the_option_and_a_typo_is_refused():
    yaml = ROOT / "tutorial" / "example_function_calling" / "function_calling.yaml"
    assert load_config(yaml, ["judge.reward=success"]).judge.reward == "success"
    assert load_config(yaml).judge.reward == "total"
    with pytest.raises(ConfigError, match="judge.reward"):
        load_config(yaml, ["judge.reward=succes"])


class _FullMarks(Judge):
    async def score(self, task, output):
        return Reward(total=1.0)


@pytest.mark.parametrize("reward, verdict, succeeded", [
    (Reward(total=0.2, is_success=True), False, True),  # the judge's verdict first
    (Reward(total=1.0), False, False),  # then the workflow's
    (Reward(total=0.5), None, True),  # then total >= threshold 0.5
    (Reward(total=0.49), None, False),
])
def test_success_of_is_one_rule(reward, verdict, succeeded):
    assert success_of(reward, 0.5, verdict) is succeeded


async def test_the_demo_filter_drops_what_the_workflow_calls_a_failure_as_the_rollout_does():
    from ajet.generate.demos import DemoFilter

    keep = DemoFilter(_FullMarks(), "grounding", None, 0.5)
    task = Task(task_id="t", query="How many units of A-10?", answer="17")
    answered = dict(answer="There are 17 units.", metadata={"stop_reason": "answered"},
                    tool_calls=[{"name": "stock", "arguments": {"sku": "A-10"}, "result": {"units": 17}}])
    assert (await keep.score(task, WorkflowOutput(**answered))).is_success is True
    dropped = await keep.score(task, WorkflowOutput(**answered, is_success=False))
    assert dropped.is_success is False and dropped.feedback.startswith("judge_failed")
