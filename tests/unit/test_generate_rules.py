"""The generator's general rules, each on a small MCP server written for its test (never a zoo server):
values named in plain sight are tried, a format is a recipe for values, calls that say nothing and
values that change are never references, echoed arguments make no chain, the budget is shared fairly,
ids are varied when few are known, questions never name a bare boolean, a thing as the asker, a
description or a default, labelled text results give tasks, and a megabyte of description is cheap."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ajet.config.loader import load_config
from ajet.generate import natural, phrasing
from ajet.generate.call_tasks import generate_call_tasks
from ajet.generate.candidates import answer_paths, candidates
from ajet.generate.demos import generate_demos
from ajet.generate.explore import explore_server
from ajet.generate.explore_values import arg_specs
from ajet.jsonl import read_rows
from ajet.generate.result_data import changed_paths, says_nothing, structured, volatile_paths
from ajet.generate.schedule import MIN_REFUSED
from ajet.generate.text_values import description_values, format_values, hint_items, hint_values, pattern_values

REPO = Path(__file__).resolve().parents[2]
HEADER = "from fastmcp import FastMCP\nmcp = FastMCP('t')\n"


def server(tmp_path: Path, body: str, name: str = "server.py") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def conf(tmp_path: Path, path: Path, extra: str = "") -> Path:
    yaml = tmp_path / "gen.yaml"
    yaml.write_text("defaults:\n  - workflow: mcp_agent\najet:\n  workflow_args:\n"
                    f"    server: {path}\n  generate:\n    tasks: {{phrasing: template, round_trip: false}}\n"
                    f"    demos: {{final_sentence: template}}\n{extra}")
    return yaml


async def explore(tmp_path: Path, body: str, *overrides: str) -> tuple[object, list[dict], list[dict], Path]:
    yaml = conf(tmp_path, server(tmp_path, body))
    out = tmp_path / "calls.jsonl"
    report = await explore_server(load_config(yaml, list(overrides)), out)
    return report, read_rows(out), read_rows(out.with_name(out.name + ".dropped.jsonl")), yaml


async def tasks_of(yaml: Path, tmp_path: Path, n: int = 60) -> list[dict]:
    out = tmp_path / "tasks.jsonl"
    await generate_call_tasks(load_config(yaml), tmp_path / "calls.jsonl", n, out)
    return read_rows(out)


# ----------------------------------------------------------------------- values in plain sight


PLAIN_SIGHT = '''
    @mcp.tool
    def item_stock(item_id: str) -> dict:
        """Units in stock of an item. Item ids look like X-1234."""
        return {"units": 7} if item_id == "X-1234" else {"error": "unknown item"}

    @mcp.tool
    def opening_hours(date: str) -> dict:
        """Opening hours on a date. The shop opens on 2027-03-01 and 2027-03-02 only."""
        if date not in ("2027-03-01", "2027-03-02"):
            return {"error": "closed"}
        return {"opens": "09:00", "closes": "17:30" if date.endswith("1") else "13:00"}

    @mcp.tool
    def customer_balance(customer_id: str) -> dict:
        """The balance of a customer (like 'C-17'), in EUR."""
        return {"balance_eur": 12.5} if customer_id == "C-17" else {"error": "no such customer"}

    @mcp.tool
    def set_reminder(time: str, text: str = "call back") -> dict:
        """Set a reminder."""
        import re
        if not re.fullmatch(r"([01][0-9]|2[0-3]):[0-5][0-9]", time):
            return {"error": "Invalid time format. Expected HH:MM [24-hour format]"}
        return {"reminder_id": "R-" + time.replace(":", ""), "at": time}
'''


async def test_values_in_plain_sight_are_tried_and_a_format_is_a_recipe_for_values(tmp_path):
    report, kept, dropped, _ = await explore(tmp_path, PLAIN_SIGHT)
    assert report.no_working_call == {}
    by_tool = {}
    for row in kept:
        by_tool.setdefault(row["tool"], []).append(row)
    # a bare id in the tool's description, dates it names, a quoted example after "like"
    assert {r["arguments"]["item_id"] for r in by_tool["item_stock"]} == {"X-1234"}
    assert {r["arguments"]["date"] for r in by_tool["opening_hours"]} == {"2027-03-01", "2027-03-02"}
    assert {r["arguments"]["customer_id"] for r in by_tool["customer_balance"]} == {"C-17"}
    # the error's format made valid times; the format's own text was never sent as a value
    times = {r["arguments"]["time"] for r in by_tool["set_reminder"]}
    assert times and all(len(t) == 5 and t[2] == ":" for t in times)
    sent = [json.dumps(r["arguments"]) for r in kept + dropped]
    assert not [s for s in sent if "MM [" in s or "24-hour" in s]
    # a generic date is not tried when the description names real ones
    assert "2025-06-02" not in {r["arguments"].get("date") for r in dropped}


def test_description_spellings_and_formats():
    (item,) = arg_specs({"properties": {"item_id": {"type": "string"}}})
    assert [v.value for v in description_values(item, "An item, e.g. X-1234 or X-1299.", [item])] == [
        "X-1234", "X-1299"]
    assert [v.value for v in description_values(item, "Ids such as 'AB-12'.", [item])] == ["AB-12"]
    (date,) = arg_specs({"properties": {"date": {"type": "string", "format": "date"}}})
    assert [v.value for v in description_values(date, "Data between 2026-01-05 and 2026-01-09.", [date])][:2] == [
        "2026-01-05", "2026-01-09"]
    (when,) = arg_specs({"properties": {"time": {"type": "string", "description": "Time, HH:MM (24-hour)"}}})
    assert {v.value for v in description_values(when, "", [when])} == {"09:30", "16:45", "21:05"}
    assert hint_items("Invalid time format. Expected HH:MM [24-hour format]") == []
    assert {v.value for v in hint_values("Invalid time format. Expected HH:MM [24-hour format]", when)} == {
        "09:30", "16:45", "21:05"}
    assert pattern_values(r"^[A-Z]{2}-\d{4}$") == ["AB-0123", "BC-1234"]
    assert pattern_values(r"^(a|b)+$") == []  # richer than a few atoms: left to descriptions and errors
    (code,) = arg_specs({"properties": {"code": {"type": "string", "pattern": r"^\d{3}$"}}})
    assert [v.value for v in format_values(code)] == ["012", "123"]


def test_a_megabyte_of_text_costs_milliseconds():
    """The backtracking regexes took 1.4 s at 8,000 characters and over 15 minutes at 1 MB."""
    huge = ("word " * 200_000) + "head price"
    (item,) = arg_specs({"properties": {"item_id": {"type": "string"}}})
    started = time.perf_counter()
    description_values(item, huge, [item])
    hint_items(huge)
    step = {"id": "c1", "tool": "t", "arguments": {"item_id": "X-12"}, "result": {"price": 4.5},
            "description": huge, "inputs_from": []}
    natural.families([step], ["price"], 4.5, {"item_id": "X-12"}, "price", {}, random.Random(0))
    natural.families([step], ["price"], 4.5, {"item_id": "X-12"}, "price", {}, random.Random(0))
    assert time.perf_counter() - started < 1.0


async def test_a_megabyte_description_explores_and_phrases_without_hanging(tmp_path):
    body = f'''
    @mcp.tool(description={("Price " + "of goods " * 120_000) + "in a city, e.g. Lisbon."!r})
    def price(city: str) -> dict:
        return {{"price_eur": 2.5 if city == "Lisbon" else 3.0}}
    '''
    started = time.perf_counter()
    report, kept, _, yaml = await explore(tmp_path, body)
    rows = await tasks_of(yaml, tmp_path, 5)
    assert kept and rows and time.perf_counter() - started < 30


# ----------------------------------------------------------------------- what a result says


def test_says_nothing_and_changed_paths_by_hand():
    assert says_nothing({"customer_id": "USD", "orders": []}, {"customer_id": "USD"})
    assert says_nothing({"results": [], "count": 0, "found": False}, {"q": "x"})
    assert says_nothing("No results found.", {}) and says_nothing([], {}) and says_nothing({}, {})
    assert not says_nothing({"sku": "B-2", "units": 0}, {"sku": "B-2"})  # a real zero: out of stock
    assert not says_nothing({"available": False}, {"isbn": "1"})
    assert not says_nothing("Balance: 12.50 EUR", {})
    assert changed_paths({"a": 1, "t": "10:01"}, {"a": 1, "t": "10:02"}) == [("t",)]
    assert changed_paths({"a": [1, 2]}, {"a": [1]}) == [()]
    assert changed_paths("same", "same") == [] and changed_paths("x", "y") == [()]
    # every date beside a clock reading counts, even one that never changes (an opening day): two calls a
    # second apart cannot tell them apart, and a reference lost is cheaper than one wrong tomorrow
    now = datetime(2027, 5, 1, 10, 1, 30, tzinfo=timezone.utc)
    reading = {"now": "2027-05-01T10:01:00", "weekday": "Saturday", "office": {"opened": "2020-01-06"}, "zone": "UTC"}
    assert volatile_paths(reading, reading, now) == [("now",), ("weekday",), ("office", "opened")]
    # a price that changed is no clock: the dates beside it stay references
    assert volatile_paths({"price": "12.5", "day": "2027-05-01"}, {"price": "13.0", "day": "2027-05-01"}, now) == [("price",)]
    assert volatile_paths({"price": "12.5"}, None, now) == [()]  # the repeat failed: nothing of it is a reference
    # the wall clock read in any zone, even when a repeat a second later read the same second
    tokyo = now.astimezone(timezone(timedelta(hours=9)))
    result = {"datetime": tokyo.isoformat(), "opened": "2020-01-06T09:00:00+09:00", "zone": "Asia/Tokyo",
              "local": (now + timedelta(hours=5, minutes=30)).replace(tzinfo=None).isoformat(),
              "stamp": int(now.timestamp()), "count": 12}
    assert volatile_paths(result, result, now) == [("datetime",), ("local",), ("stamp",), ("opened",)]
    # a naive time seven minutes off the clock is a time of day, not a reading; nor is a date alone
    later = {"start": (now + timedelta(minutes=7)).replace(tzinfo=None).isoformat(), "day": "2027-05-01"}
    assert volatile_paths(later, later, now) == []


def test_labelled_text_is_data():
    text = "Commit: a1b2\nAuthor: Ada Lovelace\nDate: 2026-01-02\n\nCommit: c3d4\nAuthor: Grace Hopper\nDate: 2026-01-03"
    assert structured(text) == [{"Commit": "a1b2", "Author": "Ada Lovelace", "Date": "2026-01-02"},
                                {"Commit": "c3d4", "Author": "Grace Hopper", "Date": "2026-01-03"}]
    assert structured("Balance: 12.5\nCurrency: EUR") == {"Balance": 12.5, "Currency": "EUR"}
    assert structured("See https://example.com for more") == "See https://example.com for more"


NOTHING_AND_CHANGES = '''
    import itertools, random, time
    CUSTOMERS = {"C-17": "Ada Lovelace", "C-42": "Grace Hopper"}
    ticks = itertools.count()

    @mcp.tool
    def list_customers() -> list:
        """All customers: id and name."""
        return [{"id": k, "name": v} for k, v in CUSTOMERS.items()]

    @mcp.tool
    def customer_orders(customer_id: str) -> dict:
        """The orders of a customer; any id is accepted."""
        orders = [{"order_id": "O-55", "total_eur": 12.5}] if customer_id in CUSTOMERS else []
        return {"customer_id": customer_id, "orders": orders}

    @mcp.tool
    def find_note(text: str) -> str:
        """Search the notes."""
        return "No results found."

    @mcp.tool
    def server_clock() -> dict:
        """The server's time."""
        return {"time": f"10:{next(ticks):02d}:00", "zone": "UTC", "date": "2027-05-01", "weekday": "Saturday"}

    @mcp.tool
    def office_now() -> dict:
        """The office's date and time, to the minute (two calls a second apart mostly agree)."""
        import datetime
        now = datetime.datetime.now(datetime.timezone.utc)
        return {"now": now.strftime("%Y-%m-%dT%H:%M"), "weekday": now.strftime("%A"), "office": "Lisbon"}

    tips, tip_reads = ["Carry water.", "Tell someone your route."], itertools.count()

    @mcp.tool
    def hiking_tip() -> str:
        """A tip, at random (here: the same on two calls, then another, as a random pick can be)."""
        return f"Tip: {tips[next(tip_reads) // 2 % 2]}"

    @mcp.tool
    def live_quote(symbol: str = "ACME") -> dict:
        """A live share price, e.g. ACME."""
        return {"symbol": symbol, "price": round(random.uniform(10, 20), 4), "currency": "EUR"}
