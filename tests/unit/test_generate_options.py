"""Optional arguments, each on a small parcels MCP server written for these tests (never a zoo server):
every optional value is also sent alone, so that a question names one filter and its call sends that
one; a question never names an option its answer does not need."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.generate.explore import explore_server
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
