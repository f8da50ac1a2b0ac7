"""The tutorials' shipped data, their generators, the calculator, and both agents end to end.

The agents run against a small scripted OpenAI-compatible server over real HTTP on 127.0.0.1 (it
stands in for ajet's gateway, which would put a model behind the same protocol) and against the
real MCP server / calculator.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import fastmcp
import pytest
import yaml

from ajet import Task, Tuner, WorkflowOutput
from ajet.plugins import load_object
from tests.unit.fake_openai import ScriptedOpenAI

ROOT = Path(__file__).resolve().parents[2] / "tutorial"
ENERGY, MATH = ROOT / "example_tool_agent", ROOT / "example_math_agent"
MathAgent = load_object(f"{MATH / 'agent.py'}:MathAgent")  # puts the tutorial folder on sys.path
sys.path.insert(0, str(ENERGY))
import math_tools  # noqa: E402
from energy_server import mcp  # noqa: E402

from ajet import mcp_client as mcp_tools  # noqa: E402
from ajet.workflows.mcp_agent import McpAgent  # noqa: E402

ENERGY_ARGS = yaml.safe_load((ENERGY / "tool_agent.yaml").read_text())["ajet"]["workflow_args"]


def EnergyAgent(**overrides: Any) -> McpAgent:
    """The tutorial's agent: the built-in mcp_agent workflow with the tutorial YAML's workflow_args."""
    agent = McpAgent(**{**ENERGY_ARGS, **overrides})
    agent.base_dir = ENERGY  # what the loader sets: the YAML's folder
    return agent

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def energy() -> dict[str, list[dict]]:
    return {name: read_jsonl(ENERGY / f"{name}.jsonl") for name in ("train", "val", "sft", "sft_sharegpt")}


@pytest.fixture(scope="module")
def math_data() -> dict[str, list[dict]]:
    return {name: read_jsonl(MATH / f"{name}.jsonl") for name in ("train", "val", "heldout", "heldout2", "sft")}


# ---------------------------------------------------------------------------- energy data


def test_energy_tasks_shape_counts_and_disjoint_splits(energy):
    train, val = energy["train"], energy["val"]
    assert len(train) >= 60 and len(val) >= 30
    for row in train + val:
        assert set(row) == {"task_id", "query", "answer", "metadata"}
        assert isinstance(row["answer"]["final"], (int, float)) and row["answer"]["calls"]
        assert row["metadata"]["num_calls"] == len(row["answer"]["calls"])
    ids = [r["task_id"] for r in train + val]
    assert len(set(ids)) == len(ids)
    assert not {r["query"] for r in train} & {r["query"] for r in val}
    assert {r["metadata"]["category"] for r in train} == {r["metadata"]["category"] for r in val}
    assert sum(r["metadata"]["num_calls"] == 2 for r in train) >= 10  # two-call tasks are well represented


async def test_every_expected_call_runs_and_gives_final(energy):
    async with fastmcp.Client(mcp) as client:
        for row in energy["train"] + energy["val"]:
            results = []
            for call in row["answer"]["calls"]:
                outcome = await mcp_tools.call_tool(client, call["name"], call["arguments"])
                assert outcome.error is None, (row["task_id"], outcome.error)
                results.append(outcome.result)
            assert results[-1][row["metadata"]["result_key"]] == row["answer"]["final"], row["task_id"]
            if len(results) == 2:  # the second call converts the price the first one returned
                first_price = results[0].get("price_usd_per_mmbtu", results[0].get("cheaper_price"))
                assert row["answer"]["calls"][1]["arguments"]["price"] == first_price


async def test_sft_demonstrations_are_well_formed_and_match_train(energy):
    async with fastmcp.Client(mcp) as client:
        server_tools = await mcp_tools.list_openai_tools(client)
    assert len(energy["sft"]) == len(energy["train"])
    for demo, task in zip(energy["sft"], energy["train"]):
        assert demo["tools"] == server_tools
        messages = demo["messages"]
        assert [m["role"] for m in messages[:2]] == ["system", "user"]
        assert messages[1]["content"] == task["query"]
        calls, pending = [], set()
        for m in messages[2:-1]:
            if m["role"] == "assistant":
                assert m["content"] == "" and not pending
                for c in m["tool_calls"]:
                    assert c["type"] == "function"
                    calls.append({"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])})
                    pending.add(c["id"])
            else:
                assert m["role"] == "tool" and m["tool_call_id"] in pending
                pending.remove(m["tool_call_id"])
                json.loads(m["content"])  # the server's JSON result
        assert not pending and calls == task["answer"]["calls"]
        last = messages[-1]
        assert last["role"] == "assistant" and "tool_calls" not in last
        # exactly one number in the final sentence, and it is the expected answer
        assert [float(n) for n in NUMBER.findall(last["content"])] == [float(task["answer"]["final"])]


def test_sharegpt_demonstrations_mirror_the_openai_ones(energy):
    assert len(energy["sft_sharegpt"]) == len(energy["sft"])
    for share, demo in zip(energy["sft_sharegpt"], energy["sft"]):
        assert share["tools"] == [t["function"] for t in demo["tools"]]
        assert share["system"] == demo["messages"][0]["content"]
        expected = [{"from": "human", "value": demo["messages"][1]["content"]}]
        for m in demo["messages"][2:-1]:
            if m["role"] == "assistant":
                f = m["tool_calls"][0]["function"]
                expected.append({"from": "function_call",
                                 "value": json.dumps({"name": f["name"], "arguments": json.loads(f["arguments"])})})
            else:
                expected.append({"from": "observation", "value": m["content"]})
        expected.append({"from": "gpt", "value": demo["messages"][-1]["content"]})
        assert share["conversations"] == expected


@pytest.mark.parametrize("folder, files", [
    (ENERGY, ["train.jsonl", "val.jsonl", "heldout.jsonl", "sft.jsonl", "sft_sharegpt.jsonl"]),
    (MATH, ["train.jsonl", "val.jsonl", "heldout.jsonl", "heldout2.jsonl", "sft.jsonl"]),
])
def test_make_data_reproduces_the_shipped_files(folder, files, tmp_path):
    run = subprocess.run([sys.executable, "make_data.py", "--out", str(tmp_path)], cwd=folder,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    for name in files:
        assert (tmp_path / name).read_bytes() == (folder / name).read_bytes(), name


def test_heldout_tasks_ask_what_neither_train_nor_val_asks():
    # a task is its category (what is asked) and its calls (the arguments): a pipeline's flow and its
    # utilization come from the same call
    rows = {n: [json.loads(x) for x in (ENERGY / f"{n}.jsonl").read_text().splitlines()] for n in ("train", "val", "heldout")}
    calls = {n: {r["metadata"]["category"] + json.dumps(r["answer"]["calls"], sort_keys=True) for r in rows[n]}
             for n in rows}
    assert len(rows["heldout"]) == len(calls["heldout"]) == 128
    assert not calls["heldout"] & (calls["train"] | calls["val"])


# ---------------------------------------------------------------------------- math data and calculator


def test_math_tasks(math_data):
    train, val, heldout, heldout2 = (math_data[name] for name in ("train", "val", "heldout", "heldout2"))
    assert len(train) >= 60 and len(val) >= 30 and len(heldout) >= 100 and len(heldout2) >= 100
    queries = [{r["query"] for r in split} for split in (train, val, heldout, heldout2)]
    assert sum(map(len, queries)) == len(set().union(*queries)), "a problem is in two splits"
    for row in train + val + heldout + heldout2:
        assert type(row["answer"]) is int
        assert math_tools.evaluate(row["metadata"]["expression"]) == row["answer"]
    assert len(math_data["sft"]) >= 16
    for demo, task in zip(math_data["sft"], train):
        roles = [m["role"] for m in demo["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
        call = demo["messages"][2]["tool_calls"][0]
        assert demo["messages"][3]["tool_call_id"] == call["id"] and demo["messages"][3]["content"] == str(task["answer"])
        assert demo["messages"][4]["content"] == f"The answer is \\boxed{{{task['answer']}}}."


@pytest.mark.parametrize("expression, value", [
    ("7 * 6", 42), ("(3 + 4) * 12", 84), ("100 / 8", 12.5), ("96 / 4", 24), ("17 // 5", 3), ("17 % 5", 2),
    ("-2 ** 3", -8), ("2 ** -1", 0.5), ("1.5 + 2.5", 4),
])
def test_calculator_evaluates_arithmetic(expression, value):
    result = math_tools.evaluate(expression)
    assert result == value and type(result) is type(value)


@pytest.mark.parametrize("expression, message", [
    ("__import__('os').system('ls')", "only numbers"),
    ("x + 1", "only numbers, + - * / // % ** and parentheses are allowed, not 'x'"),
    ("'a' * 3", "only numbers"),
    ("True + 1", "only numbers"),
    ("2 ** 1000", "exponent 1000 is too large"),
    ("(10 ** 60) ** 2", "the result exceeds"),
    ("1 / 0", "division by zero"),
    ("(-8) ** 0.5", "not a real number"),
    ("3 +", "not an arithmetic expression"),
    ("1" * 201, "the limit is 200"),
    ("", "non-empty string"),
])
def test_calculator_refuses_everything_else(expression, message):
    with pytest.raises(math_tools.CalculatorError, match=re.escape(message)):
        math_tools.evaluate(expression)


def test_run_calculator_reports_bad_arguments():
    assert math_tools.run_calculator('{"expression": "12 * 7"}') == (
        "84", {"name": "calculator", "arguments": {"expression": "12 * 7"}, "result": 84})
    content, record = math_tools.run_calculator("{expression: 12}")
    assert content.startswith("Error: arguments are not valid JSON") and "result" not in record
    content, record = math_tools.run_calculator('{"expr": "1"}')
    assert record["error"] == 'arguments must be a JSON object like {"expression": "12 * 7"}'


# ---------------------------------------------------------------------------- agents over HTTP




def tuner_for(server: ScriptedOpenAI, max_turns: int | None = 4) -> Tuner:
    return Tuner(server.base_url, "policy", issue_key=lambda agent: f"key-{agent}", max_turns=max_turns)


async def test_energy_agent_runs_tools_and_answers(llm):
    llm.script = [
        {"content": "", "tool_calls": [("get_gas_price", '{"city": "Boston"}')]},
        {"content": "", "tool_calls": [("convert_price", '{"price": 4.15, "from_unit": "MMBtu"'),  # truncated JSON
                                       ("get_weather_demand", '{"city": "Gotham"}')]},
        {"content": "In Boston, gas costs 4.15 USD per MMBtu."},
    ]
    task = Task(task_id="t1", query="What is the gas price in Boston?")
    out = await EnergyAgent().execute(task, tuner_for(llm))
    assert isinstance(out, WorkflowOutput)
    assert out.answer == "In Boston, gas costs 4.15 USD per MMBtu."
    assert out.tool_calls[0] == {"name": "get_gas_price", "arguments": {"city": "Boston"}, "result": {
        "city": "Boston", "hub": "Algonquin Citygate", "price_usd_per_mmbtu": 4.15}}
    assert out.tool_calls[1]["error"].startswith("arguments are not valid JSON")
    assert "unknown city 'Gotham'" in out.tool_calls[2]["error"]
    assert len(out.tool_calls) == 3 and out.metadata["stop_reason"] == "answered"
    assert out.metrics == {"llm_calls": 3.0, "tool_calls": 3.0, "tool_errors": 2.0, "tool_results_truncated": 0.0,
                           "tool_results_not_shown": 0.0}
    # What the model was sent: the tools every time, the tool results fed back after each call.
    assert [r["model"] for r in llm.requests] == ["policy"] * 3
    assert llm.headers[0]["authorization"] == "Bearer key-assistant"
    assert all(len(r["tools"]) == 8 for r in llm.requests) and out.metadata["tools"] == llm.requests[0]["tools"]
    last = llm.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
    assert json.loads(last[3]["content"])["price_usd_per_mmbtu"] == 4.15 and last[3]["tool_call_id"] == "call_0"
    assert last[5]["content"].startswith("Error: arguments are not valid JSON")
    assert out.messages == last + [{"role": "assistant", "content": "In Boston, gas costs 4.15 USD per MMBtu."}]


async def test_energy_agent_stops_at_max_turns_and_on_refusal(llm):
    llm.script = [{"content": "", "tool_calls": [("get_storage_level", '{"region": "East"}')]}] * 2
    out = await EnergyAgent().execute(Task(task_id="t2", query="q"), tuner_for(llm, max_turns=2))
    assert len(llm.requests) == 2 and out.metadata["stop_reason"] == "max_turns" and out.answer == ""
    assert [c["result"]["percent_full"] for c in out.tool_calls] == [80.2, 80.2]

    llm.requests.clear()
    llm.script = [{"content": "", "tool_calls": [("get_storage_level", '{"region": "East"}')]}, "400"]
    out = await EnergyAgent().execute(Task(task_id="t3", query="q"), tuner_for(llm, max_turns=None))
    assert out.metadata["stop_reason"].startswith("llm_refused") and len(out.tool_calls) == 1


async def test_energy_agent_over_stdio_server(llm):
    llm.script = [{"content": "", "tool_calls": [("get_production", '{"state": "Texas", "year": 2021}')]},
                  {"content": "Texas produced 9730 Bcf."}]
    agent = EnergyAgent(server="python energy_server.py")
    out = await agent.execute(Task(task_id="t4", query="q"), tuner_for(llm))
    assert out.tool_calls[0]["result"]["production_bcf"] == 9730 and out.answer == "Texas produced 9730 Bcf."


async def test_energy_agent_episodes_run_concurrently(llm):
    cities = ["Denver", "Boston", "Seattle", "Dallas"]

    def respond(request):  # call the tool for the city in the query, then answer with its result
        last = request["messages"][-1]
        if last["role"] == "tool":
            return {"content": f"It costs {json.loads(last['content'])['price_usd_per_mmbtu']} USD per MMBtu."}
        return {"content": "", "tool_calls": [("get_gas_price", json.dumps({"city": last["content"]}))]}

    llm.respond = respond
    agent = EnergyAgent()  # one instance serves every episode: no per-episode state on self
    outs = await asyncio.gather(*(agent.execute(Task(task_id=c, query=c), tuner_for(llm)) for c in cities))
    assert [o.answer for o in outs] == [f"It costs {p} USD per MMBtu." for p in (2.55, 4.15, 3.8, 2.6)]
    assert [o.tool_calls[0]["arguments"]["city"] for o in outs] == cities and len(llm.requests) == 8


async def test_math_agent_uses_the_calculator_and_boxes_the_answer(llm):
    llm.script = [
        {"content": "", "tool_calls": [("calculator", '{"expression": "17 * 23"}'), ("abacus", '{"x": 1}')]},
        {"content": "", "tool_calls": [("calculator", '{"expression": "import os"}')]},
        {"content": "The answer is \\boxed{391}."},
    ]
    out = await MathAgent().execute(Task(task_id="m1", query="What is 17 times 23?", answer=391), tuner_for(llm))
    assert out.answer == "The answer is \\boxed{391}." and out.metadata["stop_reason"] == "answered"
    assert out.tool_calls[0] == {"name": "calculator", "arguments": {"expression": "17 * 23"}, "result": 391}
    assert out.tool_calls[1]["error"] == "unknown tool 'abacus'; the only tool is 'calculator'"
    assert out.tool_calls[2]["error"].startswith("not an arithmetic expression")
    assert llm.requests[0]["tools"] == [math_tools.CALCULATOR_SPEC]
    sent = llm.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[3] == {"role": "tool", "tool_call_id": "call_0", "content": "391"}


def test_sharegpt_and_openai_demonstrations_give_the_same_sft_tokens(energy, tiny_tokenizer):
    # the ShareGPT form keeps the system prompt in a top-level `system` key: it must not be lost
    from ajet.render import ChatRenderer
    from ajet.trainer.sft_data import parse_conversation

    renderer = ChatRenderer(tiny_tokenizer)
    for share, demo in list(zip(energy["sft_sharegpt"], energy["sft"]))[:5]:
        a, b = parse_conversation(share), parse_conversation(demo)
        assert a.messages[0] == {"role": "system", "content": demo["messages"][0]["content"]}
        assert (renderer.encode_conversation(a.messages, a.tools).token_ids
                == renderer.encode_conversation(b.messages, b.tools).token_ids)
