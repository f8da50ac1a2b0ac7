"""Call-first tasks and demonstrations by construction, on the energy tutorial's real MCP server: a
call bank built from calls that really ran, chains along inputs_from, references taken from real
results, checked phrasing with a template fallback, the round trip (teacher played by a scripted
OpenAI server over real HTTP), resume, and demos whose tool messages are the server's own text."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.errors import GenerateError
from ajet.generate import phrasing
from ajet.generate.call_tasks import generate_call_tasks
from ajet.generate.candidates import answer_paths, candidates, other_sources
from ajet.generate.schedule import MIN_REFUSED, schedule, with_refusals
from ajet.generate.demos import generate_demos
from ajet.jsonl import read_rows
from ajet.judge.tool_reference import ToolReferenceJudge
from ajet.render import ChatRenderer
from ajet.trainer.sft_data import load_sft_samples
from ajet.workflow import Task, WorkflowOutput
from ajet.mcp_client import call_tool, open_client
from tests.unit.fake_openai import ScriptedOpenAI

ROOT = Path(__file__).resolve().parents[2]
PIPELINE_YAML = ROOT / "tutorial" / "example_mcp_pipeline" / "pipeline.yaml"
SERVER = ROOT / "tutorial" / "example_tool_agent" / "energy_server.py"


async def _bank(path: Path) -> list[dict]:
    """A small call bank in `ajet generate explore`'s format, from calls run on the real server."""
    rows: list[dict] = []
    async with open_client(str(SERVER)) as client:
        async def run(tool: str, args: dict, inputs_from: list | None = None) -> dict:
            outcome = await call_tool(client, tool, args)
            assert outcome.error is None, outcome.error
            row = {"id": f"c{len(rows):04d}", "tool": tool, "arguments": args, "content": outcome.content,
                   "result": outcome.result, "origin": {k: "description" for k in args}, "inputs_from": inputs_from or []}
            rows.append(row)
            return row

        for city in ("Boston", "Seattle", "Denver"):
            price = await run("get_gas_price", {"city": city})
            await run("convert_price", {"price": price["result"]["price_usd_per_mmbtu"], "from_unit": "MMBtu",
                                        "to_unit": "GJ"},
                      [{"argument": "price", "call": price["id"], "path": ["price_usd_per_mmbtu"]}])
        await run("get_pipeline_flow", {"pipeline": "Transco"})
        await run("get_production", {"state": "Texas", "year": 2021})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


@pytest.fixture
def bank(tmp_path) -> tuple[Path, list[dict]]:
    path = tmp_path / "calls.jsonl"
    return path, asyncio.run(_bank(path))


def test_answer_paths_skip_echoed_arguments_and_put_numbers_first(bank):
    _, rows = bank
    production = next(r for r in rows if r["tool"] == "get_production")
    paths = answer_paths(production)
    assert paths == [(["production_bcf"], 9730)]  # state and year are the call's own arguments
    flow = answer_paths(next(r for r in rows if r["tool"] == "get_pipeline_flow"))
    assert [p for p, _ in flow] == [["flow_mmcf_per_day"], ["capacity_mmcf_per_day"], ["utilization_percent"]]


