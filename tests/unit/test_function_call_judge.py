"""The function_call judge: every seed-003 metric against numbers worked out by hand.
The first case is the worked example of docs/judges.md."""

from __future__ import annotations

import pytest

from ajet.config.schema import JudgeConfig
from ajet.errors import ConfigError, JudgeError
from ajet.judge import build_judge
from ajet.judge.function_call import Call, schema_problem, values_match
from ajet.workflow import Task, WorkflowOutput

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_price",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["MMBtu", "therm"]}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_units",
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "number"}, "from": {"type": "string"}, "to": {"type": "string"}},
                "required": ["value", "from", "to"],
            },
        },
    },
]
EXPECTED = [
    {"name": "get_price", "arguments": {"city": "Boston", "unit": "MMBtu"}},
    {"name": "convert_units", "arguments": {"value": 3.2, "from": "MMBtu", "to": "therm"}},
]


def fc(**args):
    return build_judge(JudgeConfig(type="function_call", args=args))


def episode(calls, failures=0, **metadata) -> WorkflowOutput:
    return WorkflowOutput(
        answer="done",
        tool_calls=calls,
        metadata={"ajet": {"tool_call_parse_failures": failures, "tool_calls_parsed": len(calls)}, **metadata},
    )


def task(expected=EXPECTED, tools=TOOLS) -> Task:
    metadata = {"tools": tools} if tools is not None else {}
    return Task(task_id="t", query="q", answer={"calls": expected, "final": "x"}, metadata=metadata)


async def test_worked_example_from_the_docs():
    out = episode(
        [
            {"name": "get_price", "arguments": {"city": "boston", "unit": "MMBtu"}, "result": "3.2"},
            {"name": "convert_units", "arguments": '{"value": "3.2", "from": "MMBtu", "to": "kWh"}',
             "error": "unknown unit kWh"},
            {"name": "get_storage", "arguments": {"region": "east"}, "result": "ok"},
        ],
        failures=1,
    )
    reward = await fc().score(task(), out)
    parts = reward.parts
    assert parts["parse_rate"] == 0.75  # 3 parsed / (3 + 1 failure)
    assert parts["func_name_accuracy"] == pytest.approx(2 / 3)  # get_price, convert_units of max(3, 2)
    # pairs: 6 predicted, 5 expected; city (case), unit, value ("3.2" ~ 3.2), from match; to does not
    assert parts["param_f1"] == pytest.approx(8 / 11)  # 2*4 / (6+5)
    # call 1 fits; call 2 sends value as a string (schema: number); call 3 is not a known tool
    assert parts["schema_hit_rate"] == pytest.approx(1 / 3)
    assert parts["exec_rate"] == pytest.approx(2 / 3)  # call 2 raised
    # 0.1*0.75 + 0.3*2/3 + 0.3*8/11 + 0.1*1/3 + 0.2*2/3 = 0.659848...
    assert reward.total == pytest.approx(0.6598485, abs=1e-6)
    assert "call 2 'convert_units': parameter 'value' = '3.2' does not match number" in reward.feedback
    assert "call 3 'get_storage': not in the tool schema" in reward.feedback


async def test_perfect_episode_scores_one():
    out = episode([dict(c, result="ok") for c in EXPECTED])
    reward = await fc().score(task(), out)
    assert reward.parts == {"parse_rate": 1.0, "func_name_accuracy": 1.0, "param_f1": 1.0,
                            "schema_hit_rate": 1.0, "exec_rate": 1.0}
    assert reward.total == 1.0
    assert reward.feedback is None


async def test_order_of_calls_does_not_matter():
    out = episode(list(reversed(EXPECTED)))
    assert (await fc().score(task(), out)).total == 1.0


async def test_no_call_made_when_none_expected_is_perfect():
    reward = await fc().score(task(expected=[]), episode([]))
    assert reward.total == 1.0 and set(reward.parts.values()) == {1.0}


async def test_no_call_made_when_calls_expected_scores_zero():
    reward = await fc().score(task(), episode([]))
    assert reward.parts == {"parse_rate": 0.0, "func_name_accuracy": 0.0, "param_f1": 0.0,
                            "schema_hit_rate": 0.0, "exec_rate": 0.0}
    # only failed attempts: parse_rate 0 / (0 + 2)
    assert (await fc().score(task(), episode([], failures=2))).parts["parse_rate"] == 0.0


