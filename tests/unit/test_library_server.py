"""The MCP pipeline's second server (tutorial/example_mcp_pipeline/library) and its 40 val tasks.

Every val task's gold calls run in order on the real server, in memory through ajet's own MCP client
(open_client + call_tool, as the mcp_agent workflow runs them): each must succeed, the ids a chain
passes on must come from an earlier result, and the last result must hold the task's final value.
Bad ids come back as plain error results that ajet.tool_results flags; no description gives an id away.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from ajet.config import load_config
from ajet.engine.factory import build_engine
from ajet.judge import build_judge
from ajet.rollout.stack import RolloutStack, load_tokenizer, settings_for
from ajet.task_reader import read_tasks
from ajet.tool_results import result_error
from ajet.workflow import WorkflowOutput
from ajet.mcp_client import call_tool, list_openai_tools, open_client
from tests.unit.mcp_http import http_mcp_server

DIR = Path(__file__).resolve().parents[2] / "tutorial" / "example_mcp_pipeline" / "library"
SERVER = str(DIR / "library_server.py")
VAL = [json.loads(line) for line in (DIR / "val.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
ID = re.compile(r"\b[MBL]-\d{4}\b")


def _at(result: Any, key: str) -> Any:
    for part in key.split("."):
        result = result[int(part)] if part.isdigit() else result[part]
    return result


def _values(result: Any) -> list[Any]:
    """Every leaf value of a JSON result."""
    if isinstance(result, dict):
        return [v for value in result.values() for v in _values(value)]
    if isinstance(result, list):
        return [v for value in result for v in _values(value)]
    return [result]


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    return str(got).casefold() == str(want).casefold()


def test_val_set_shape():
    assert len(VAL) == 40
    assert len({task["task_id"] for task in VAL}) == 40
    assert len({task["query"] for task in VAL}) == 40
    sizes = [task["metadata"]["num_calls"] for task in VAL]
    assert sizes == [len(task["answer"]["calls"]) for task in VAL]
    assert 14 <= sizes.count(1) <= 18 and set(sizes) == {1, 2, 3}  # ~40% single calls, the rest chains
    for task in VAL:  # every final is a number: the config's exact_match runs in number mode
        assert isinstance(task["answer"]["final"], (int, float)) and not isinstance(task["answer"]["final"], bool)


@pytest.mark.parametrize("task", VAL, ids=[task["task_id"] for task in VAL])
async def test_gold_calls_run_and_end_at_the_final_value(task):
    seen_ids: set[str] = set(ID.findall(task["query"]))  # ids the user gave
    async with open_client(SERVER) as client:
        for call in task["answer"]["calls"]:
            # A chain only passes on ids that the user gave or an earlier result returned.
            for value in call["arguments"].values():
                if isinstance(value, str) and ID.fullmatch(value):
                    assert value in seen_ids, f"{value} appears before any result returned it"
            outcome = await call_tool(client, call["name"], call["arguments"])
            assert outcome.error is None, outcome.content
            seen_ids |= set(ID.findall(outcome.content))
    final = task["answer"]["final"]
    assert _same(_at(outcome.result, task["metadata"]["result_key"]), final)
    assert any(_same(value, final) for value in _values(outcome.result))


@pytest.mark.parametrize("name, arguments, says", [
    ("get_loans", {"member_id": "M-1"}, "unknown member id 'M-1'; look it up with find_member"),
    ("get_book", {"book_id": "B-9999"}, "unknown book id 'B-9999'; find ids with search_books"),
    ("renew_quote", {"loan_id": "L-0000", "weeks": 1}, "unknown loan id 'L-0000'"),
    ("renew_quote", {"loan_id": "L-7310", "weeks": 6}, "weeks must be one of 1, 2, 3"),  # lists the valid values
    ("find_member", {"name": "Zed Nobody"}, "no member matches 'Zed Nobody'"),
    ("search_books", {"query": "cookbook"}, "no book matches 'cookbook'"),
])
async def test_bad_arguments_are_plain_error_results(name, arguments, says):
    async with open_client(SERVER) as client:
        outcome = await call_tool(client, name, arguments)
    assert says in outcome.result["error"]
    assert result_error(outcome.result) == outcome.error  # a plain result, flagged by ajet.tool_results
    assert says in result_error(outcome.content)  # and as the JSON text the model sees


async def test_no_description_gives_an_id_away():
    async with open_client(SERVER) as client:
        specs = await list_openai_tools(client)
    assert len(specs) == 5
    text = json.dumps(specs)
    assert not ID.search(text)
    assert not re.search(r"\b[MBL]-\d", text)


async def test_ids_are_found_by_name_and_case_insensitively():
    async with open_client(SERVER) as client:
        found = (await call_tool(client, "find_member", {"name": "ruiz"})).result
        loans = (await call_tool(client, "get_loans", {"member_id": "m-4472"})).result
        books = (await call_tool(client, "search_books", {"query": "j.r.r. tolkien"})).result
    assert [m["member_id"] for m in found["members"]] == ["M-2041", "M-3052"]  # two Ruizes
    assert loans == {"member_id": "M-4472", "name": "David Kowalski", "loans": [], "total_fine_usd": 0.0}
    assert result_error(loans) is None  # no loans is an answer, not an error
    assert [b["book_id"] for b in books["books"]] == ["B-1490"]


async def test_fines_are_capped_and_overdue_loans_renew_from_today():
    async with open_client(SERVER) as client:
        quote = (await call_tool(client, "renew_quote", {"loan_id": "L-6604", "weeks": 2})).result
    # due 2024-01-19, 56 days before 2024-03-15: 14.00 USD at 0.25 a day, capped at 10.00
    assert quote == {"loan_id": "L-6604", "title": "Middlemarch", "new_due": "2024-03-29",
                     "renewal_fee_usd": 1.0, "fine_usd": 10.0, "total_usd": 11.0}


async def test_wrong_type_is_an_mcp_error():
    async with open_client(SERVER) as client:
        outcome = await call_tool(client, "renew_quote", {"loan_id": "L-7310", "weeks": "two"})
    assert outcome.result is None and "valid integer" in outcome.error


def test_config_reads_val_only_for_eval():
    cfg = load_config(DIR / "library.yaml")
    val = read_tasks(cfg.task_reader, "val", cfg.base_dir)
    assert [task.task_id for task in val.tasks] == [task["task_id"] for task in VAL]
    assert val.tasks[0].answer == VAL[0]["answer"]
    assert Path(cfg.task_reader.train).name == "tasks.jsonl"  # training never reads val.jsonl


def _oracle(request: dict) -> dict:
    """A teacher that makes the task's gold calls one by one, then states the final value."""
    task = next(t for t in VAL if t["query"] == request["messages"][1]["content"])
    done = sum(1 for m in request["messages"] if m["role"] == "tool")
    calls = task["answer"]["calls"]
    if done < len(calls):
        return {"content": "", "tool_calls": [(calls[done]["name"], json.dumps(calls[done]["arguments"]))]}
    return {"content": f"It is {task['answer']['final']}."}