def test_chains_follow_inputs_from_and_hide_the_passed_value(bank):
    _, rows = bank
    found = candidates(rows)
    chains = [c for c in found if len(c.steps) == 2]
    assert {tuple(c.tools) for c in chains} == {("get_gas_price", "convert_price")}
    seattle = next(c for c in chains if c.steps[0]["arguments"]["city"] == "Seattle" and c.path == ["converted_price"])
    assert seattle.value == pytest.approx(3.6017)
    # the user says the city and the unit wanted, never the intermediate price 3.8, nor the unit it came
    # in (MMBtu: get_gas_price's result names it, price_usd_per_mmbtu)
    assert seattle.mention() == {"city": "Seattle", "to_unit": "GJ"}
    assert 3.8 in seattle.hidden() and 3.6017 in seattle.hidden()
    assert phrasing.question_problem("What is the gas price of Seattle, 3.8, in MMBtu to GJ?",
                                     seattle.mention(), seattle.hidden(), ["get_gas_price"]) == "gives_away_a_value"
    assert phrasing.question_problem("What does gas cost in Seattle per GJ?", seattle.mention(), seattle.hidden(),
                                     []) is None
    assert phrasing.question_problem("What does gas cost in Seattle?", seattle.mention(), seattle.hidden(),
                                     []) == "misses_a_value"  # GJ is not said
    assert phrasing.question_problem("Use get_gas_price for Seattle, from MMBtu to GJ?", seattle.mention(),
                                     seattle.hidden(), ["get_gas_price"]) == "names_a_tool"


def test_a_writer_that_copies_its_request_back_wrote_no_question():
    """Qwen2.5-Coder-1.5B, asked for a question on the zoo's dev time server, returned its request's own
    lookup line once in 14; it gave every value, so only this check stops it."""
    mention = {"source_timezone": "Asia/Jakarta", "time": "16:45", "target_timezone": "Asia/Novosibirsk"}
    echoed = ("Lookup: Convert time between timezones (source_timezone = Asia/Jakarta, time = 16:45, "
              "target_timezone = Asia/Novosibirsk)")
    assert phrasing.question_problem(echoed, mention, [], ["convert_time"]) == "echoes_the_request"
    assert phrasing.question_problem("Convert the time Asia/Jakarta 16:45 to Asia/Novosibirsk? time=16:45", mention,
                                     [], []) == "echoes_the_request"
    assert phrasing.question_problem("What is 16:45 in Asia/Jakarta in Asia/Novosibirsk time?", mention, [],
                                     ["convert_time"]) is None
    prompt = phrasing.question_prompt([{"tool": "convert_time", "description": "Convert time between timezones",
                                        "arguments": mention}], "converted time", mention)
    assert all(label in prompt.casefold() for label in phrasing._REQUEST_LABELS)  # the labels are the prompt's


async def test_a_value_another_tool_also_returned_makes_a_chain_from_it_too():
    """Exploration fed convert_price from get_gas_price(Seattle); compare_prices(Boston, Seattle) returned
    the same 3.8 as `cheaper_price` (and as `price_b`), so "convert the cheaper one" is a chain as well,
    its question naming which of the comparison's prices it converts."""
    async with open_client(str(SERVER)) as client:
        async def run(call_id: str, tool: str, args: dict, inputs_from: list | None = None) -> dict:
            outcome = await call_tool(client, tool, args)
            assert outcome.error is None, outcome.error
            return {"id": call_id, "tool": tool, "arguments": args, "content": outcome.content,
                    "result": outcome.result, "origin": {}, "inputs_from": inputs_from or []}

        rows = [await run("c1", "get_gas_price", {"city": "Seattle"}),
                await run("c2", "convert_price", {"price": 3.8, "from_unit": "MMBtu", "to_unit": "GJ"},
                          [{"argument": "price", "call": "c1", "path": ["price_usd_per_mmbtu"]}]),
                await run("c3", "compare_prices", {"city_a": "Boston", "city_b": "Seattle"})]
    # as generate_call_tasks sets it: the unit of compare_prices' result is only in its description
    rows[2]["description"] = "Compare gas prices of two cities: difference = city_a - city_b (USD per MMBtu)."
    extra = other_sources(rows)
    assert [(e["id"], e["inputs_from"]) for e in extra] == [
        ("c2~c3", [{"argument": "price", "call": "c3", "path": ["cheaper_price"]}])]  # over price_b: more precise
    chains = {tuple(c.tools): c for c in candidates(rows) if len(c.steps) == 2 and c.path == ["converted_price"]}
    assert set(chains) == {("get_gas_price", "convert_price"), ("compare_prices", "convert_price")}
    compared = chains[("compare_prices", "convert_price")]
    assert compared.value == pytest.approx(3.6017)
    assert compared.mention() == {"city_a": "Boston", "city_b": "Seattle", "to_unit": "GJ"}
    assert 3.8 in compared.hidden()
    # the comparison returns three prices that fit `price`: the question says which one
    assert compared.field == "converted price of the cheaper price"
    assert chains[("get_gas_price", "convert_price")].field == "converted price"  # one price: nothing to say


