"""The built-in mcp_agent workflow on real MCP servers: in memory, stdio subprocess, streamable HTTP
subprocess, and an MCP config JSON naming two servers; the model is a scripted OpenAI server over
real HTTP. Tools that raise or hang, servers that do not start and bad workflow_args are checked."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ajet import Task, Tuner
from ajet.errors import ConfigError
from ajet.workflows.mcp_agent import McpAgent
from ajet.mcp_client import open_client, server_tools
from tests.unit.fake_openai import ScriptedOpenAI
from tests.unit.mcp_http import http_mcp_server

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
ENERGY = Path(__file__).resolve().parents[2] / "tutorial" / "example_tool_agent" / "energy_server.py"




def agent(**kwargs) -> McpAgent:
    workflow = McpAgent(**kwargs)
    workflow.base_dir = SERVERS
    return workflow


def tuner(llm: ScriptedOpenAI, max_turns: int | None = 6) -> Tuner:
    return Tuner(llm.base_url, "policy", issue_key=lambda a: f"key-{a}", max_turns=max_turns)


async def test_tool_errors_and_hangs_go_back_to_the_model(llm):
    llm.script = [
        {"content": "", "tool_calls": [("add", '{"a": 2, "b": 3}'), ("explode", '{"reason": "x"}')]},
        {"content": "", "tool_calls": [("hang", '{"seconds": 300}')]},
        {"content": "2 + 3 = 5."},
    ]
    started = time.monotonic()
    out = await agent(server="flaky_server.py", tool_timeout_s=5, first_tool_choice="required").execute(
        Task(task_id="t", query="add 2 and 3"), tuner(llm))
    assert time.monotonic() - started < 120  # the hanging call was cut at 5 s, not waited for (300 s)
    assert out.tool_calls[0] == {"name": "add", "arguments": {"a": 2, "b": 3}, "result": 5}
    assert "boom: x" in out.tool_calls[1]["error"]
    assert out.tool_calls[2]["error"] == "tool 'hang' did not answer within 5 s"
    assert out.answer == "2 + 3 = 5." and out.metadata["stop_reason"] == "answered"
    assert out.metrics == {"llm_calls": 3.0, "tool_calls": 3.0, "tool_errors": 2.0, "tool_results_truncated": 0.0,
                           "tool_results_not_shown": 0.0}
    assert [r["tool_choice"] for r in llm.requests] == ["required", "auto", "auto"]
    sent = llm.requests[1]["messages"]
    assert sent[0]["content"].startswith("You are a helpful assistant with tools")
    assert [m["content"].split(":")[0] for m in sent if m["role"] == "tool"] == ["5", "Error"]


async def test_max_turns_is_the_smaller_of_workflow_args_and_rollout(llm):
    llm.script = [{"content": "", "tool_calls": [("add", '{"a": 1, "b": 1}')]}] * 3
    out = await agent(server="flaky_server.py", max_turns=2).execute(Task(task_id="t", query="q"), tuner(llm, 6))
    assert len(llm.requests) == 2 and out.metadata["stop_reason"] == "max_turns"


async def test_stdio_subprocess_server(llm):
    llm.script = [{"content": "", "tool_calls": [("add", '{"a": 40, "b": 2}')]}, {"content": "42"}]
    out = await agent(server="python flaky_server.py").execute(Task(task_id="t", query="q"), tuner(llm))
    assert out.tool_calls[0]["result"] == 42 and [t["function"]["name"] for t in out.metadata["tools"]] == [
        "add", "explode", "hang"]



async def test_streamable_http_server(llm):
    with http_mcp_server("flaky_server.py", SERVERS) as url:
        llm.script = [{"content": "", "tool_calls": [("add", '{"a": 1, "b": 2}')]}, {"content": "3"}]
        out = await agent(server=url).execute(Task(task_id="t", query="q"), tuner(llm))
    assert out.tool_calls[0]["result"] == 3


async def test_mcp_config_json_with_two_servers(llm, tmp_path):
    config = {"mcpServers": {"flaky": {"command": "python", "args": [str(SERVERS / "flaky_server.py")]},
                             "energy": {"command": "python", "args": [str(ENERGY)]}}}
    (tmp_path / "mcp_config.json").write_text(json.dumps(config))
    tools = await server_tools("mcp_config.json", tmp_path)
    names = [t["function"]["name"] for t in tools]
    assert "flaky_add" in names and "energy_get_gas_price" in names and len(names) == 11
    llm.script = [{"content": "", "tool_calls": [("energy_get_gas_price", '{"city": "Boston"}')]}, {"content": "4.15"}]
    workflow = McpAgent(server="mcp_config.json")
    workflow.base_dir = tmp_path
    out = await workflow.execute(Task(task_id="t", query="q"), tuner(llm))
    assert out.tool_calls[0]["result"]["price_usd_per_mmbtu"] == 4.15


async def test_servers_that_do_not_start_are_clear_errors(tmp_path, llm):
    with pytest.raises(ConfigError, match=r"the MCP server 'python missing_server.py' did not start or answer"):
        await server_tools("python missing_server.py", tmp_path, timeout_s=30)
    with pytest.raises(ConfigError, match="MCP server file .*nope.py' does not exist"):
        open_client("nope.py", tmp_path)
    (tmp_path / "plain.py").write_text("x = 1\n")
    with pytest.raises(ConfigError, match="defines none fastmcp.FastMCP objects.*server: 'python plain.py'"):
        open_client("plain.py", tmp_path)
    (tmp_path / "bad.json").write_text('{"servers": {}}')
    with pytest.raises(ConfigError, match="has no 'mcpServers' object"):
        open_client("bad.json", tmp_path)
    # inside an episode the failure is an exception the rollout counts as a failed episode
    workflow = McpAgent(server="python missing_server.py")
    workflow.base_dir = tmp_path
    with pytest.raises(Exception):
        await workflow.execute(Task(task_id="t", query="q"), tuner(llm))


@pytest.mark.parametrize("kwargs, message", [
    ({}, "workflow_args.server is required by the mcp_agent workflow"),
    ({"server": "s.py", "sever": 1}, "workflow_args.sever: unknown argument of the mcp_agent workflow; did you mean 'server'?"),
    ({"server": "s.py", "max_turns": 0}, "workflow_args.max_turns = 0: Input should be greater than or equal to 1"),
    ({"server": "s.py", "first_tool_choice": "always"}, "workflow_args.first_tool_choice = 'always'"),
])
def test_bad_workflow_args(kwargs, message):
    with pytest.raises(ConfigError) as info:
        McpAgent(**kwargs)
    assert message in str(info.value)


# ------------------------------------------------------------------ results a model cannot use as-is


async def test_huge_image_and_error_shaped_results(llm):
    from tests.unit.mcp_servers.odd_results_server import HUGE_CHARS, PNG_BYTES

    llm.script = [
        {"content": "", "tool_calls": [("huge_report", "{}"), ("product_photo", "{}")]},
        {"content": "", "tool_calls": [("stock_of", '{"sku": "A-10"}'), ("nothing", "{}")]},
        {"content": "I could not find it."},
    ]
    out = await agent(server="odd_results_server.py", max_result_chars=2000).execute(
        Task(task_id="t", query="How many units of A-10?"), tuner(llm))
    tool_messages = [m["content"] for m in out.messages if m["role"] == "tool"]
    huge, photo, stock, nothing = tool_messages
    assert len(huge) < 2100 and huge.startswith("sku A-1001 stock 17 warehouse Denver\n")
    assert huge.endswith(f"\n... [truncated: {HUGE_CHARS:,} characters, showing the first 2,000]")
    assert photo == f"[image/png result: {PNG_BYTES:,} bytes, not shown]"
    assert stock == '{"error":"unknown sku A-10"}'  # shown as the tool wrote it, counted as an error
    assert nothing == ""
    # the records: what the model saw for the cut result; both result and error for error-shaped ones
    assert out.tool_calls[0] == {"name": "huge_report", "arguments": {}, "result": huge}
    assert out.tool_calls[1] == {"name": "product_photo", "arguments": {}, "result": photo}
    assert out.tool_calls[2] == {"name": "stock_of", "arguments": {"sku": "A-10"},
                                 "result": {"error": "unknown sku A-10"}, "error": "unknown sku A-10"}
    assert out.tool_calls[3] == {"name": "nothing", "arguments": {}, "result": "", "error": "empty result"}
    assert out.metrics == {"llm_calls": 3.0, "tool_calls": 4.0, "tool_errors": 2.0, "tool_results_truncated": 1.0,
                           "tool_results_not_shown": 1.0}
    assert out.metadata["stop_reason"] == "answered"
    assert len(json.dumps(llm.requests[1]).encode()) < 20_000  # not the 5 MB the tool returned


async def test_ids_after_names_shows_each_record_name_first_and_keeps_the_data(llm):
    script = [{"content": "", "tool_calls": [("list_customers", "{}")]}, {"content": "Ada is C-17."}]
    shown = []
    for reorder in (False, True):
        llm.script = list(script)
        out = await agent(server="shop_server.py", ids_after_names=reorder).execute(
            Task(task_id="t", query="Ada's id?"), tuner(llm))
        shown.append(next(m["content"] for m in out.messages if m["role"] == "tool"))
        assert out.tool_calls[0]["result"] == [{"id": "C-17", "name": "Ada Lovelace"}, {"id": "C-42", "name": "Grace Hopper"}]
    as_served, reordered = shown
    assert [list(r) for r in json.loads(as_served)] == [["id", "name"]] * 2
    assert [list(r) for r in json.loads(reordered)] == [["name", "id"]] * 2
    assert json.loads(reordered) == json.loads(as_served) and " " not in as_served.replace("Ada L", "").replace("Grace H", "")
    assert len(reordered) == len(as_served)  # laid out as served (compact)


async def test_audio_and_binary_resources_become_placeholders(llm):
    llm.script = [{"content": "", "tool_calls": [("voice_note", "{}"), ("manual_pdf", "{}")]}, {"content": "ok"}]
    out = await agent(server="odd_results_server.py").execute(Task(task_id="t", query="q"), tuner(llm))
    assert [m["content"] for m in out.messages if m["role"] == "tool"] == [
        "[audio/wav result: 1,000 bytes, not shown]", "[application/pdf result: 2,048 bytes, not shown]"]
    assert out.metrics["tool_results_not_shown"] == 2.0 and out.metrics["tool_errors"] == 0.0


@pytest.mark.parametrize("tool, shown, counts", [
    ("huge_report", "\n... [truncated: 5,000,000 characters, showing the first 8,000]",
     {"tool_errors": 0.0, "tool_results_truncated": 1.0, "tool_results_not_shown": 0.0}),
    ("product_photo", "[image/png result: 12,345 bytes, not shown]",
     {"tool_errors": 0.0, "tool_results_truncated": 0.0, "tool_results_not_shown": 1.0}),
    ("stock_of", '{"error":"unknown sku ',
     {"tool_errors": 1.0, "tool_results_truncated": 0.0, "tool_results_not_shown": 0.0}),
])
def test_odd_results_on_the_tiny_model_through_ajet_eval(tmp_path, tool, shown, counts):
    """`ajet eval` with the tiny model, its first call forced onto the server's only tool; the next LLM
    call gets the result as shown (a 5 MB result once made it a 413 and failed the episode)."""
    from ajet.cli import main

    server = f"python {SERVERS / 'odd_results_server.py'} --only {tool}"
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"query": "How many units of A-1001 are in stock?"}) + "\n")
    (tmp_path / "odd.yaml").write_text(
        "defaults:\n  - workflow: mcp_agent\najet:\n  model: {path: tiny-random}\n"
        f"  workflow_args: {{server: {json.dumps(server)}, first_tool_choice: required, parallel_tool_calls: false,"
        " max_turns: 2}\n"
        "  task_reader: {type: jsonl, train: tasks.jsonl, val: tasks.jsonl}\n  judge: {type: grounded}\n"
        "  rollout: {max_tokens_per_turn: 32}\n")
    assert main(["eval", "--conf", str(tmp_path / "odd.yaml"), f"output_dir={tmp_path / 'out'}"]) == 0
    (line,) = (tmp_path / "out" / "eval_episodes.jsonl").read_text().splitlines()
    episode = json.loads(line)
    assert episode["error"] is None and episode["metadata"]["stop_reason"] == "answered"
    assert [m["role"] for m in episode["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert shown in episode["messages"][3]["content"]
    assert episode["metrics"] == {"llm_calls": 2.0, "tool_calls": 1.0, **counts}
    assert episode["tool_calls"][0]["name"] == tool
