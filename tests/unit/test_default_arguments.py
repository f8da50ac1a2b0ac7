"""Arguments at their schema default: sending one and leaving it out make the same call, so the call judges
compare them equal on either side (a hand-written reference that spells `stat: "mean"` and a model that
leaves `stat` out). Figures worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.generate.call_tasks import round_trip
from ajet.generate.endpoint import endpoint_of, open_endpoint
from ajet.judge.function_call import Call, FunctionCallJudge, without_defaults
from ajet.judge.tool_reference import ToolReferenceJudge
from ajet.workflow import Task, WorkflowOutput

# A monthly-statistics tool in the shape FastMCP writes for `stat: Stat = "mean"`, `hourly: bool = False`,
# `station_type: str | None = None`.
TOOLS = [{"type": "function", "function": {"name": "monthly_stats", "parameters": {
    "type": "object", "required": ["station_id", "month"],
    "properties": {"station_id": {"type": "string"}, "month": {"type": "integer"},
                   "stat": {"type": "string", "enum": ["mean", "min", "max"], "default": "mean"},
                   "hourly": {"type": "boolean", "default": False},
                   "station_type": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}}}}}]
SPECS = {"monthly_stats": TOOLS[0]["function"]["parameters"]}


def reference(**arguments) -> Task:
    return Task(task_id="t", query="What was the mean daily high at KSFO in August 2024?",
                answer={"calls": [{"name": "monthly_stats", "arguments": arguments}], "final": 21.7})


def episode(arguments: dict, tools: list | None = TOOLS) -> WorkflowOutput:
    return WorkflowOutput(answer="The mean daily high was 21.7.", metadata={"tools": tools} if tools else {},
                          tool_calls=[{"name": "monthly_stats", "arguments": arguments}])


def test_without_defaults_by_hand():
    calls = [Call("monthly_stats", {"station_id": "KSFO", "month": 8, "stat": "MEAN", "hourly": False,
                                    "station_type": None}),
             Call("monthly_stats", {"station_id": "KSFO", "month": "8", "stat": "max", "hourly": True}),
             Call("unknown_tool", {"stat": "mean"})]
    assert [c.arguments for c in without_defaults(calls, SPECS)] == [
        {"station_id": "KSFO", "month": 8},  # 'MEAN' is the default compared leniently; False and None too
        {"station_id": "KSFO", "month": "8", "stat": "max", "hourly": True},  # not defaults: kept
        {"stat": "mean"},  # a tool the specs do not name: as sent
    ]
    assert without_defaults(calls, None) is calls


async def test_a_reference_that_spells_the_default_matches_a_call_that_leaves_it_out():
    task = reference(station_id="KSFO", month=8, stat="mean")
    reward = await ToolReferenceJudge().score(task, episode({"station_id": "KSFO", "month": 8}))
    assert reward.parts["arg_values"] == 1.0 and reward.parts["arg_names"] == 1.0
    assert reward.is_success and reward.total == pytest.approx(1.0)
    # and the other way round: the model spells the default the reference leaves out
    reward = await ToolReferenceJudge().score(reference(station_id="KSFO", month=8),
                                              episode({"station_id": "KSFO", "month": 8, "hourly": False}))
    assert reward.is_success


async def test_a_value_other_than_the_default_still_differs():
    # gold {station_id, month} once 'mean' is left out; the call keeps stat=max:
    # pairs 3 sent, 2 wanted, 2 matched -> F1 = 2 * 2 / (3 + 2) = 0.8
    reward = await ToolReferenceJudge().score(reference(station_id="KSFO", month=8, stat="mean"),
                                              episode({"station_id": "KSFO", "month": 8, "stat": "max"}))
    assert reward.parts["arg_values"] == pytest.approx(0.8) and not reward.is_success


async def test_without_the_tool_specs_calls_compare_as_sent():
    # no metadata.tools on the episode or the task: the default is unknown, so 2 of 3 gold pairs -> 0.8
    reward = await ToolReferenceJudge().score(reference(station_id="KSFO", month=8, stat="mean"),
                                              episode({"station_id": "KSFO", "month": 8}, tools=None))
    assert reward.parts["arg_values"] == pytest.approx(0.8) and not reward.is_success


async def test_a_turn_that_spells_the_default_is_a_right_turn():
    messages = [{"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {
                    "name": "monthly_stats", "arguments": '{"station_id": "KSFO", "month": 8, "stat": "Mean"}'}}]},
                {"role": "tool", "content": "21.7"},
                {"role": "assistant", "content": "The mean daily high was 21.7."}]
    output = WorkflowOutput(answer="The mean daily high was 21.7.", messages=messages, metadata={"tools": TOOLS})
    reward = await ToolReferenceJudge().score(reference(station_id="KSFO", month=8), output)
    assert reward.turn_rewards == [1.0, 1.0] and reward.is_success


async def test_function_call_judge_param_f1_ignores_a_default_on_one_side():
    task = Task(task_id="t", query="q", answer=[{"name": "monthly_stats",
                                                 "arguments": {"station_id": "KSFO", "month": 8, "stat": "mean"}}])
    reward = await FunctionCallJudge().score(task, episode({"station_id": "KSFO", "month": 8}))
    assert reward.parts["param_f1"] == 1.0 and reward.parts["schema_hit_rate"] == 1.0


@pytest.mark.parametrize("arguments, same", [
    ('{"station_id": "KSFO", "month": 8, "stat": "mean"}', True),  # spells the default the gold leaves out
    ('{"station_id": "KSFO", "month": 8}', True),
    ('{"station_id": "KSFO", "month": 8, "stat": "max"}', False),
])
async def test_the_round_trip_counts_a_default_as_the_judges_do(llm, arguments, same):
    # a hosted teacher (the scripted OpenAI server over real HTTP) answers with one call of these arguments
    llm.respond = lambda request: {"content": "", "tool_calls": [("monthly_stats", arguments)]}
    cfg = load_config(Path(__file__).parents[2] / "tutorial/example_mcp_pipeline/pipeline.yaml",
                      [f"generate.teacher={{base_url: '{llm.base_url}'}}"])
    gold = {"tool": "monthly_stats", "arguments": {"station_id": "KSFO", "month": 8}}
    async with open_endpoint(cfg, endpoint_of(cfg, "teacher")) as teacher:
        assert await round_trip(cfg, teacher, "q", TOOLS, gold, self_served=False) is same