def test_template_questions_always_pass_the_checks_and_the_schedule_spreads(bank):
    _, rows = bank
    found = candidates(rows)
    rng = random.Random(0)
    for cand in found:
        question = phrasing.plain_question(phrasing.field_name(cand.path), cand.mention(), rng)
        assert phrasing.question_problem(question, cand.mention(), cand.hidden(), ["get_gas_price"]) is None, question
    picked = schedule(list(found), 6, 0.5, rng)
    assert len(picked) == 6 and len({c.key for c in picked}) == 6
    # one task per single tool in turn (four tools), then a chain: never more chains from the price tool
    # than price questions that stop after it (ajet.generate.schedule)
    chains = [c for c in picked if len(c.steps) > 1]
    assert 0 < len(chains) <= sum(c.tools == ["get_gas_price"] for c in picked)
    assert all(not isinstance(c.value, str) for c in picked)  # numbers before labels


async def test_template_tasks_carry_references_and_resume(bank, tmp_path):
    calls, rows = bank
    out = tmp_path / "tasks.jsonl"
    cfg = load_config(PIPELINE_YAML, ["generate.tasks.phrasing=template", "generate.tasks.round_trip=false"])
    report = await generate_call_tasks(cfg, calls, 5, out)
    assert report.kept == 5 and report.phrasing == {"template": 5}
    tasks = read_rows(out)
    by_id = {r["id"]: r for r in rows}
    for task in tasks:
        gold = task["metadata"]["gold"]
        assert task["answer"]["calls"] == [{"name": g["name"], "arguments": g["arguments"]} for g in gold]
        # the reference value is what the last call really returned, at the recorded path
        last = json.loads(gold[-1]["content"])
        for key in task["metadata"]["target"]:
            last = last[key]
        assert last == task["answer"]["final"]
        ids = json.loads(task["metadata"]["candidate"])[0]
        assert [by_id[i]["content"] for i in ids] == [g["content"] for g in gold]
    again = await generate_call_tasks(cfg, calls, 8, out)
    assert again.resumed == 5 and again.kept == 3
    keys = [t["metadata"]["candidate"] for t in read_rows(out)]
    assert len(keys) == len(set(keys)) == 8


def _teacher(llm: ScriptedOpenAI, wrong_city: bool = False):
    """A hosted writer and teacher: writes a question that names every value it is asked to, and
    answers with the call the question asks for (or a wrong city)."""
    def respond(request: dict) -> dict:
        prompt = request["messages"][-1]["content"]
        if "tools" not in request:  # the question writer
            given = prompt.split("It must contain: ")[1].split(".\n")[0]
            return {"content": f"Could you look up {given} for me?"}
        question = prompt
        if "Seattle" in question and not wrong_city:
            args, name = {"city": "Seattle"}, "get_gas_price"
        else:
            args, name = {"city": "Boston" if not wrong_city else "Paris"}, "get_gas_price"
        return {"content": "", "tool_calls": [(name, json.dumps(args))]}
    llm.respond = respond