def _wrong_final(request: dict) -> dict:
    """The gold calls, then a wrong number."""
    reply = _oracle(request)
    return {"content": "It is 12345."} if "tool_calls" not in reply else reply


async def test_the_config_gives_full_marks_to_the_gold_calls_and_none_for_a_wrong_answer(llm, tmp_path):
    # The whole val set through the real workflow, server and judge, with a scripted chat endpoint
    # in place of the model: gold behaviour must score 1.0 on all 40 (within rollout.max_turns).
    cfg = load_config(DIR / "library.yaml", ["engine.type=chat_api", f"engine.base_url={llm.base_url}",
                                             f"output_dir={tmp_path}"])
    tasks = read_tasks(cfg.task_reader, "val", cfg.base_dir).tasks
    engine = build_engine(cfg)
    llm.respond = _oracle
    async with RolloutStack(cfg, engine, load_tokenizer(cfg, engine), tmp_path) as stack:
        batch = await stack.runner.run(tasks, settings_for(cfg, "val"), show_progress=False)
        assert [e.error for e in batch.episodes] == [None] * 40
        assert [e.reward.total for e in batch.episodes] == pytest.approx([1.0] * 40)
        assert sum(e.counters["tool_calls_parsed"] for e in batch.episodes) == 72  # 16 + 2*16 + 3*8
        llm.respond = _wrong_final
        wrong = await stack.runner.run(tasks[:2], settings_for(cfg, "val"), show_progress=False)
    assert [e.reward.total for e in wrong.episodes] == pytest.approx([0.5, 0.5])  # the calls, not the answer


@pytest.mark.parametrize("answer, correct", [
    ("Station Eleven came out in 2014.", 1.0),
    ("It was published in 2012.", 0.0),  # within the default 1%: the base model's guess once passed
])
async def test_the_answer_must_state_the_exact_number(answer, correct):
    cfg = load_config(DIR / "library.yaml")
    task = next(t for t in read_tasks(cfg.task_reader, "val", cfg.base_dir).tasks if t.answer["final"] == 2014)
    reward = await build_judge(cfg.judge, cfg.base_dir).score(task, WorkflowOutput(answer=answer))
    assert reward.parts["answer"] == correct



async def test_http_server_subprocess():
    with http_mcp_server("library_server.py", DIR) as url:
        async with open_client(url) as client:
            outcome = await call_tool(client, "get_book", {"book_id": "B-1042"})
    assert outcome.result["available"]["Hillcrest"] == 1