'''


async def test_calls_that_say_nothing_and_values_that_change_are_never_references(tmp_path):
    report, kept, dropped, yaml = await explore(tmp_path, NOTHING_AND_CHANGES)
    orders = [r for r in kept if r["tool"] == "customer_orders"]
    # only the real customers' orders are kept: a name or a letter sent as an id got an empty list
    assert orders and {r["arguments"]["customer_id"] for r in orders} <= {"C-17", "C-42"}
    nothing = [d for d in dropped if d["reason"] == "says_nothing"]
    assert {d["tool"] for d in nothing} >= {"find_note"} and "find_note" in report.no_working_call
    # each kept call was made again until it changed or three readings agreed; the clock's time and the
    # quote's price changed at once, the tip only at the third reading
    assert len(kept) < report.rechecks < 2 * len(kept)
    assert next(r for r in kept if r["tool"] == "hiking_tip")["volatile"] == [[]]
    clock = next(r for r in kept if r["tool"] == "server_clock")
    # its date and weekday did not change in a second, but they are a clock's reading too: wrong tomorrow
    assert clock["volatile"] == [["time"], ["date"], ["weekday"]]
    # a clock to the minute reads the same twice; it is still the clock, and its weekday with it
    office = next(r for r in kept if r["tool"] == "office_now")
    assert office["volatile"] == [["now"], ["weekday"]]
    quote = next(r for r in kept if r["tool"] == "live_quote")
    assert quote["volatile"] == [["price"]]
    rows = await tasks_of(yaml, tmp_path)
    finals = {json.dumps(t["answer"]["final"]) for t in rows}
    volatile = {json.dumps(r["result"][k]) for r in kept if r["tool"] == "server_clock" for k in ("time", "date", "weekday")} | {
        json.dumps(r["result"][k]) for r in kept if r["tool"] == "office_now" for k in ("now", "weekday")} | {
        json.dumps(r["result"]["price"]) for r in kept if r["tool"] == "live_quote"}
    assert rows and not finals & volatile
    # the stable part of a changing result still makes tasks: the quote's currency, the clock's zone
    assert {t["metadata"]["target"][-1] for t in rows if t["metadata"]["tools"] == ["live_quote"]} <= {"currency"}


ECHO = '''
    STOCK = {"X-1001": 4, "X-1002": 0, "X-1003": 9}

    @mcp.tool
    def list_items() -> list:
        """All item ids."""
        return [{"item_id": k, "label": f"Widget {i}"} for i, k in enumerate(STOCK)]

    @mcp.tool
    def item_stock(item_id: str) -> dict:
        """Units in stock of an item."""
        return {"item_id": item_id, "units": STOCK[item_id]} if item_id in STOCK else {"error": "unknown item"}

    @mcp.tool
    def item_price(item_id: str) -> dict:
        """Price of an item."""
        return {"item_id": item_id, "price_eur": 2.5} if item_id in STOCK else {"error": "unknown item"}