async def test_round_trip_keeps_only_questions_the_teacher_answers_with_the_gold_call(llm, bank, tmp_path):
    calls, _ = bank
    _teacher(llm)
    cfg = load_config(PIPELINE_YAML, [f"generate.teacher={{base_url: '{llm.base_url}'}}",
                                      "generate.tasks.chain_share=0", "generate.tasks.round_trip=true",
                                      "generate.tasks.phrasing=writer"])
    out = tmp_path / "tasks.jsonl"
    report = await generate_call_tasks(cfg, calls, 20, out)
    kept = read_rows(out)
    # the scripted teacher only ever calls get_gas_price: every kept task starts with that gold call
    assert kept and all(t["answer"]["calls"][0]["name"] == "get_gas_price" for t in kept)
    assert {t["answer"]["calls"][0]["arguments"]["city"] for t in kept} <= {"Seattle", "Boston"}
    assert report.dropped["round_trip_mismatch"] > 0
    assert report.kept + sum(report.dropped.values()) == len(read_rows(out)) + len(read_rows(out.with_name(out.name + ".dropped.jsonl")))
    writer_rows = [t for t in kept if t["metadata"]["phrasing"] == "writer"]
    assert writer_rows and all(t["query"].startswith("Could you look up") for t in writer_rows)
    _teacher(llm, wrong_city=True)
    with pytest.raises(GenerateError, match="round_trip_mismatch"):
        await generate_call_tasks(cfg, calls, 5, tmp_path / "none.jsonl")


async def test_demos_are_built_from_the_gold_calls_real_results(bank, tmp_path, tiny_tokenizer):
    calls, _ = bank
    tasks = tmp_path / "tasks.jsonl"
    cfg = load_config(PIPELINE_YAML, ["generate.tasks.phrasing=template", "generate.tasks.round_trip=false",
                                      "generate.demos.final_sentence=template"])
    await generate_call_tasks(cfg, calls, 6, tasks)
    out = tmp_path / "sft.jsonl"
    report = await generate_demos(cfg, tasks, out)
    assert report.built == report.kept == 6 and report.episodes == 0
    rows, task_rows = read_rows(out), {t["task_id"]: t for t in read_rows(tasks)}
    for row in rows:
        task = task_rows[row["task_id"]]
        messages = row["messages"]
        assert messages[0]["content"] == cfg.workflow_args["system_prompt"] and messages[1]["content"] == task["query"]
        tool_messages = [m["content"] for m in messages if m["role"] == "tool"]
        assert tool_messages == [g["content"] for g in task["metadata"]["gold"]]
        assert phrasing.mentions(task["answer"]["final"], messages[-1]["content"])
        assert {t["function"]["name"] for t in row["tools"]} >= {"get_gas_price", "convert_price"}
    samples, load = load_sft_samples(out, ChatRenderer(tiny_tokenizer))
    assert len(samples) == 6 and not load.skipped
    # the rows score perfectly with the decomposed judge: they are the reference, by construction
    judge = ToolReferenceJudge()
    for row in rows:
        task = task_rows[row["task_id"]]
        output = WorkflowOutput(answer=row["messages"][-1]["content"], messages=row["messages"])
        reward = await judge.score(Task(task_id=task["task_id"], query=task["query"], answer=task["answer"]), output)
        assert reward.is_success and reward.total == pytest.approx(1.0)


async def test_a_writer_whose_sentence_lacks_the_value_is_replaced_by_the_template(llm, bank, tmp_path):
    calls, _ = bank
    llm.respond = lambda request: {"content": "Prices are high in winter and 99.9 people agree."}
    tasks = tmp_path / "tasks.jsonl"
    cfg = load_config(PIPELINE_YAML, [f"generate.teacher={{base_url: '{llm.base_url}'}}",
                                      "generate.tasks.phrasing=template", "generate.tasks.round_trip=false",
                                      "generate.demos.final_sentence=teacher"])
    await generate_call_tasks(cfg, calls, 4, tasks)
    report = await generate_demos(cfg, tasks, tmp_path / "sft.jsonl")
    assert report.sentences["template"] == 4 and report.sentences["sentence_without_value"] == 4
    for row in read_rows(tmp_path / "sft.jsonl"):
        assert "99.9" not in row["messages"][-1]["content"]


