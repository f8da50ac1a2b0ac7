"""The `agent` judge (seed 002's five-part reward and penalties) and the agent metrics, on hand-computed cases."""

from __future__ import annotations

import pytest

from ajet.config.schema import JudgeConfig
from ajet.errors import ConfigError, JudgeError
from ajet.judge import build_judge
from ajet.judge.agent import agent_metrics, plan_success, reference_of, summarize_agent_metrics, tool_accuracy
from ajet.workflow import Task, WorkflowOutput

PRICE = {"name": "get_price", "arguments": {"city": "Paris"}}
REFERENCE = {"calls": [PRICE], "final": 12.5}


def agent(**args):
    return build_judge(JudgeConfig(type="agent", args=args))


def task(answer) -> Task:
    return Task(task_id="t1", query="q", answer=answer)


async def test_a_perfect_episode_scores_one_with_every_part_full():
    out = WorkflowOutput(answer="It costs 12.5", tool_calls=[dict(PRICE)])
    reward = await agent().score(task(REFERENCE), out)
    assert reward.total == pytest.approx(1.0)
    assert [reward.parts[k] for k in ("task_completion", "tool_accuracy", "efficiency", "timing_quality",
                                      "format_compliance")] == [1.0] * 5
    assert reward.is_success is True and reward.feedback == "task completed"
    assert all(reward.parts[f"penalty.{p}"] == 0.0 for p in ("wrong_tool", "redundant_call", "format_error", "timeout"))


async def test_extra_tools_repeats_parse_failures_and_a_wrong_answer():
    out = WorkflowOutput(answer="13", tool_calls=[dict(PRICE), dict(PRICE), {"name": "search", "arguments": {}}],
                         metadata={"ajet": {"tool_call_parse_failures": 1}})
    reward = await agent().score(task(REFERENCE), out)
    # tools {get_price, search} vs {get_price}: P 1/2, R 1, F1 2/3; 3 calls for 1: 1/3; format 3/4
    assert reward.parts["tool_accuracy"] == pytest.approx(2 / 3)
    assert reward.parts["efficiency"] == pytest.approx(1 / 3)
    assert reward.parts["timing_quality"] == 1.0 and reward.parts["format_compliance"] == 0.75
    # 0.4*0 + 0.25*2/3 + 0.15*1/3 + 0.1*1 + 0.1*0.75 = 0.391667; wrong_tool -0.3, redundant -0.2, format -0.1
    assert reward.total == pytest.approx(0.3916667 - 0.6, abs=1e-6)
    assert (reward.parts["penalty.wrong_tool"], reward.parts["penalty.redundant_call"],
            reward.parts["penalty.format_error"], reward.parts["penalty.timeout"]) == (-0.3, -0.2, -0.1, 0.0)
    assert reward.is_success is False
    assert reward.feedback == ("task not completed; unneeded tools: search; 3 calls where 1 suffice; "
                               "malformed calls or an empty answer; penalties: wrong_tool, redundant_call, format_error")


async def test_timing_rewards_answering_directly_when_no_tool_is_needed():
    no_tool = {"target_tools": [], "final": 4}
    direct = await agent().score(task(no_tool), WorkflowOutput(answer="4"))
    assert direct.total == pytest.approx(1.0)
    called = await agent().score(task(no_tool), WorkflowOutput(answer="4", tool_calls=[{"name": "calc", "arguments": {}}]))
    # completion 1, tools 0.5 (seed rule), efficiency max(0, 1) / 1 = 1, timing 0, format 1: 0.4 + 0.125 + 0.15 + 0.1
    assert called.total == pytest.approx(0.775)
    assert called.feedback == "task completed; unneeded tools: calc; called a tool it did not need"


async def test_weights_penalties_and_optimal_steps_are_configurable():
    ref = {"calls": [PRICE], "final": 12.5, "optimal_steps": 2}
    out = WorkflowOutput(answer="12.5", tool_calls=[dict(PRICE), {"name": "get_price", "arguments": {"city": "Lyon"}}])
    reward = await agent(weights={"efficiency": 0.0, "task_completion": 1.0}, penalties={}).score(task(ref), out)
    # 2 calls within optimal 2: efficiency 1 (weight 0 anyway); 1.0*1 + 0.25 + 0.1 + 0.1 = 1.45, no penalties
    assert reward.total == pytest.approx(1.45) and not any(k.startswith("penalty.") for k in reward.parts)