'''


async def test_an_echoed_argument_passes_nothing_so_it_makes_no_chain(tmp_path):
    _, kept, _, yaml = await explore(tmp_path, ECHO)
    by_id = {r["id"]: r for r in kept}
    # the price tool is fed ids from the list, never from the stock tool that only echoed them back
    sources = {by_id[link["call"]]["tool"] for r in kept for link in r["inputs_from"]}
    assert sources == {"list_items"}
    found = candidates(kept)
    assert not [c for c in found if c.tools[:2] in (["item_stock", "item_price"], ["item_price", "item_stock"])]
    # a chain that passes what the user gave is cut even when a bank records such a link
    stock, price = next(r for r in kept if r["tool"] == "item_stock"), next(r for r in kept if r["tool"] == "item_price")
    forged = {**price, "id": "c9999", "arguments": dict(stock["arguments"]),
              "inputs_from": [{"argument": "item_id", "call": stock["id"], "path": ["item_id"]}]}
    assert not [c for c in candidates([stock, forged]) if len(c.steps) > 1]


# ----------------------------------------------------------------------- the budget


def test_the_budget_is_shared_fairly_and_its_end_is_said(tmp_path):
    tools = "".join(f'''
    @mcp.tool
    def lookup_{i}(key: str) -> dict:
        """Lookup number {i}, e.g. K-{i:03d}."""
        return {{"value_{i}": {i} + 0.5}} if key == "K-{i:03d}" else {{"error": "unknown key"}}
    ''' for i in range(30))
    yaml = conf(tmp_path, server(tmp_path, tools))
    out = tmp_path / "calls.jsonl"
    run = subprocess.run([sys.executable, "-m", "ajet.cli", "generate", "explore", "--conf", str(yaml), "--out",
                          str(out), "generate.explore.max_calls=20"], capture_output=True, text=True, timeout=300,
                         cwd=REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    called = {r["tool"] for r in read_rows(out) + read_rows(out.with_name(out.name + ".dropped.jsonl"))}
    # 20 calls for 30 tools: 20 tools got one call each (none got two), 10 are named as never called
    assert len(called) == 20 and report["kept"] == 20 and len(report["not_tried"]) == 10
    assert set(report["not_tried"]) == {f"lookup_{i}" for i in range(30)} - called
    assert "the call budget ran out before 10 of 30 tools were called" in " ".join(run.stdout.split())


# ----------------------------------------------------------------------- one known id


ONE_ID = '''
    @mcp.tool
    def account_balance(account_id: str) -> dict:
        """The balance of an account, e.g. A-4471."""
        if account_id != "A-4471":
            return {"error": f"no account {account_id}"}
        return {"account_id": account_id, "balance_eur": 310.25, "overdraft_eur": 50.0}
