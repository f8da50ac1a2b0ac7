"""Questions in the forms users write (ajet.generate.natural) and the task schedule (ajet.generate.schedule),
on the real energy and library MCP servers: each explored in memory (`ajet generate explore`), every
candidate phrased, every phrasing checked against what the user can and cannot know."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.generate import natural, phrasing
from ajet.generate.call_tasks import generate_call_tasks, template_question
from ajet.generate.candidates import candidates
from ajet.generate.explore import explore_server
from ajet.jsonl import read_rows
from ajet.generate.schedule import LOOKUP_RATIO, schedule
from ajet.mcp_client import server_tools

ROOT = Path(__file__).resolve().parents[2]
PIPELINE_YAML = ROOT / "tutorial" / "example_mcp_pipeline" / "pipeline.yaml"
LIBRARY = ROOT / "tutorial" / "example_mcp_pipeline" / "library" / "library_server.py"
SERVERS = {"energy": [], "library": [f"workflow_args.server={LIBRARY}"]}


async def _explored(name: str, folder: Path) -> tuple[list, list[str], dict[str, str]]:
    """The server's candidates (descriptions attached, as generate_call_tasks does), tool names and lexicon."""
    cfg = load_config(PIPELINE_YAML, SERVERS[name])
    await explore_server(cfg, folder / "calls.jsonl")
    tools = await server_tools(cfg.workflow_args["server"], cfg.base_dir)
    descriptions = {t["function"]["name"]: t["function"].get("description") for t in tools}
    bank = read_rows(folder / "calls.jsonl")
    for row in bank:
        row["description"] = descriptions[row["tool"]]
    lex = natural.lexicon([d or "" for d in descriptions.values()])
    return candidates(bank), list(descriptions), lex


@pytest.fixture(scope="module")
def energy(tmp_path_factory):
    return asyncio.run(_explored("energy", tmp_path_factory.mktemp("energy")))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return asyncio.run(_explored("library", tmp_path_factory.mktemp("library")))


def _forms(found: list, lex: dict[str, str], tools: tuple[str, ...], path: list, **arguments) -> list[str]:
    cand = next(c for c in found if tuple(c.tools) == tools and c.path == path
                and all(c.steps[0]["arguments"].get(k) == v for k, v in arguments.items()))
    return natural.questions(cand.steps, cand.path, cand.value, cand.mention(), cand.field, lex, random.Random(0))


def test_the_lexicon_spells_units_as_the_descriptions_do(energy):
    _, _, lex = energy
    assert {lex["usd"], lex["mmbtu"], lex["bcf"], lex["mwh"]} == {"USD", "MMBtu", "Bcf", "MWh"}
    assert "natural" not in lex  # a capital that only opens a sentence is no spelling


def test_what_is_asked_is_the_key_split_into_a_noun_and_its_unit(energy):
    _, _, lex = energy
    price = natural.asked(["price_usd_per_mmbtu"], 4.15, "Natural gas price in a city, USD per MMBtu.", {}, lex)
    assert price.nouns == ["price", "natural gas price"] and price.unit == "USD per MMBtu"
    flow = natural.asked(["flow_mmcf_per_day"], 5100, "Flow and capacity of a pipeline in MMcf per day.", {}, lex)
    assert flow.nouns == ["flow"] and flow.unit == "MMcf per day"
    assert natural.asked(["price_a"], 2.85, "", {"city_a": "Houston", "city_b": "Dallas"}, lex).nouns == [
        "price of Houston"]
    copies = natural.asked(["available", "Oakwood"], 1, "A book's pages, copies available at each branch.", {}, {})
    assert copies.nouns == ["available at Oakwood", "copies available at Oakwood"] and copies.count
    assert natural.asked(["holds"], 3, "", {}, {}).count  # a plural noun with an integer: 'How many holds ...'
    # a one-letter unit: the temperature scales in capitals, the others by name ('in M' reads as mega)
    assert natural.asked(["temp_max_f"], 71, "", {}, {}).unit == "F"
    assert natural.asked(["elevation_m"], 112, "", {}, {}).unit == "meters"
    assert natural.asked(["sugar_g"], 12, "", {}, {}).unit == "grams"
    assert natural.asked(["grade_x"], 3, "", {}, {}).unit == "X"  # no unit is known by the letter
    # the description's 'rainy days' is the key beside `days`, never what `days` (a month's 31) is called
    month = "A statistic over a month. Also gives the number of rainy days (precipitation above 0)."
    result = '{"value": 3.1, "days": 31, "rainy_days": 9}'
    assert natural.asked(["days"], 31, month, {}, {}, result).nouns == ["days"]
    assert natural.asked(["rainy_days"], 9, month, {}, {}, result).nouns == ["rainy days"]
    assert natural.asked(["days"], 31, month, {}, {}, '{"value": 3.1, "days": 31}').nouns == ["days", "rainy days"]
    # a verb opening the description is no modifier: 'Search the catalog by title' gives 'title' alone
    assert natural.asked(["books", 0, "title"], "Dune", "Search the catalog by title or author.", {}, {}).nouns == [
        "title"]