def test_bad_arguments_and_missing_references_are_clear():
    with pytest.raises(ConfigError, match="unknown part 'tool_acuracy'; did you mean 'tool_accuracy'"):
        agent(weights={"tool_acuracy": 1})
    with pytest.raises(ConfigError, match="all weights are 0; give at least one part a positive weight"):
        agent(weights=dict.fromkeys(("task_completion", "tool_accuracy", "efficiency", "timing_quality",
                                     "format_compliance"), 0.0))
    with pytest.raises(ConfigError, match="penalties are added, write -0.3 to subtract"):
        agent(penalties={"wrong_tool": 0.3})
    with pytest.raises(JudgeError, match="optimal_steps must be an integer >= 0"):
        reference_of(task({"calls": [PRICE], "optimal_steps": "two"}))
    assert reference_of(task("12.5")) is None


async def test_a_task_without_a_reference_is_a_judge_failure():
    with pytest.raises(JudgeError, match="names no target tools and no expected calls"):
        await agent().score(task({"final": 3}), WorkflowOutput(answer="3"))


def test_tool_accuracy_and_plan_success_by_hand():
    assert tool_accuracy(["a", "b"], ["a", "c"]) == pytest.approx(0.5)  # P 1/2, R 1/2
    assert tool_accuracy([], ["a"]) == 0.0 and tool_accuracy([], []) == 1.0 and tool_accuracy(["x"], []) == 0.5
    two = reference_of(task({"calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]}))
    assert plan_success(["a", "x", "b"], two) == 1.0  # in order, something between
    assert plan_success(["b", "a"], two) == 0.0  # wrong order
    assert plan_success(["a"], two) == 0.0
    targets_only = reference_of(task({"target_tools": ["a", "b"]}))
    assert plan_success(["b", "a"], targets_only) == 1.0


def test_agent_metrics_per_episode_and_their_summary():
    out = WorkflowOutput(answer="12.5", tool_calls=[{"name": "search", "arguments": {}}, dict(PRICE)])
    row = agent_metrics(task(REFERENCE), out, success=True)
    assert row == {"tool_selection_accuracy": pytest.approx(2 / 3), "plan_success_rate": 1.0,
                   "step_efficiency": 0.5, "timing_precision": 1.0, "end_to_end_success": 1.0}
    assert agent_metrics(task("12.5"), out, success=True) is None
    other = {**row, "tool_selection_accuracy": 0.0, "end_to_end_success": 0.0}
    summary = summarize_agent_metrics([row, other])
    assert summary["tool_selection_accuracy"] == {"mean": pytest.approx(1 / 3), "std": pytest.approx(1 / 3), "count": 2.0}
    assert summary["end_to_end_success"] == {"mean": 0.5, "std": 0.5, "count": 2.0}


def test_eval_report_carries_the_agent_metrics_of_episodes_with_references():
    from ajet.rollout.episode import EpisodeResult
    from ajet.rollout.runner import BatchResult
    from ajet.rollout.validation import eval_report

    def episode(n: int, answer, out: WorkflowOutput | None, success: bool) -> EpisodeResult:
        return EpisodeResult(episode_id=f"e{n}", task=Task(task_id=f"t{n}", query="q", answer=answer), repeat=0,
                             group_id=f"t{n}", output=out, success=success)

    right = WorkflowOutput(answer="12.5", tool_calls=[dict(PRICE)])
    batch = BatchResult(episodes=[episode(0, REFERENCE, right, True), episode(1, REFERENCE, None, False),
                                  episode(2, "plain answer", WorkflowOutput(answer="x"), True)], seconds=1.0)
    metrics = eval_report(batch, group_size=1)["agent_metrics"]
    # the failed episode counts with no call (tool F1 0, plan 0, efficiency 1, timing 0); the plain task is left out
    assert metrics["tool_selection_accuracy"] == {"mean": 0.5, "std": 0.5, "count": 2.0}
    assert metrics["step_efficiency"]["mean"] == 1.0 and metrics["end_to_end_success"]["mean"] == 0.5
    plain = BatchResult(episodes=[episode(2, "plain answer", WorkflowOutput(answer="x"), True)], seconds=1.0)
    assert "agent_metrics" not in eval_report(plain, group_size=1)
