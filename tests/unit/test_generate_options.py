"""Optional arguments, each on a small parcels MCP server written for these tests (never a zoo server):
every optional value is also sent alone, so that a question names one filter and its call sends that
one; a question never names an option its answer does not need."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.generate.candidates import ASKED_RECORDS, answer_paths, candidates
from ajet.generate.explore import explore_server
from ajet.generate.result_data import COUNT
from ajet.jsonl import read_rows

from tests.unit.test_generate_rules import conf, server

PARCELS = '''
    PARCELS = [
        {"parcel_id": "P-101", "carrier": "DHL", "weight_kg": 1.5, "status": "delivered", "city": "Lyon"},
        {"parcel_id": "P-102", "carrier": "DHL", "weight_kg": 4.0, "status": "in transit", "city": "Oslo"},
        {"parcel_id": "P-103", "carrier": "UPS", "weight_kg": 2.5, "status": "delivered", "city": "Porto"},
        {"parcel_id": "P-104", "carrier": "UPS", "weight_kg": 9.0, "status": "held", "city": "Lyon"},
        {"parcel_id": "P-105", "carrier": "GLS", "weight_kg": 0.5, "status": "in transit", "city": "Turin"},
    ]

    @mcp.tool
    def list_parcels(carrier: str = "", status: str = "", city: str = "") -> dict:
        """The parcels, filtered by carrier (DHL, UPS or GLS), status (delivered, in transit or held)
        and destination city (Lyon, Oslo, Porto or Turin); a filter left empty matches every parcel."""
        found = [p for p in PARCELS if (not carrier or p["carrier"] == carrier)
                 and (not status or p["status"] == status) and (not city or p["city"] == city)]
        return {"count": len(found), "parcels": found}

    @mcp.tool
    def parcel_weight(parcel_id: str) -> dict:
        """The weight of one parcel, by its id from list_parcels."""
        for p in PARCELS:
            if p["parcel_id"] == parcel_id:
                return {"parcel_id": parcel_id, "weight_kg": p["weight_kg"]}
        return {"error": f"unknown parcel {parcel_id!r}"}
'''

OPTIONS = ("carrier", "status", "city")


@pytest.fixture(scope="module")
def parcels_calls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    import asyncio

    tmp_path = tmp_path_factory.mktemp("parcels")
    yaml = conf(tmp_path, server(tmp_path, PARCELS))
    out = tmp_path / "calls.jsonl"
    asyncio.run(explore_server(load_config(yaml), out))
    return yaml, read_rows(out)


def test_every_optional_value_is_also_sent_alone(parcels_calls):
    _, kept = parcels_calls
    lists = [row["arguments"] for row in kept if row["tool"] == "list_parcels"]
    alone = {(arg, value) for arguments in lists if len(arguments) == 1 for arg, value in arguments.items()}
    named = {(arg, value) for arguments in lists for arg, value in arguments.items()}
    # every value the explorer sent to a filter, it also sent with the other filters left out
    assert named and named == alone
    # the description's values of each filter, every one of them
    assert {v for a, v in alone if a == "carrier"} >= {"DHL", "UPS", "GLS"}
    assert {v for a, v in alone if a == "city"} >= {"Lyon", "Oslo", "Porto", "Turin"}
    # and the first pass, which sets the filters together, still ran
    assert Counter(len(arguments) for arguments in lists)[2] >= 1


# A bank by hand: the whole list, the list a carrier filter cut to two parcels and to one, and a weight
# looked up by an id the carrier's list returned. The GLS parcel stands first in the whole list, the
# Desk fifth: a twin compared at the same place, or a plain list searched through its first three
# records only, gets both wrong.
ALL = [{"parcel_id": "P-105", "name": "Vase", "carrier": "GLS", "weight_kg": 0.5},
       {"parcel_id": "P-101", "name": "Books", "carrier": "DHL", "weight_kg": 1.5},
       {"parcel_id": "P-102", "name": "Lamp", "carrier": "DHL", "weight_kg": 4.0},
       {"parcel_id": "P-103", "name": "Chair", "carrier": "UPS", "weight_kg": 2.5},
       {"parcel_id": "P-104", "name": "Desk", "carrier": "UPS", "weight_kg": 9.0}]


def parcels_bank() -> list[dict]:
    def listed(call_id: str, **filters: str) -> dict:
        found = [p for p in ALL if all(p[k] == v for k, v in filters.items())]
        return {"id": call_id, "tool": "list_parcels", "arguments": filters, "optional": ["carrier", "city"],
                "defaults": {}, "origin": {k: "description" for k in filters}, "inputs_from": [],
                "result": {"count": len(found), "parcels": found}}

    weight = {"id": "c4", "tool": "parcel_weight", "arguments": {"parcel_id": "P-104"}, "optional": [],
              "defaults": {}, "origin": {"parcel_id": "graph"}, "result": {"parcel_id": "P-104", "weight_kg": 9.0, "postage_eur": 14.2},
              "inputs_from": [{"argument": "parcel_id", "call": "c2", "path": ["parcels", 1, "parcel_id"]}]}
    vase = {**weight, "id": "c5", "arguments": {"parcel_id": "P-105"},
            "result": {"parcel_id": "P-105", "weight_kg": 0.5, "postage_eur": 6.1},
            "inputs_from": [{"argument": "parcel_id", "call": "c3", "path": ["parcels", 0, "parcel_id"]}]}
    return [listed("c1"), listed("c2", carrier="UPS"), listed("c3", carrier="GLS"), weight, vase]


def test_a_question_names_an_option_only_where_its_answer_needs_it():
    found = candidates(parcels_bank())
    asked = {(tuple(c.tools), c.steps[0]["id"], tuple(c.path)): c.value for c in found}
    # the Desk's and the Chair's weights do not depend on the carrier filter: no "weight of the Desk
    # with carrier UPS" (list_parcels() holds them, at other places)
    assert not [key for key in asked if key[1] == "c2" and key[2][-1] == "weight_kg"]
    # how many parcels UPS carries does depend on it
    assert asked[(("list_parcels",), "c2", ("parcels", COUNT))] == 2
    # the one GLS parcel is named by its filter: "the weight of the parcel carried by GLS" keeps it
    assert asked[(("list_parcels",), "c3", ("parcels", 0, "weight_kg"))] == 0.5
    # the Desk's postage by its id starts from the plain list, where the Desk stands fifth; its weight,
    # which that list already says, is no chain's answer
    chains = {c.steps[1]["id"]: c for c in found if c.tools == ["list_parcels", "parcel_weight"]}
    desk = chains["c4"]
    assert desk.steps[0]["id"] == "c1" and desk.value == 14.2
    assert desk.steps[1]["inputs_from"][0]["path"] == ["parcels", 4, "parcel_id"]
    assert desk.mention() == {"name": "Desk"}
    # the Vase is the one parcel GLS carries: its chain keeps the filter that names it ("the parcel
    # GLS carries: its postage?"), though the plain list holds it too
    assert chains["c5"].steps[0]["id"] == "c3" and chains["c5"].mention() == {"carrier": "GLS"}


def test_records_asked_about_are_spread_over_the_whole_list():
    asked = {(c.steps[0]["id"], tuple(c.path)) for c in candidates(parcels_bank()) if len(c.steps) == 1}
    # the Desk stands fifth in the whole list: its weight is asked too, not only the first three's
    assert {("c1", ("parcels", i, "weight_kg")) for i in range(5)} <= asked
    # a long list: ASKED_RECORDS of its records, the first and the last among them, evenly apart
    step = {"id": "c9", "tool": "list_parcels", "arguments": {},
            "result": {"parcels": [{"name": f"Box {i}", "weight_kg": i + 0.5} for i in range(20)]}}
    places = sorted({p[1] for p, _ in answer_paths(step, max_items=ASKED_RECORDS, spread=True) if len(p) == 3})
    assert len(places) == ASKED_RECORDS and places[0] == 0 and places[-1] == 19
    assert max(b - a for a, b in zip(places, places[1:])) <= 3
    assert sorted({p[1] for p, _ in answer_paths(step) if len(p) == 3}) == [0, 1, 2]  # links: the first three


def test_a_record_named_by_its_place_keeps_the_option_that_put_it_there():
    shipments = [{"shipped_on": f"2026-03-0{day}", "weight_kg": day + 0.5} for day in range(1, 6)]

    def listed(call_id: str, since: str | None = None) -> dict:
        found = [s for s in shipments if since is None or s["shipped_on"] >= since]
        return {"id": call_id, "tool": "list_shipments", "arguments": {"since": since} if since else {},
                "optional": ["since"], "defaults": {}, "origin": {}, "inputs_from": [],
                "result": {"shipments": found}}

    asked = {(c.steps[0]["id"], tuple(c.path)): c.value for c in candidates([listed("c1"), listed("c2", "2026-03-03")])}
    # 'the first shipment since March 3' is the one of March 3: the list without `since` holds it, but
    # third, and its first is March 1's; the question needs the option, so it is asked
    assert asked[("c2", ("shipments", 0, "weight_kg"))] == 3.5
    assert asked[("c1", ("shipments", 0, "weight_kg"))] == 1.5
