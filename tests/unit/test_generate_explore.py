"""`ajet generate explore` on real MCP servers and real files, no model: the energy tutorial's server
(every tool gets working calls; cities from "e.g." and error hints, units from the tool description,
years from a range; a price chained from get_gas_price into convert_price; resume runs nothing
twice), a shop server whose ids must be discovered and whose errors are plain results, and a server
that refuses every call (a clear error with the counts)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.errors import GenerateError
from ajet.generate.explore import explore_server
from ajet.generate.explore_values import (ArgSpec, Leaf, arg_specs, feeds, generic_values, item_spec, leaves,
                                          probe_value, schema_values, shared_paths, tokens)
from ajet.generate.text_values import description_values, hint_items, hint_values, hinted_arguments, text_mentions
from ajet.jsonl import read_rows

REPO = Path(__file__).resolve().parents[2]
ENERGY_YAML = REPO / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
SHOP = Path(__file__).resolve().parent / "mcp_servers" / "shop_server.py"
LIBRARY = REPO / "tutorial" / "example_mcp_pipeline" / "library" / "library_server.py"
CITIES = {"Houston", "Dallas", "Chicago", "Denver", "Atlanta", "Philadelphia", "New York", "Boston", "Seattle",
          "Los Angeles"}
UNITS = {"MMBtu", "therm", "kWh", "MWh", "GJ", "Mcf"}
ENERGY_TOOLS = {"get_gas_price", "compare_prices", "get_storage_level", "get_pipeline_flow", "get_weather_demand",
                "get_production", "convert_units", "convert_price"}


def key(row: dict) -> str:
    return json.dumps([row["tool"], row["arguments"]], sort_keys=True)


def rows_of(out: Path) -> tuple[list[dict], list[dict]]:
    return read_rows(out), read_rows(out.with_name(out.name + ".dropped.jsonl"))


def server_yaml(tmp_path: Path, server: Path) -> Path:
    conf = tmp_path / "explore.yaml"
    conf.write_text(f"defaults:\n  - workflow: mcp_agent\najet:\n  workflow_args:\n    server: {server}\n")
    return conf


async def test_energy_server_every_tool_works_values_come_from_their_sources(tmp_path):
    out = tmp_path / "calls.jsonl"
    report = await explore_server(load_config(ENERGY_YAML), out)
    kept, dropped = rows_of(out)
    assert report.kept == len(kept) > 100 and report.calls == len(kept) + len(dropped)
    assert set(report.per_tool) == ENERGY_TOOLS and min(report.per_tool.values()) >= 5
    assert report.no_working_call == {} and report.wall_s < 30
    # Only the probes failed (one per free-text argument: 11), and no failed call is in the bank.
    assert dict(report.dropped) == {"probe": 11} and {d["reason"] for d in dropped} == {"probe"}
    assert not {key(d) for d in dropped} & {key(k) for k in kept}
    assert len({key(k) for k in kept}) == len(kept)
    assert [k["id"] for k in kept] == [f"c{i:04d}" for i in range(1, len(kept) + 1)]
    by_tool = {t: [k for k in kept if k["tool"] == t] for t in ENERGY_TOOLS}
    # Cities: Boston from "e.g. Boston", the other nine from "unknown city ...; known citys: ...".
    prices = by_tool["get_gas_price"]
    assert {k["arguments"]["city"] for k in prices} == CITIES
    assert {k["arguments"]["city"]: k["origin"]["city"] for k in prices}["Boston"] == "description"
    assert {k["origin"]["city"] for k in prices if k["arguments"]["city"] != "Boston"} == {"error_hint"}
    assert {a for k in by_tool["compare_prices"] for a in k["arguments"].values()} == CITIES
    # Regions from the argument's list, units from the tool description, years from "2019 to 2023".
    assert {k["arguments"]["region"] for k in by_tool["get_storage_level"]} == {
        "East", "Midwest", "Mountain", "Pacific", "South Central"}
    assert {k["origin"]["region"] for k in by_tool["get_storage_level"]} == {"description"}
    for tool in ("convert_units", "convert_price"):
        units = {k["arguments"][a] for k in by_tool[tool] for a in ("from_unit", "to_unit")}
        assert units == UNITS and {k["origin"]["from_unit"] for k in by_tool[tool]} == {"description"}
    production = by_tool["get_production"]
    assert {k["arguments"]["year"] for k in production} == {2019, 2020, 2021, 2022, 2023}
    assert {k["origin"]["year"] for k in production} == {"description"} and len(production) >= 30
    # The content is what the agent sees; the result its structure.
    assert all(json.loads(k["content"]) == k["result"] for k in kept)
    # A price that get_gas_price returned, fed into convert_price, with the path to it.
    ids = {k["id"]: k for k in kept}
    chained = [(k, link) for k in by_tool["convert_price"] for link in k["inputs_from"]
               if ids[link["call"]]["tool"] == "get_gas_price"]
    assert chained
    for call, link in chained:
        assert link["argument"] == "price" and link["path"] == ["price_usd_per_mmbtu"]
        assert call["arguments"]["price"] == ids[link["call"]]["result"]["price_usd_per_mmbtu"]
        assert call["origin"]["price"] == "graph"
    # ... in USD per MMBtu, as its key says: every city's price is converted from MMBtu at least once,
    # and never from another unit (random combinations are made coherent too).
    assert {c["arguments"]["price"] for c, _ in chained if c["arguments"]["from_unit"] == "MMBtu"} == {
        k["result"]["price_usd_per_mmbtu"] for k in prices}
    assert {c["arguments"]["from_unit"] for c, _ in chained} == {"MMBtu"}
    # Another tool's prices fit `price`, so the budget goes to those chains, not to converting a
    # conversion again (convert_price fed its own output).
    assert len(chained) >= 30
    assert not [k for k in by_tool["convert_price"] for link in k["inputs_from"]
                if ids[link["call"]]["tool"] == "convert_price"]


async def test_energy_resume_runs_nothing_twice(tmp_path):
    out = tmp_path / "calls.jsonl"
    cfg = load_config(ENERGY_YAML, ["generate.explore.max_calls_per_tool=12"])
    first = await explore_server(cfg, out)
    kept, dropped = rows_of(out)
    assert first.calls == len(kept) + len(dropped) and first.resumed == 0
    # The same budget again: everything is already there, nothing runs (not even the probes).
    again = await explore_server(cfg, out)
    assert again.calls == 0 and again.resumed == len(kept) and rows_of(out) == (kept, dropped)
    # A larger budget adds new calls only; ids go on from the last one.
    more = await explore_server(load_config(ENERGY_YAML, ["generate.explore.max_calls_per_tool=20"]), out)
    kept2, dropped2 = rows_of(out)
    assert more.calls > 0 and kept2[:len(kept)] == kept and dropped2[:len(dropped)] == dropped
    keys = [key(r) for r in kept2 + dropped2]
    assert len(keys) == len(set(keys))
    assert len({k["id"] for k in kept2}) == len(kept2) and kept2[len(kept)]["id"] == f"c{len(kept) + 1:04d}"
    # --fresh starts over.
    fresh = await explore_server(cfg, out, fresh=True)
    assert fresh.resumed == 0 and read_rows(out) == kept


async def test_shop_ids_are_discovered_and_plain_errors_dropped_with_their_reason(tmp_path):
    out = tmp_path / "calls.jsonl"
    cfg = load_config(server_yaml(tmp_path, SHOP), ["generate.explore.call_timeout_s=1.5"])
    report = await explore_server(cfg, out)
    kept, dropped = rows_of(out)
    by_id = {k["id"]: k for k in kept}
    # The tool with an empty schema is called with {}.
    (customers,) = [k for k in kept if k["tool"] == "list_customers"]
    assert customers["arguments"] == {} and customers["origin"] == {} and customers["inputs_from"] == []
    # list_customers -> get_orders(customer_id) -> get_order(order_id), each link recorded.
    orders = [k for k in kept if k["tool"] == "get_orders"]
    assert {k["arguments"]["customer_id"] for k in orders} == {"C-17", "C-42"}
    for k in orders:
        (link,) = k["inputs_from"]
        assert by_id[link["call"]] is customers and link["argument"] == "customer_id"
        assert customers["result"][link["path"][0]][link["path"][1]] == k["arguments"]["customer_id"]
    order = [k for k in kept if k["tool"] == "get_order"]
    assert {k["arguments"]["order_id"] for k in order} == {"O-5", "O-8", "O-9"}
    assert all(by_id[k["inputs_from"][0]["call"]]["tool"] == "get_orders" for k in order)
    assert order[0]["inputs_from"][0]["path"] == ["orders", 0, "id"]
    # "e.g. 'A-10'" is wrong: {"error": ...} as a plain result is dropped, its hint gives the right SKUs.
    assert {k["arguments"]["sku"]: k["origin"]["sku"] for k in kept if k["tool"] == "stock_of"} == {
        "A-1001": "error_hint", "B-2002": "error_hint"}
    reasons = {(d["tool"], d["reason"]) for d in dropped}
    assert ("stock_of", "error_result") in reasons
    assert next(d for d in dropped if d["arguments"] == {"sku": "A-10"})["error"] == (
        "unknown sku A-10; known skus: A-1001, B-2002")
    # An empty result and a call that never answers are dropped, counted, and named in the report.
    assert ("customer_notes", "empty_result") in reasons and ("slow_report", "timeout") in reasons
    assert set(report.no_working_call) == {"customer_notes", "slow_report"}
    assert "did not answer within" in report.no_working_call["slow_report"]
    # Three regions to try, but a tool that timed out twice is not called again: nothing hangs.
    # Two customer ids and two SKUs known: four same-shape ids each are tried (six values in all), and refused (vary).
    assert dict(report.dropped) == {"probe": 4, "error_result": 1, "empty_result": 2, "timeout": 2,
                                    "refused_variant": 8}
    assert [d["arguments"]["region"] for d in dropped if d["tool"] == "slow_report"] == ["north", "south"]
    # A result too large to show is cut the way the agent sees it, and the call is still kept.
    (catalog,) = [k for k in kept if k["tool"] == "catalog"]
    assert catalog["truncated"] is True
    assert "[truncated: 20,000 characters, showing the first 8,000]" in catalog["content"]
    assert not {key(d) for d in dropped} & {key(k) for k in kept}
    # Resumed: nothing runs again (not the slow tool either), and the report still names the tools.
    again = await explore_server(cfg, out)
    assert again.calls == 0 and again.resumed == len(kept) and rows_of(out) == (kept, dropped)
    assert set(again.no_working_call) == {"customer_notes", "slow_report"}


def test_a_server_that_refuses_every_call_is_a_clear_error_through_the_cli(tmp_path):
    server = tmp_path / "down_server.py"
    server.write_text(textwrap.dedent('''
        from fastmcp import FastMCP
        from fastmcp.exceptions import ToolError

        mcp = FastMCP("down")

        @mcp.tool
        def get_weather(city: str, days: int = 1) -> dict:
            """Weather in a city, e.g. Paris."""
            raise ToolError("service unavailable")

        @mcp.tool
        def ping() -> dict:
            """Is the service up?"""
            raise RuntimeError("service unavailable")  # fastmcp logs a traceback for this one
        '''))
    out = tmp_path / "calls.jsonl"
    conf = server_yaml(tmp_path, server)
    run = subprocess.run([sys.executable, "-m", "ajet.cli", "generate", "explore", "--conf", str(conf),
                          "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 1, run.stdout + run.stderr
    error = " ".join(run.stderr.split())
    assert "error: no call to the MCP server" in error and "Traceback" not in run.stderr + run.stdout
    _, dropped = rows_of(out)
    calls = len(dropped)
    weather = sum(d["tool"] == "get_weather" for d in dropped)
    assert f"{calls} call(s) to 2 tool(s) [get_weather ({weather}), ping (1)] all failed" in error
    assert f"dropped: tool_error {calls - 1}, probe 1" in error
    assert (f"commonest errors: 'service unavailable' ({calls - 2}), "
            "'Error calling tool …: service unavailable' (1)") in error
    assert f"{out.name}.dropped.jsonl" in error and read_rows(out) == []


def test_cli_explores_the_energy_server(tmp_path):
    out = tmp_path / "calls.jsonl"
    run = subprocess.run([sys.executable, "-m", "ajet.cli", "generate", "explore", "--conf", str(ENERGY_YAML),
                          "--out", str(out), "generate.explore.max_calls_per_tool=10"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["kept"] == len(read_rows(out)) and set(report["per_tool"]) == ENERGY_TOOLS
    assert "kept: get_gas_price" in run.stdout and "dropped: probe" in run.stdout
    bad = subprocess.run([sys.executable, "-m", "ajet.cli", "generate", "explore", "--conf", str(ENERGY_YAML)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert bad.returncode == 2 and "--out" in bad.stderr


# ------------------------------------------------------------------ the value sources, one by one


@pytest.mark.parametrize("text, values, label", [
    ("e.g. Boston", ["Boston"], ""),
    ("East, Midwest, Mountain, Pacific or South Central",
     ["East", "Midwest", "Mountain", "Pacific", "South Central"], ""),
    ("Convert an amount. Units: MMBtu, therm, kWh.", ["MMBtu", "therm", "kWh"], "Units"),
    ("The SKU, like 'A-1001'", ["A-1001"], ""),
    ("Status (open, shipped or lost)", ["open", "shipped", "lost"], "Status"),
    ("Celsius or fahrenheit", ["Celsius", "fahrenheit"], ""),
])
def test_text_mentions(text, values, label):
    (mention,) = text_mentions(text)
    assert mention.values == values and mention.label == label


@pytest.mark.parametrize("text", [
    "Gas in storage in a region: Bcf and percent full.",  # two items joined by 'and': a phrase
    "Today's temperature, heating degree days and heating demand level in a city.",  # an item of 6 words
    "Compare gas prices of two cities: difference = city_a - city_b (USD per MMBtu) and the cheaper one.",
])
def test_text_mentions_ignores_prose(text):
    assert text_mentions(text) == []


def test_a_list_of_kinds_each_with_its_examples_gives_the_examples_not_the_kinds():
    # mcp-server-git's git_log: "format", "relative dates" and "absolute dates" are kinds, no timestamps
    text = ("Start timestamp for filtering commits. Accepts: ISO 8601 format (e.g., '2024-01-15T14:30:25'), "
            "relative dates (e.g., '2 weeks ago', 'yesterday'), or absolute dates (e.g., '2024-01-15', 'Jan 15 2024')")
    assert [(m.kind, m.values) for m in text_mentions(text)] == [
        ("example", ["2024-01-15T14:30:25"]), ("example", ["2 weeks ago", "yesterday"]),
        ("example", ["2024-01-15", "Jan 15 2024"])]


@pytest.mark.parametrize("message, items", [
    ("unknown city 'x'; known citys: Houston, Dallas, New York", ["Houston", "Dallas", "New York"]),
    ("no data for year 2030; years available: 2019-2023", ["2019-2023"]),
    ("Input should be 'MMBtu', 'therm' or 'kWh' [type=literal_error, input_value='x']", ["MMBtu", "therm", "kWh"]),
    ("status must be one of ['open', 'closed']", ["open", "closed"]),
    ("valid values: red | green | blue", ["red", "green", "blue"]),
    ("Input should be a valid integer, unable to parse string as an integer [type=int_parsing]", []),
    ("service unavailable, try again later", []),
])
def test_hint_items(message, items):
    assert hint_items(message) == items


def test_schema_values_and_tool_description_lists():
    (spec,) = arg_specs({"properties": {"level": {"anyOf": [{"$ref": "#/$defs/Level"}, {"type": "null"}],
                                                  "default": "low"}},
                         "$defs": {"Level": {"type": "string", "enum": ["low", "high"]}}})
    assert [(v.value, v.origin) for v in schema_values(spec)] == [
        ("low", "schema_enum"), ("high", "schema_enum"), ("low", "schema_default")]
    (count,) = arg_specs({"properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5}}})
    assert [v.value for v in schema_values(count)] == [1, 2, 3, 4, 5]
    (flag,) = arg_specs({"properties": {"on": {"type": "boolean"}}})
    assert [v.value for v in schema_values(flag)] == [True, False]
    specs = arg_specs({"properties": {"from_unit": {"type": "string"}, "order_id": {"type": "string"},
                                      "year": {"type": "integer"}}})
    tool = "One order: status, SKU and total. Units: kWh, GJ or Mcf. Data for the year 2019 to 2021."
    assert [v.value for v in description_values(specs[0], tool, specs)] == ["kWh", "GJ", "Mcf"]
    assert description_values(specs[1], tool, specs) == []  # 'One order' is no list of order ids
    assert [v.value for v in description_values(specs[2], tool, specs)] == [2019, 2020, 2021]


@pytest.mark.parametrize("arg, kind, leaf, fits", [
    ("customer_id", "string", Leaf([0, "id"], tokens("id"), {"customer"}, "C-1"), True),
    ("order_id", "string", Leaf(["customer_id"], tokens("customer_id"), {"order"}, "C-1"), False),
    ("price", "number", Leaf(["price_usd_per_mmbtu"], tokens("price_usd_per_mmbtu"), {"gas", "price"}, 4.15), True),
    ("city_a", "string", Leaf(["city"], tokens("city"), {"gas", "price"}, "Boston"), True),
    ("city", "string", Leaf(["price"], tokens("price"), {"city"}, 4.15), False),  # a number for a string
    ("customer", "string", Leaf([0, "id"], tokens("id"), {"customer"}, "C-1"), False),  # an id is no customer name
])
def test_result_values_feed_arguments_by_name(arg, kind, leaf, fits):
    assert feeds(ArgSpec(arg, {"type": kind}, kind, True), leaf) is fits


async def test_odd_results_are_kept_and_marked_or_dropped(tmp_path):
    out = tmp_path / "calls.jsonl"
    report = await explore_server(load_config(server_yaml(tmp_path, SHOP.with_name("odd_results_server.py"))), out)
    kept, dropped = rows_of(out)
    marks = {k["tool"]: (k.get("truncated"), k.get("not_shown")) for k in kept}
    assert marks == {"huge_report": (True, None), "product_photo": (None, 1), "voice_note": (None, 1),
                     "manual_pdf": (None, 1)}
    assert {(d["tool"], d["reason"]) for d in dropped} == {
        ("stock_of", "probe"), ("stock_of", "error_result"), ("nothing", "empty_result")}
    assert set(report.no_working_call) == {"stock_of", "nothing"}


async def test_a_server_that_accepts_any_text_gets_plain_values_for_common_names(tmp_path):
    # 60 tools whose `city` / `state` / `country` / `county` take anything: no error names a valid value
    out = tmp_path / "calls.jsonl"
    report = await explore_server(load_config(server_yaml(tmp_path, SHOP.with_name("many_tools_server.py"))), out)
    kept, dropped = rows_of(out)
    assert report.no_working_call == {} and len(report.per_tool) == 60
    assert {d["reason"] for d in dropped} == {"probe_accepted"}
    by_scope = {k["tool"].rsplit("_", 1)[1]: k["arguments"] for k in kept if "date" not in k["arguments"]}
    assert by_scope == {"city": {"city": "Lisbon"}, "state": {"state": "Ohio"}, "country": {"country": "Japan"},
                        "county": {"county": "Kings County"}}


def test_generic_objects_ranges_in_errors_and_json_text_results():
    (query,) = arg_specs({"properties": {"q": {"type": "object", "required": ["kind", "n"], "properties": {
        "kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}, "note": {"type": "string"}}}}})
    assert [v.value for v in generic_values(query)] == [{"kind": "a", "n": 1}]
    (limit,) = arg_specs({"properties": {"limit": {"type": "integer"}}})
    assert [v.value for v in hint_values("limit must be between 1 and 50", limit)] == [1, 3, 10, 20, 50]
    assert [v.value for v in hint_values("no data for year 1; years available: 2019-2021", limit)] == [
        2019, 2020, 2021]
    # A server that sends JSON as text: its values are found all the same, the path is into that JSON.
    found = leaves('{"customers": [{"id": "C-1"}]}', "find")
    assert [(leaf.path, leaf.value) for leaf in found] == [(["customers", 0, "id"], "C-1")]
    (ids,) = arg_specs({"properties": {"customer_ids": {"type": "array", "items": {"type": "string"}}}})
    assert feeds(item_spec(ids), found[0]) and leaves("plain text", "find") == []


def test_an_error_is_about_the_argument_whose_probe_value_it_quotes():
    specs = arg_specs({"properties": {"city_a": {"type": "string"}, "city_b": {"type": "string"},
                                      "unit": {"type": "string"}}})
    both = {"city_a": probe_value("city_a"), "city_b": probe_value("city_b")}
    message = f"unknown city '{probe_value('city_b')}'; known citys: Boston, Dallas"
    assert [s.name for s in hinted_arguments(message, both, specs, ["city_a"])] == ["city_b"]
    one = {"city_a": probe_value("city_a"), "city_b": "Boston"}  # Boston is in the list, not the culprit
    assert [s.name for s in hinted_arguments(message.replace("city_b", "city_a"), one, specs, ["city_a"])] == [
        "city_a"]
    assert [s.name for s in hinted_arguments("unknown unit 'x'; units: kWh", {"unit": "x"}, specs, [])] == ["unit"]
    assert [s.name for s in hinted_arguments("bad unit; valid: kWh, GJ", {"unit": "y"}, specs, [])] == ["unit"]


def test_a_key_that_repeats_across_a_lists_records_is_shared():
    found = leaves({"books": [{"id": "B-1", "title": "Emma", "author": "Jane Austen"},
                              {"id": "B-2", "title": "Persuasion", "author": "Jane Austen"}], "total": 2}, "search")
    assert shared_paths(found) == {("books", 0, "author"), ("books", 1, "author")}
    # One record says nothing about which keys repeat.
    assert shared_paths(leaves({"books": [{"title": "Emma", "author": "Jane Austen"}]}, "search")) == set()


async def test_library_searches_identifying_titles_not_authors(tmp_path):
    # An author's name is a person's name: searched as often as titles, it taught the model that a
    # member's name goes to the catalog. Titles name one record each (a `title` is a label, like a
    # `name`): every title the wildcard searches found is searched; an author is not a label.
    out = tmp_path / "calls.jsonl"
    await explore_server(load_config(server_yaml(tmp_path, LIBRARY)), out)
    searched = [k for k in read_rows(out) if k["tool"] == "search_books" and k["origin"] == {"query": "graph"}]
    keys = [k["inputs_from"][0]["path"][-1] for k in searched]
    assert keys.count("title") == 21 and set(keys) == {"title"}