def test_energy_questions_name_the_values_where_users_put_them(energy):
    found, names, lex = energy
    production = _forms(found, lex, ("get_production",), ["production_bcf"], state="Texas", year=2021)
    assert "What is the natural gas production of Texas in 2021?" in production
    assert "What is the production of Texas in 2021, in Bcf?" in production
    pair = next(c for c in found if c.tools == ["compare_prices"] and c.path == ["difference"]).steps[0]["arguments"]
    a, b = pair["city_a"], pair["city_b"]  # whichever pair exploration sampled
    difference = _forms(found, lex, ("compare_prices",), ["difference"], city_a=a, city_b=b)
    assert f"By how much does the gas price in {a} exceed {b}?" in difference
    assert f"{a} or {b}: what is the difference?" in difference
    convert = next(c for c in found if c.tools == ["convert_units"] and c.steps[0]["arguments"]["from_unit"] != "MMBtu")
    args = convert.steps[0]["arguments"]
    forms = natural.questions(convert.steps, convert.path, convert.value, convert.mention(), convert.field, lex,
                              random.Random(0))
    assert f"Convert {phrasing.show(args['value'])} {args['from_unit']} to {args['to_unit']}." in forms
    # a chain that converts what the first call returned asks for the first call's value in the unit wanted
    chain = _forms(found, lex, ("get_gas_price", "convert_price"), ["converted_price"], city="Seattle")
    to_unit = next(c for c in found if c.tools == ["get_gas_price", "convert_price"]
                   and c.steps[0]["arguments"]["city"] == "Seattle").steps[1]["arguments"]["to_unit"]
    assert f"What is the natural gas price in Seattle in USD per {to_unit}?" in chain
    assert not any("MMBtu" in q or "3.8" in q for q in chain)  # the passed price and its unit stay unsaid
    # the verb behind a noun made from it: 'production of a US state' is what a state produces
    assert "How much natural gas did Texas produce in 2021?" in production
    assert "How much natural gas was produced in Texas in 2021?" in production
    # a single price says its own unit as a chain says the converted one ('per MMBtu' / 'per GJ')
    price = _forms(found, lex, ("get_gas_price",), ["price_usd_per_mmbtu"], city="Boston")
    assert "What is the natural gas price in Boston per MMBtu?" in price


def test_a_chain_never_passes_one_side_of_a_pair(energy):
    """compare_prices(Boston, Dallas) returns price_a and price_b; "compare them, then convert Boston's
    price" is no question a user asks. Exploration fed convert_price from whichever key held the value
    first: such links move to the same value under another key (cheaper_price) or are cut."""
    found, _, _ = energy
    passed = Counter(c.steps[1]["inputs_from"][0]["path"][-1] for c in found
                     if c.tools == ["compare_prices", "convert_price"])
    assert set(passed) == {"cheaper_price"} and passed["cheaper_price"] > 0
    for cand in found:
        if cand.tools == ["compare_prices", "convert_price"]:
            first = json.loads(cand.steps[0]["content"])
            assert cand.steps[1]["arguments"]["price"] == first["cheaper_price"]


def test_library_questions_use_ids_names_counts_and_the_first_person(library):
    found, names, lex = library
    fine = _forms(found, lex, ("get_loans",), ["total_fine_usd"], member_id="M-2041")
    assert {"What is the total fine for member M-2041?", "What is the total fine of member M-2041?",
            "What is the total fine on member M-2041?", "What is the total fine for M-2041?"} & set(fine)
    assert any(q.startswith(("My member id is M-2041.", "Member M-2041 here.")) for q in fine)
    chained = _forms(found, lex, ("find_member", "get_loans"), ["total_fine_usd"], name="Ana Ruiz")
    assert "What is Ana Ruiz's total fine?" in chained
    assert {"I'm Ana Ruiz. What is the total fine?", "This is Ana Ruiz. What is the total fine?"} & set(chained)
    renew = next(c for c in found if c.tools == ["renew_quote"] and c.path == ["total_usd"]
                 and c.steps[0]["arguments"]["weeks"] == 2)
    said = {q for seed in range(20) for q in natural.questions(renew.steps, renew.path, renew.value, renew.mention(),
                                                                  renew.field, lex, random.Random(seed))}
    assert any("for two weeks" in q for q in said) and any("for 2 weeks" in q for q in said)
    # 'two' names 2 for the checks, as '2' does; 'twenty' does not
    assert phrasing.mentions(2, "Renew it for two weeks.") and not phrasing.mentions(2, "twenty-two weeks")