'''


async def test_a_single_known_id_is_varied_and_refusals_teach_copying_it(tmp_path):
    report, kept, dropped, yaml = await explore(tmp_path, ONE_ID)
    refused = [d for d in dropped if d["reason"] == "refused_variant"]
    # one id known: five of the same shape tried, so that the data shows six (explore_variants._VARIANTS)
    assert len(refused) == 5 and {d["variant_of"] for d in refused} == {kept[0]["id"]}
    assert all(d["arguments"]["account_id"] != "A-4471" and len(d["arguments"]["account_id"]) == 6 for d in refused)
    assert all(d["content"] == json.dumps({"error": f"no account {d['arguments']['account_id']}"}, separators=(",", ":"))
               for d in refused)
    rows = await tasks_of(yaml, tmp_path, 20)
    refusals = [t for t in rows if t["metadata"].get("refused")]
    # some tasks name another id, at most refused_share of them (or MIN_REFUSED in a bank this small),
    # each answered with the server's refusal
    assert 0 < len(refusals) <= max(MIN_REFUSED, 0.1 * len(rows) + 1)
    for task in refusals:
        (call,) = task["answer"]["calls"]
        assert call["arguments"]["account_id"] in task["query"] and task["answer"]["final"] == call["arguments"][
            "account_id"]
    sft = tmp_path / "sft.jsonl"
    await generate_demos(load_config(yaml), tmp_path / "tasks.jsonl", sft)
    by_task = {r["task_id"]: r for r in read_rows(sft)}
    last = by_task[refusals[0]["task_id"]]["messages"][-1]["content"]
    assert "no account" in last and refusals[0]["answer"]["final"] in last


# ----------------------------------------------------------------------- questions


def test_only_people_who_ask_become_the_asker_and_defaults_are_never_asked_back():
    product = {"id": "c1", "tool": "product_price", "description": "The price of a product by its name.",
               "arguments": {"name": "Blue Kettle"}, "result": {"price_eur": 30.0}, "inputs_from": []}
    member = {"id": "c2", "tool": "member_fines", "description": "Fines of a library member by name.",
              "arguments": {"name": "Ana Ruiz"}, "result": {"fine_eur": 3.5}, "inputs_from": []}
    forms = natural.questions([product], ["price_eur"], 30.0, {"name": "Blue Kettle"}, "price eur", {},
                              random.Random(0))
    assert forms and not [q for q in forms if "I'm Blue Kettle" in q or "Blue Kettle wants" in q
                          or "This is Blue Kettle" in q]
    forms = natural.questions([member], ["fine_eur"], 3.5, {"name": "Ana Ruiz"}, "fine eur", {}, random.Random(0))
    assert [q for q in forms if q.startswith(("I'm Ana Ruiz", "This is Ana Ruiz"))]
    forecast = {"id": "c3", "tool": "forecast", "arguments": {"city": "Lisbon"}, "description": "Forecast.",
                "result": {"city": "Lisbon", "units": "metric", "high": 21.5}, "defaults": {"units": "metric"}}
    assert [path for path, _ in answer_paths(forecast)] == [["high"]]


async def test_records_nothing_names_make_no_question_and_labelled_text_makes_tasks(tmp_path):
    body = '''
    @mcp.tool
    def customer_card(customer_id: str) -> str:
        """A customer's card as text, e.g. C-17."""
        if customer_id != "C-17":
            return "Error: unknown customer"
        return "Name: Ada Lovelace\\nPoints: 1250\\nTier: gold"

    @mcp.tool
    def recent_payments(customer_id: str) -> dict:
        """A customer's last payments, e.g. C-17."""
        return {"payments": [{"amount_eur": 10.5}, {"amount_eur": 7.0}]} if customer_id == "C-17" else {"error": "no"}
    '''
    _, kept, _, yaml = await explore(tmp_path, body)
    rows = await tasks_of(yaml, tmp_path, 20)
    card = [t for t in rows if t["metadata"]["tools"] == ["customer_card"] and not t["metadata"].get("refused")]
    assert card and {t["answer"]["final"] for t in card} <= {"Ada Lovelace", 1250, "gold"}
    assert 1250 in {t["answer"]["final"] for t in card}
    # two payments, nothing names either: "the amount of C-17's payment" has no one answer; how many there are has
    payments = [t for t in rows if t["metadata"]["tools"] == ["recent_payments"] and not t["metadata"].get("refused")]
    assert payments and {tuple(t["metadata"]["target"]) for t in payments} == {("payments", "#")}
    assert {t["answer"]["final"] for t in payments} == {2}


def test_no_server_words_or_values_in_the_generator():
    """Rule 12 of STYLE.md: no string the generator's code uses names a value or key of the energy or
    library servers (docstrings and comments may cite them as examples)."""
    import ast

    words = ["Boston", "Texas", "Houston", "MMBtu", "therm", "Jane Austen", "Dune", "M-2041", "author"]
    for path in (REPO / "ajet" / "generate").glob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                   and isinstance(node.value, str) and id(node) not in docstrings]
        found = [w for w in words if any(w in text for text in strings)]
        assert not found, f"{path.name} names {found}"