async def test_call_when_none_expected():
    reward = await fc().score(task(expected=[]), episode([EXPECTED[0]]))
    # names: overlap 0 / max(1, 0); pairs: 2 predicted, 0 expected -> 0; the call itself is well-formed
    assert reward.parts == {"parse_rate": 1.0, "func_name_accuracy": 0.0, "param_f1": 0.0,
                            "schema_hit_rate": 1.0, "exec_rate": 1.0}
    assert reward.total == pytest.approx(0.1 + 0.1 + 0.2)


async def test_repeated_call_counts_against_names_and_pairs():
    out = episode([EXPECTED[0], EXPECTED[0]])
    reward = await fc().score(task(expected=[EXPECTED[0]]), out)
    assert reward.parts["func_name_accuracy"] == 0.5  # multiset overlap 1 / max(2, 1)
    assert reward.parts["param_f1"] == pytest.approx(2 / 3)  # 2 hits, 4 predicted + 2 expected pairs: 4/6


async def test_calls_without_arguments_fall_back_to_names():
    tools = [{"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}]
    reward = await fc().score(task([{"name": "now", "arguments": {}}], tools), episode([{"name": "now"}]))
    assert reward.parts["param_f1"] == 1.0
    reward = await fc().score(task([{"name": "now"}, {"name": "now"}], tools), episode([{"name": "now"}]))
    assert reward.parts["param_f1"] == reward.parts["func_name_accuracy"] == 0.5


async def test_without_tool_schema_the_metric_is_left_out_and_weights_renormalised():
    out = episode([EXPECTED[0]])
    reward = await fc().score(task(tools=None), out)
    assert "schema_hit_rate" not in reward.parts
    # names 1/2, pairs 2*2/(2+5) = 4/7; total = (0.1*1 + 0.3*0.5 + 0.3*4/7 + 0.2*1) / 0.9
    assert reward.parts["param_f1"] == pytest.approx(4 / 7)
    assert reward.total == pytest.approx((0.1 + 0.15 + 0.3 * 4 / 7 + 0.2) / 0.9)


async def test_schema_sources_in_order_output_then_task_then_args():
    call = {"name": "ping", "arguments": {}}
    ping = [{"name": "ping", "parameters": {"type": "object", "properties": {}}}]  # bare (non-OpenAI) spec
    # the output's metadata wins over the task's
    reward = await fc().score(task([call], tools=TOOLS), episode([call], tools=ping))
    assert reward.parts["schema_hit_rate"] == 1.0
    reward = await fc().score(task([call], tools=TOOLS), episode([call]))
    assert reward.parts["schema_hit_rate"] == 0.0
    # MCP's inputSchema naming from the judge args when neither has tools
    mcp = [{"name": "ping", "inputSchema": {"type": "object", "properties": {}}}]
    reward = await fc(tools=mcp).score(task([call], tools=None), episode([call]))
    assert reward.parts["schema_hit_rate"] == 1.0


async def test_malformed_arguments_count_as_parse_failures():
    out = episode([EXPECTED[0], {"name": "convert_units", "arguments": "{value: 3"}, {"arguments": {}}])
    reward = await fc().score(task(), out)
    assert reward.parts["parse_rate"] == pytest.approx(1 / 3)  # 1 good, 2 malformed


async def test_calls_read_from_openai_messages_when_tool_calls_is_empty():
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_price",
                                                          "arguments": '{"city": "Boston", "unit": "MMBtu"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3.2"},
        {"role": "assistant", "content": "3.2"},
    ]
    reward = await fc().score(task(), WorkflowOutput(answer="3.2", messages=messages))
    assert reward.parts["func_name_accuracy"] == 0.5
    assert reward.parts["param_f1"] == pytest.approx(4 / 7)  # 2 hits: 2*2 / (2 + 5)


async def test_custom_weights_and_expected_key():
    t = Task(task_id="t", query="q", answer={"gold": [EXPECTED[0]]}, metadata={"tools": TOOLS})
    j = fc(expected_key="gold", weights={"parse_rate": 0, "schema_hit_rate": 0, "exec_rate": 0, "param_f1": 0})
    out = episode([EXPECTED[0], {"name": "get_storage", "arguments": {}}])
    assert (await j.score(t, out)).total == 0.5  # only func_name_accuracy: 1 / max(2, 1)
    t2 = Task(task_id="t2", query="q", answer=[EXPECTED[0]], metadata={"tools": TOOLS})  # a bare list
    assert (await fc().score(t2, episode([EXPECTED[0]]))).total == 1.0


async def test_task_without_expected_calls_is_a_judge_error():
    t = Task(task_id="t9", query="q", answer="just text")
    with pytest.raises(JudgeError, match="task 't9' has no expected calls"):
        await fc().score(t, episode([]))


def test_bad_args():
    with pytest.raises(ConfigError) as info:
        fc(weights={"parse_rat": 1.0})
    assert "judge.args.weights = {'parse_rat': 1.0}: unknown metric 'parse_rat'; did you mean 'parse_rate'?" in str(info.value)
    with pytest.raises(ConfigError, match="weight of 'exec_rate' is -1.0; weights must be >= 0"):
        fc(weights={"exec_rate": -1})
    with pytest.raises(ConfigError, match="all weights are 0"):
        fc(weights={m: 0 for m in ("parse_rate", "func_name_accuracy", "param_f1", "schema_hit_rate", "exec_rate")})
    with pytest.raises(ConfigError, match="judge.args.expected: unknown argument 'expected' .* did you mean 'expected_key'"):
        fc(expected="calls")


@pytest.mark.parametrize(
    "got, want, same",
    [
        ("Boston", " boston ", True),
        ("3.2", 3.2, True),
        (3, 3.0000001, True),  # within 1e-6 relative
        (3, 3.01, False),
        ("3.2", "3.20", False),  # two strings compare as text
        (True, 1, False),
        (True, True, True),
        ({"a": [1, "X"]}, {"a": [1.0, "x"]}, True),
        ([1, 2], [2, 1], False),
        (None, None, True),
    ],
)
def test_values_match(got, want, same):
    assert values_match(got, want) is same


@pytest.mark.parametrize(
    "arguments, problem",
    [
        ({"n": 5, "flag": True}, None),
        ({"n": 5.0}, None),  # 5.0 is an integer in JSON Schema
        ({"n": 5.5}, "parameter 'n' = 5.5 does not match integer"),
        ({"n": True}, "parameter 'n' = True does not match integer"),
        ({"flag": True}, "missing required parameter 'n'"),
        ({"n": 1, "extra": 1}, "unknown parameter 'extra'"),
        ({"n": 1, "tags": ["a"], "opt": None}, None),
        ({"n": 1, "tags": "a"}, "parameter 'tags' = 'a' does not match array"),
    ],
)
def test_schema_problem(arguments, problem):
    tools = {"f": {"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer"}, "flag": {"type": "boolean"}, "tags": {"type": "array"},
        "opt": {"type": ["string", "null"]}}}}
    assert schema_problem(Call("f", arguments), tools) == problem