def test_a_file_that_is_not_a_call_bank_is_a_clear_error(tmp_path):
    bad = tmp_path / "calls.jsonl"
    bad.write_text('{"query": "hello"}\n')
    cfg = load_config(PIPELINE_YAML, [])
    with pytest.raises(GenerateError, match="lack id/tool/arguments"):
        asyncio.run(generate_call_tasks(cfg, bad, 3, tmp_path / "t.jsonl"))
    with pytest.raises(GenerateError, match="holds no calls"):
        asyncio.run(generate_call_tasks(cfg, tmp_path / "missing.jsonl", 3, tmp_path / "t.jsonl"))


def _episode(calls: list[tuple[str, dict]], answer: str, parse_failures: int = 0) -> WorkflowOutput:
    return WorkflowOutput(answer=answer, tool_calls=[{"name": n, "arguments": a, "result": {"ok": 1}} for n, a in calls],
                          metadata={"ajet": {"tool_call_parse_failures": parse_failures}})


BOSTON = Task(task_id="t", query="What is the gas price in Boston?",
              answer={"calls": [{"name": "get_gas_price", "arguments": {"city": "Boston"}}], "final": 4.15})


@pytest.mark.parametrize("calls, answer, failures, parts, total, success", [
    # docs/judges.md's worked example: right tool and key, wrong city, wrong number
    ([("get_gas_price", {"city": "Seattle"})], "It costs 3.8 USD per MMBtu.", 0,
     {"format": 1, "tool_name": 1, "arg_names": 1, "arg_values": 0, "final": 0}, 0.45, False),
    ([("get_gas_price", {"city": "boston"})], "Gas in Boston costs 4.15 USD per MMBtu.", 0,
     {"format": 1, "tool_name": 1, "arg_names": 1, "arg_values": 1, "final": 1}, 1.0, True),
    # one malformed call, then the right one: format 1/2; 4.1 is more than 1% off 4.15
    ([("get_gas_price", {"city": "Boston"})], "About 4.1 USD.", 1,
     {"format": 0.5, "tool_name": 1, "arg_names": 1, "arg_values": 1, "final": 0}, 0.65, False),
    # a wrong key: arg_names 0 as well; the right number stated anyway is not a success
    ([("get_gas_price", {"town": "Boston"})], "4.15", 0,
     {"format": 1, "tool_name": 1, "arg_names": 0, "arg_values": 0, "final": 1}, 0.6, False),
    # no call at all
    ([], "I do not know.", 0, {"format": 0, "tool_name": 0, "arg_names": 0, "arg_values": 0, "final": 0}, 0.0, False),
])
async def test_tool_reference_parts_by_hand(calls, answer, failures, parts, total, success):
    reward = await ToolReferenceJudge().score(BOSTON, _episode(calls, answer, failures))
    assert reward.parts == pytest.approx(parts)
    assert reward.total == pytest.approx(total) and reward.is_success is success


async def test_tool_reference_without_a_reference_is_a_clear_error():
    from ajet.errors import JudgeError

    with pytest.raises(JudgeError, match="has no reference"):
        await ToolReferenceJudge().score(Task(task_id="q", query="hi", answer=None), _episode([], "x"))


def test_a_later_calls_argument_of_the_same_name_is_still_said_and_self_chains_are_skipped():
    first = {"id": "a", "tool": "convert_units", "arguments": {"value": 1, "from_unit": "MWh", "to_unit": "kWh"},
             "result": {"result": 1000.0}, "inputs_from": []}
    again = {"id": "b", "tool": "convert_units", "arguments": {"value": 1000.0, "from_unit": "kWh", "to_unit": "GJ"},
             "result": {"result": 3.6}, "inputs_from": [{"argument": "value", "call": "a", "path": ["result"]}]}
    cost = {"id": "c", "tool": "energy_cost", "arguments": {"amount": 1000.0, "to_unit": "USD"},
            "result": {"cost": 120.5}, "inputs_from": [{"argument": "amount", "call": "a", "path": ["result"]}]}
    found = candidates([first, again, cost])
    assert not [c for c in found if [s["id"] for s in c.steps] == ["a", "b"]]  # convert, then convert again
    chain = next(c for c in found if [s["id"] for s in c.steps] == ["a", "c"])
    assert chain.mention() == {"value": 1, "from_unit": "MWh", "to_unit": "kWh", "then to_unit": "USD"}
    question = phrasing.plain_question(phrasing.field_name(chain.path), chain.mention(), random.Random(0))
    assert "then to unit USD" in question and "1000" not in question