def test_how_much_asks_for_an_amount_how_many_for_a_count_and_a_named_person_is_someone(library):
    found, names, lex = library
    fee = _forms(found, lex, ("renew_quote",), ["total_usd"], weeks=2)
    assert any(q.startswith("How much is the total") for q in fee)  # 2.75 USD: an amount
    holds = _forms(found, lex, ("get_book",), ["holds"])
    assert any(q.startswith("How many holds") for q in holds) and not any(q.startswith("How much") for q in holds)
    overdue = _forms(found, lex, ("find_member", "get_loans"), ["loans", 0, "days_overdue"], name="Ana Ruiz")
    assert not any(q.startswith("How much") for q in overdue)  # a whole number without a unit: neither
    assert {"Ana Ruiz wants to know the days overdue for Dune.", "Ana Ruiz is asking for the days overdue for Dune."} & set(overdue)
    titles = _forms(found, lex, ("search_books",), ["books", 0, "year"])
    assert not any("wants to know" in q for q in titles)  # a title is no one


@pytest.mark.parametrize("server", ["energy", "library"])
def test_every_candidate_gets_a_question_that_passes_the_checks(server, request):
    found, names, lex = request.getfixturevalue(server)
    rng = random.Random(0)
    kinds = Counter()
    for cand in found:
        question = template_question(cand, names, rng, lex)
        assert phrasing.question_problem(question, cand.mention(), cand.hidden(), names) is None, question
        kinds[question.split(" ")[0]] += 1
    assert len(kinds) >= 8  # many sentence openings, not one form


def test_a_call_never_goes_on_more_often_than_it_stops_in_any_prefix(energy, library):
    for (found, _, _), lookup in ((energy, None), (library, "find_member")):
        plan = schedule(list(found), 200, 0.4, random.Random(0), phrasings=2)
        assert len(plan) == 200 and len({c.key for c in plan}) == 200
        for end in range(1, len(plan) + 1):
            exact = Counter(tuple(c.tools) for c in plan[:end])
            for key in exact:
                for i in range(1, len(key)):
                    if key[:i] in exact or i == 1:
                        going_on = sum(v for k, v in exact.items() if len(k) > i and k[:i] == key[:i])
                        # a lookup (every answer an id or a name, results feeding another tool) is asked
                        # through more than for itself
                        ratio = LOOKUP_RATIO if key[:i] == (lookup,) else 1
                        assert going_on <= ratio * exact[key[:i]], (end, key[:i], going_on, exact[key[:i]])
            assert sum(v for k, v in exact.items() if len(k) > 1) <= 0.4 * end
        singles = Counter(c.tools[0] for c in plan if len(c.tools) == 1)
        assert max(singles.values()) - min(singles.values()) <= 1  # single tools evenly
        if lookup:
            through = sum(1 for c in plan if len(c.tools) > 1 and c.tools[0] == lookup)
            assert through > singles[lookup]
    # a tool with ten working calls still gets its share: the same call phrased anew is a task of its own
    plan = schedule(list(energy[0]), 200, 0.4, random.Random(0), phrasings=2)
    prices = [c for c in plan if c.tools == ["get_gas_price"]]
    assert len(prices) == 20 and any(c.variant for c in prices)
    assert all(not isinstance(c.value, str) for c in prices)  # every phrasing of the numbers before any label


async def test_tasks_from_the_library_server_are_varied_and_resume_in_the_same_order(tmp_path):
    cfg = load_config(PIPELINE_YAML, SERVERS["library"])
    await explore_server(cfg, tmp_path / "calls.jsonl")
    await generate_call_tasks(cfg, tmp_path / "calls.jsonl", 30, tmp_path / "tasks.jsonl")
    whole = read_rows(tmp_path / "tasks.jsonl")
    first = tmp_path / "first.jsonl"
    await generate_call_tasks(cfg, tmp_path / "calls.jsonl", 12, first)
    await generate_call_tasks(cfg, tmp_path / "calls.jsonl", 30, first)
    assert [t["metadata"]["candidate"] for t in read_rows(first)] == [t["metadata"]["candidate"] for t in whole]
    assert len({t["query"] for t in whole}) == 30
    variants = [t for t in whole if len(json.loads(t["metadata"]["candidate"])) == 3]
    for task in variants:  # a second phrasing of a call carries the same reference as the first
        ids, path, _ = json.loads(task["metadata"]["candidate"])
        twin = next((t for t in whole if json.loads(t["metadata"]["candidate"]) == [ids, path]), None)
        if twin is not None:
            assert twin["answer"] == task["answer"] and twin["query"] != task["query"]