def test_schema_additional_properties_allowed():
    tools = {"f": {"type": "object", "properties": {}, "additionalProperties": True}}
    assert schema_problem(Call("f", {"anything": 1}), tools) is None


async def test_exec_rate_counts_error_shaped_results():
    # docs/judges.md "Error-shaped results": four calls of the expected tool, two of them failed as
    # plain results (no MCP isError, no `error` key in the record)
    expected = [{"name": "get_price", "arguments": {"city": "Boston"}}]
    out = episode([
        {"name": "get_price", "arguments": {"city": "Boston"}, "result": {"price": 4.1}},  # ran
        {"name": "get_price", "arguments": {"city": "Boston"}, "result": {"error": "unknown sku"}},  # failed
        {"name": "get_price", "arguments": {"city": "Boston"}, "result": "Error: timeout"},  # failed
        {"name": "get_price", "arguments": {"city": "Boston"}, "result": []},  # ran: an empty list is an answer
    ])
    reward = await fc().score(task(expected), out)
    assert reward.parts["exec_rate"] == 0.5  # 2 / 4
    # the rest is unchanged: names 1/4, param_f1 2*1/(4+1), parse 1, schema 1
    # total = 0.1*1 + 0.3*0.25 + 0.3*0.4 + 0.1*1 + 0.2*0.5 = 0.495
    assert reward.total == pytest.approx(0.495, abs=1e-9)
    empty = episode([{"name": "get_price", "arguments": {"city": "Boston"}, "result": "  "},
                     {"name": "get_price", "arguments": {"city": "Boston"}, "result": None},
                     {"name": "get_price", "arguments": {"city": "Boston"}, "result": '{"error": "no such city"}'}])
    assert (await fc().score(task(expected), empty)).parts["exec_rate"] == 0.0  # empty, None, JSON text error