async def test_a_writer_that_returns_nothing_useful_falls_back_to_templates_counted(llm, bank, tmp_path):
    calls, _ = bank
    replies = iter(["", "Sure! Here is a question.", "What is it?"] * 10)
    llm.respond = lambda request: {"content": next(replies)}
    cfg = load_config(PIPELINE_YAML, [f"generate.teacher={{base_url: '{llm.base_url}'}}", "generate.tasks.phrasing=writer",
                                      "generate.tasks.round_trip=false"])
    llm.requests.clear()
    report = await generate_call_tasks(cfg, calls, 6, tmp_path / "tasks.jsonl")
    assert report.phrasing == {"template": 6}
    # every question the writer wrote fell back, with its reason (concurrent workers may write a few
    # more than the 6 kept)
    assert sum(report.writer_fallback.values()) == len(llm.requests) >= 6
    assert set(report.writer_fallback) <= {"too_short", "misses_a_value"}
    assert all(t["metadata"]["phrasing"] == "template" for t in read_rows(tmp_path / "tasks.jsonl"))


@pytest.mark.parametrize("name, value, phrase", [
    ("include_tax", True, "including tax"), ("include_tax", False, "excluding tax"),
    ("vegetarian", True, "with vegetarian"), ("is_refundable", False, "without refundable"),
])
def test_a_boolean_is_said_with_its_name_never_as_a_bare_yes(name, value, phrase):
    assert phrasing.flag_phrase(name, value) == phrase
    question = phrasing.plain_question("price usd", {"item_id": "X-17", name: value}, random.Random(0))
    assert phrase in question and " yes" not in question and " no " not in question
    assert phrasing.question_problem(question, {"item_id": "X-17", name: value}, [], []) is None
    # a question that says the bare word does not pass: it does not say which flag
    bare = "What is the price usd for X-17, yes?" if value else "What is the price usd for X-17, no?"
    assert phrasing.question_problem(bare, {"item_id": "X-17", name: value}, [], []) == "misses_a_value"
    assert phrase in phrasing.template_sentence("price usd", 4.5, {name: value})


def test_the_plain_question_never_pastes_a_tool_description():
    rng = random.Random(0)
    for _ in range(40):
        question = phrasing.plain_question("price usd", {"city": "Lisbon"}, rng)
        assert question.startswith(("What is", "Tell me", "Can you", "For Lisbon")), question


def test_field_names_keep_their_parent_object():
    assert phrasing.field_name(["available", "Oakwood"]) == "available oakwood"
    assert phrasing.field_name(["loans", 0, "fine_usd"]) == "fine usd"
    assert phrasing.field_name(["price_usd_per_mmbtu"]) == "price usd per mmbtu"
    assert phrasing.field_name([0]) == "result"


