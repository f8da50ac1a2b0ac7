"""Members of a standard code list a description names (US states, countries, currencies, languages),
on a small MCP server written for this test (never a zoo server): a store finder whose description
shows one state tries others, keeps the states that have stores, and asks tasks about them."""

from __future__ import annotations

import pytest

from ajet.generate.explore_values import ArgSpec
from ajet.generate.standard_values import code_list, code_values, spread
from ajet.generate.text_values import format_values

from tests.unit.test_generate_rules import explore, tasks_of

pytest.importorskip("pycountry", reason="pycountry (ISO code tables) is not installed")

STORES = '''
    from typing import Annotated
    from pydantic import Field

    STORES = {"TX": ["Austin North", "Dallas Loop"], "ME": ["Portland Harbor"], "MI": ["Detroit Midtown"],
              "MN": ["Duluth Pier", "St Paul Center", "Rochester"]}

    @mcp.tool
    def list_stores(state: Annotated[str, Field(description="Two-letter US state code, e.g. TX.")]) -> dict:
        """The stores in a state. A state with no store has an empty list."""
        code = state.strip().upper()
        return {"state": code, "stores": [{"name": n, "store_no": i + 1} for i, n in enumerate(STORES.get(code, []))]}
'''


def test_a_named_code_list_gives_its_members_by_hand():
    states = code_list("Two-letter US state code, e.g. WA.")
    assert len(states) == 57 and {"WA", "OR", "CA", "DC"} <= set(states)  # 50 states, DC and the outlying areas
    assert code_list("U.S. state abbreviation like TX") == states
    assert code_list("ISO 3166-2 subdivision, e.g. US-CA")[:2] == ["US-AK", "US-AL"]  # written as its example
    assert "ON" in code_list("Province code in Canada, e.g. ON")
    # 'WA' is a state of the US and of Australia: no country named, no list
    assert code_list("State code, e.g. WA") == []
    assert {"USD", "EUR", "JPY"} <= set(code_list("ISO 4217 currency code"))
    assert "usd" in code_list("Currency code in lower case, e.g. usd")  # the examples' case
    assert {"en", "de"} <= set(code_list("ISO 639-1 language code"))  # languages are written in lower case
    assert "DE" in code_list("Two-letter country code") and "DEU" in code_list("Three-letter country code")
    for text in ("A city name", "the state of the order", "The order's status code", ""):
        assert code_list(text) == []


def test_a_spread_is_even_and_keeps_short_lists_whole_by_hand():
    items = [f"{i:02d}" for i in range(10)]
    assert spread(items, 5) == ["00", "02", "04", "06", "08"]
    assert spread(items, 20) == items
    # any three neighbours of the US list hold one of the 24 tried: no run of the alphabet is left out
    tried = set(code_values("Two-letter US state code"))
    states = code_list("Two-letter US state code")
    assert len(tried) == 24 and all(set(states[i:i + 3]) & tried for i in range(len(states) - 2))


def test_the_code_list_is_offered_to_its_own_argument_only_by_hand():
    state = ArgSpec("state", {"type": "string", "description": "Two-letter US state code, e.g. TX."}, "string", True)
    city = ArgSpec("city", {"type": "string", "description": "City name."}, "string", True)
    tool = "Stores in a city of a state (two-letter US state code)."
    assert len([v for v in format_values(state, state.description, scoped=(tool,))]) == 24
    # the tool's description names a state code list, but 'city' is not what it is about
    assert format_values(city, city.description, scoped=(tool,)) == []
    lang = ArgSpec("lang", {"type": "string"}, "string", False)
    said = [v.value for v in format_values(lang, "", scoped=("Translate a text into a language (ISO 639-1 code).",))]
    assert len(said) == 24 and all(v.islower() and len(v) == 2 for v in said)


async def test_states_beside_the_example_are_tried_and_asked(tmp_path):
    _, kept, dropped, yaml = await explore(tmp_path, STORES)
    kept_states = {r["arguments"]["state"] for r in kept if r["tool"] == "list_stores"}
    # the example, and the states of the list that have stores (any three neighbours hold one tried)
    assert "TX" in kept_states and kept_states & {"ME", "MI", "MN"}, kept_states
    # a state with no store says nothing: not kept as a reference
    assert not kept_states - {"TX", "ME", "MI", "MN"}
    assert any(r["reason"] == "says_nothing" for r in dropped if r["tool"] == "list_stores")
    rows = await tasks_of(yaml, tmp_path, n=30)
    asked = {r["answer"]["calls"][0]["arguments"]["state"] for r in rows}
    assert "TX" in asked and asked & {"ME", "MI", "MN"}, asked
    for row in rows:
        assert row["answer"]["calls"][0]["arguments"]["state"] in row["query"]