async def test_ids_a_wildcard_search_discovered_start_chains_from_a_real_search_on_the_library_server():
    """Exploration found M-2041 by the wildcard find_member("a") and fed it to get_loans; no task is
    written through a wildcard, so the chain is rebased on find_member("Ana Ruiz"), which returned the
    same id. A chain uses each tool once, never asks for what the user gave or an earlier call returned
    (M-2041's member id), and names which of several loans it is about (Ana has two)."""
    library = ROOT / "tutorial" / "example_mcp_pipeline" / "library" / "library_server.py"
    async with open_client(str(library)) as client:
        async def run(call_id: str, tool: str, args: dict, origin: str, inputs_from: list | None = None) -> dict:
            outcome = await call_tool(client, tool, args)
            assert outcome.error is None, outcome.error
            return {"id": call_id, "tool": tool, "arguments": args, "content": outcome.content,
                    "result": outcome.result, "origin": {k: origin for k in args}, "inputs_from": inputs_from or []}

        rows = [await run("w", "find_member", {"name": "a"}, "wildcard"),
                await run("l", "get_loans", {"member_id": "M-2041"}, "graph",
                          [{"argument": "member_id", "call": "w", "path": ["members", 0, "member_id"]}]),
                await run("f", "find_member", {"name": "Ana Ruiz"}, "graph",
                          [{"argument": "name", "call": "l", "path": ["name"]}]),
                await run("r", "renew_quote", {"loan_id": "L-7352", "weeks": 2}, "graph",
                          [{"argument": "loan_id", "call": "l", "path": ["loans", 1, "loan_id"]}])]
    found = candidates(rows)
    sequences = {tuple(c.tools) for c in found}
    assert ("find_member", "get_loans", "renew_quote") in sequences
    assert ("find_member", "get_loans") in sequences
    assert not [c for c in found if len(set(c.tools)) < len(c.tools)]  # get_loans → find_member → get_loans
    assert not [c for c in found if len(c.steps) > 1 and c.value == "M-2041"]  # "the member id of M-2041"
    renew = next(c for c in found if c.tools == ["find_member", "get_loans", "renew_quote"] and c.path == ["total_usd"])
    assert renew.mention() == {"name": "Ana Ruiz", "title": "Never Let Me Go", "weeks": 2}
    overdue = next(c for c in found if c.tools == ["find_member", "get_loans"] and c.path == ["loans", 0, "days_overdue"])
    assert overdue.mention() == {"name": "Ana Ruiz", "title": "Dune"} and overdue.value == 7
    # the one member find_member("Ana Ruiz") returned needs no label
    assert next(c for c in found if c.tools == ["find_member"] and c.path[-1] == "branch").mention() == {"name": "Ana Ruiz"}


def test_refusals_are_spread_through_the_plan_and_none_is_lost_when_they_outnumber_it():
    # a bank that knows one id makes a plan of a couple of tasks: every refusal up to MIN_REFUSED still goes in
    out = with_refusals(["a", "b"], [1, 2, 3, 4, 5], 0.1, random.Random(0))
    assert sorted(x for x in out if isinstance(x, str)) == ["a", "b"]
    assert len([x for x in out if isinstance(x, int)]) == MIN_REFUSED == 4
    assert out[0] == "a"  # a refusal follows a task, never opens the plan
    # a large plan: about the share, evenly spread (never two refusals side by side)
    plan = [f"t{i}" for i in range(90)]
    out = with_refusals(plan, list(range(20)), 0.1, random.Random(0))
    refused_at = [i for i, x in enumerate(out) if isinstance(x, int)]
    assert len(refused_at) == 10 and all(b - a > 5 for a, b in zip(refused_at, refused_at[1:]))


def test_a_chained_call_is_preceded_by_the_record_the_question_named():
    """The id passed from a list is written beside the name the question used, just before the call:
    in the result's own words where they stand side by side there (ids after names), else a sentence."""
    from ajet.generate.constructed import demo_messages, link_note
    from ajet.tool_results import ids_after_names

    rooms = json.dumps({"rooms": [{"room_id": "rm-101", "name": "Anchor"}, {"room_id": "rm-104", "name": "Dock"},
                                  {"room_id": "rm-203", "name": "Harbor View"}]})
    query = "Who booked harbor view on 2025-09-10?"
    call = {"room_id": "rm-203", "date": "2025-09-10"}
    assert link_note(query, call, [rooms]) == "Harbor View has room_id rm-203."
    assert link_note(query, call, [ids_after_names(rooms)]) == '"name": "Harbor View", "room_id": "rm-203"'
    # a value the user gave is not passed on; a record the question does not name is not guessed
    assert link_note("Who booked rm-203?", {"room_id": "rm-203"}, [rooms]) == ""
    assert link_note("Who booked the biggest room?", {"room_id": "rm-203"}, [rooms]) == ""
    # the same value in two named records is ambiguous: no line
    twins = json.dumps([{"id": "x-1", "name": "Dock"}, {"id": "x-1", "name": "Anchor"}])
    assert link_note("Dock or Anchor?", {"id": "x-1"}, [twins]) == ""
    # a value too long to write twice in one turn (a commit hash) gets no line
    long_id = "9d06e1e4611708c41e0a44da2cd592387f3a8ca3"
    assert link_note("Dock?", {"id": long_id}, [json.dumps([{"id": long_id, "name": "Dock"}])]) == ""
    # labelled-text results count as records too
    assert link_note("When did Fix typo land?", {"rev": "abc123"}, ["Commit: abc123\nMessage: Fix typo"]) == \
        "Fix typo has Commit abc123."
    task = Task(task_id="t", query=query, answer={"calls": [], "final": "Ada"}, metadata={"gold": [
        {"name": "list_rooms", "arguments": {}, "content": rooms},
        {"name": "get_bookings", "arguments": call, "content": "{}"}]})
    assistant = [m["content"] for m in demo_messages(task, "sys", "Ada booked it.", link_lines=True) if m["role"] == "assistant"]
    assert assistant == ["", "Harbor View has room_id rm-203.", "Ada booked it."]
    # off by default (the served layout): the turns are the calls alone, as before the lines existed
    plain = [m["content"] for m in demo_messages(task, "sys", "Ada booked it.") if m["role"] == "assistant"]
    assert plain == ["", "", "Ada booked it."]
    # a plan line opens the first turn only, the link line stays with the call it links
    planned = [m["content"] for m in demo_messages(task, "sys", "Ada booked it.", link_lines=True, plan_line=True)
               if m["role"] == "assistant"]
    assert planned == ["Plan: list_rooms, then get_bookings.", "Harbor View has room_id rm-203.", "Ada booked it."]


async def test_plan_lines_name_each_demo_call_in_order_and_the_rows_still_score_perfectly(bank, tmp_path, tiny_tokenizer):
    from ajet.generate.constructed import plan_note  # its wording is pinned by hand in the test above

    calls, _ = bank
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "sft.jsonl"
    cfg = load_config(PIPELINE_YAML, ["generate.tasks.phrasing=template", "generate.tasks.round_trip=false",
                                      "generate.demos.final_sentence=template", "generate.demos.plan_line=true"])
    await generate_call_tasks(cfg, calls, 8, tasks)
    await generate_demos(cfg, tasks, out)
    rows, task_rows = read_rows(out), {t["task_id"]: t for t in read_rows(tasks)}
    assert len(rows) == 8 and any(len(task_rows[r["task_id"]]["metadata"]["gold"]) > 1 for r in rows)
    judge = ToolReferenceJudge()
    for row in rows:
        task = task_rows[row["task_id"]]
        turns = [m for m in row["messages"] if m["role"] == "assistant"]
        names = [g["name"] for g in task["metadata"]["gold"]]
        assert turns[0]["content"] == plan_note(names) and all(not t["content"] for t in turns[1:-1])
        output = WorkflowOutput(answer=turns[-1]["content"], messages=row["messages"])
        reward = await judge.score(Task(task_id=task["task_id"], query=task["query"], answer=task["answer"]), output)
        assert reward.is_success
    samples, load = load_sft_samples(out, ChatRenderer(tiny_tokenizer))
    assert len(samples) == 8 and not load.skipped
