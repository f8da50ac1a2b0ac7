"""Days that hold records, and the records asked about, on a small MCP server written for this test
(never a zoo server): a tool taking one day whose every kept call came back empty (the days tried came
from the 'YYYY-MM-DD' format, and the server's records lie on three days of its own) is called outward
from the days tried until a day holds data; the days around it are tried too, and the kept calls of
every tool taking a day are made again on the days found. A tool whose only number is its list's
length gets its records' fields asked in turn with that length, not after every length question; a
record is named by a title only when no other record of its list has that title; and the first and
last of records in time order are named by their place ('the first opening')."""

from __future__ import annotations

import json
import re
from datetime import date

import random

from ajet.generate import explore_variants
from ajet.generate.candidates import Candidate
from ajet.generate.explore_variants import _on_day
from ajet.generate.record_names import item_label, only_record, records_noun, uncut
from ajet.generate.result_data import COUNT
from ajet.generate.schedule import _queue

from tests.unit.test_generate_rules import explore, tasks_of

SHELTER = '''
    from typing import Annotated
    from pydantic import Field

    SHELTERS = {"sh-11": "North Paws", "sh-12": "Harbor Rescue"}
    INTAKE = {("sh-11", "2025-04-22"): ["Biscuit", "Pepper"], ("sh-11", "2025-04-23"): ["Mochi"],
              ("sh-11", "2025-04-24"): ["Rex", "Luna", "Ziggy"], ("sh-12", "2025-04-24"): ["Olive"]}

    @mcp.tool
    def list_shelters() -> dict:
        """The animal shelters, with their ids."""
        return {"shelters": [{"shelter_id": k, "name": v} for k, v in SHELTERS.items()]}

    @mcp.tool
    def intake(shelter_id: Annotated[str, Field(description="Shelter id from list_shelters.")],
               date: Annotated[str, Field(description="Day, YYYY-MM-DD.")]) -> dict:
        """The animals a shelter took in on one day."""
        if shelter_id not in SHELTERS:
            return {"error": f"unknown shelter {shelter_id!r}"}
        animals = [{"name": name, "kind": "dog" if len(name) % 2 else "cat"} for name in INTAKE.get((shelter_id, date), [])]
        return {"shelter_id": shelter_id, "date": date, "animals": animals}

    @mcp.tool
    def volunteers(shelter_id: Annotated[str, Field(description="Shelter id from list_shelters.")],
                   date: Annotated[str, Field(description="Day, YYYY-MM-DD.")]) -> dict:
        """How many volunteers are on shift at a shelter on a day: 2, and 5 on a day with intake."""
        if shelter_id not in SHELTERS:
            return {"error": f"unknown shelter {shelter_id!r}"}
        busy = any(day == date for _, day in INTAKE)
        return {"shelter_id": shelter_id, "date": date, "on_shift": 5 if busy else 2}
'''

DATA_DAYS = {"2025-04-22", "2025-04-23", "2025-04-24"}


def _with_data(kept: list[dict], tool: str) -> list[dict]:
    return [r for r in kept if r["tool"] == tool and r["arguments"]["date"] in DATA_DAYS]


async def test_a_day_tool_that_only_met_empty_days_is_searched_until_a_day_holds_records(tmp_path):
    report, kept, dropped, yaml = await explore(tmp_path, SHELTER)
    records = [r for r in _with_data(kept, "intake") if '"animals":[]' not in r["content"]]
    # its days are found whole: every day with records is in the bank, not only the first one met
    assert {r["arguments"]["date"] for r in records} == DATA_DAYS, records
    # the other tool taking a day is made again on the days found (5 volunteers there, 2 elsewhere)
    assert any('"on_shift":5' in r["content"] for r in _with_data(kept, "volunteers")), kept
    # misses are filed as the search's, and cost what they cost: one call each, at most the cap
    misses = [r for r in dropped if r["reason"] == "day_search"]
    assert misses and report.dropped["day_search"] == len(misses) <= explore_variants._SEEK_CALLS
    assert all(r["tool"] == "intake" and r["arguments"]["date"] not in DATA_DAYS for r in misses)
    tasks = await tasks_of(yaml, tmp_path, n=60)
    asked = [t for t in tasks if t["answer"]["calls"][-1]["name"] == "intake"
             and t["answer"]["calls"][-1]["arguments"]["date"] in DATA_DAYS]
    assert asked and any(t["answer"]["final"] not in (0, "0") for t in asked), asked
    # its records are asked about (an animal's kind), not only how many came in
    assert any(t["metadata"]["target"][-1] != COUNT for t in asked), [t["metadata"]["target"] for t in asked]
    # and the calls made again on those days kept their links: a chain from list_shelters reaches one
    assert any([c["name"] for c in t["answer"]["calls"]] == ["list_shelters", "intake"] for t in asked), asked


async def test_without_the_search_the_bank_holds_no_record_of_that_tool(tmp_path, monkeypatch):
    monkeypatch.setattr(explore_variants, "_SEEK_CALLS", 0)
    report, kept, dropped, _ = await explore(tmp_path, SHELTER)
    assert [r for r in kept if r["tool"] == "intake"] and not _with_data(kept, "intake")
    assert report.dropped["day_search"] == 0


async def test_a_search_that_finds_nothing_stops_at_its_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(explore_variants, "_SEEK_CALLS", 12)
    body = SHELTER.replace('"2025-04-2', '"1990-04-2')  # records 35 years before any day tried
    report, kept, dropped, _ = await explore(tmp_path, body)
    assert report.dropped["day_search"] == 12
    assert [r for r in kept if r["tool"] == "intake"]  # the empty days are still answers: no records that day


def test_a_day_moves_with_its_time_of_day_by_hand():
    assert _on_day("2025-06-02", date(2025, 4, 23)) == "2025-04-23"
    assert _on_day("2025-06-02T09:30:00Z", date(2025, 4, 23)) == "2025-04-23T09:30:00Z"


def _cand(call: int, path: list, value: object) -> Candidate:
    return Candidate([{"id": f"c{call:04d}", "tool": "bookings", "arguments": {}}], path, value)


def test_a_list_length_alone_does_not_starve_the_records_fields_by_hand():
    lengths = [_cand(i, ["bookings", COUNT], 3) for i in range(10)]
    fields = [_cand(i, ["bookings", 0, key], f"{key} {i}") for i in range(10) for key in ("organizer", "start")]
    first = [c.path[-1] for c in _queue(lengths + fields, random.Random(0), 2)[:6]]
    assert {"organizer", "start", COUNT} <= set(first[:3]), first  # each field once before any twice
    # a real number still goes first: the judge checks it exactly (a room's capacity before its name)
    numbers = [_cand(i, ["bookings", 0, "seats"], 4 + i) for i in range(10)]
    order = [c.path[-1] for c in _queue(lengths + fields + numbers, random.Random(0), 1)]
    assert set(order[:20]) == {"seats", COUNT} and set(order[20:]) == {"organizer", "start"}


def test_a_title_two_records_share_names_neither_by_hand():
    day = {"bookings": [{"booking_id": "bk-1", "title": "Customer call", "organizer": "Ada"},
                        {"booking_id": "bk-2", "title": "Customer call", "organizer": "Grace"},
                        {"booking_id": "bk-3", "title": "Retro", "organizer": "Alan"}]}
    assert item_label(day, ["bookings", 1, "organizer"]) == ("booking_id", "bk-2")
    assert item_label(day, ["bookings", 2, "organizer"]) == ("title", "Retro")
    no_ids = {"bookings": [{k: v for k, v in b.items() if k != "booking_id"} for b in day["bookings"]]}
    assert item_label(no_ids, ["bookings", 1, "title"]) == ("organizer", "Grace")
    assert item_label(no_ids, ["bookings", 1, "organizer"]) == ("", "")  # nothing names it: no question


def test_the_first_of_records_in_time_order_is_named_by_its_place_by_hand():
    slots = {"room_id": "rm-1", "free": [{"start": "9:30", "end": "10:00"}, {"start": "10:30", "end": "12:00"},
                                         {"start": "14:00", "end": "18:00"}]}
    assert item_label(slots, ["free", 0, "start"]) == ("position", "the first free slot")  # '9:30' before '10:30'
    assert item_label(slots, ["free", 1, "start"]) == ("end", "12:00")  # between the ends: by a field
    # the last only of a list that is all there is: a call that a limit or a page may have cut is not
    assert item_label(slots, ["free", 2, "start"]) == ("end", "18:00")
    assert item_label(slots, ["free", 2, "start"], whole=True) == ("position", "the last free slot")
    day = {"arguments": {"room_id": "rm-1"}, "result": json.dumps(slots)}
    assert uncut(day) and not uncut({**day, "optional": ["max_results"]})
    assert not uncut({**day, "arguments": {"room_id": "rm-1", "page": 2}})
    assert not uncut({**day, "result": json.dumps({**slots, "next_cursor": "x"})})
    log = {"commits": [{"sha": "c3", "date": "2025-03-04T10:00:00Z", "message": "fix"},
                       {"sha": "c2", "date": "2025-03-01T08:00:00Z", "message": "add"}]}
    assert item_label(log, ["commits", 0, "message"]) == ("position", "the latest commit")  # newest first
    assert item_label(log, ["commits", 1, "message"], whole=True) == ("position", "the earliest commit")
    shuffled = {"free_slots": [slots["free"][1], slots["free"][0], slots["free"][2]]}
    assert item_label(shuffled, ["free_slots", 0, "start"]) == ("end", "12:00")  # no order, no place
    same_day = {"visits": [{"day": "2025-03-04", "who": "Ada"}, {"day": "2025-03-04", "who": "Alan"}]}
    assert item_label(same_day, ["visits", 0, "day"]) == ("who", "Ada")  # a tie is no order
    titled = {"bookings": [{"start": "09:00", "title": "Retro"}, {"start": "10:00", "title": "Standup"}]}
    assert item_label(titled, ["bookings", 0, "start"]) == ("title", "Retro")  # a title names it first


def test_the_only_record_of_a_list_is_named_by_its_noun_by_hand():
    one_slot = {"room_id": "rm-1", "free": [{"start": "08:00", "end": "18:00"}]}
    step = {"id": "c1", "tool": "find_free_slots", "arguments": {"room_id": "rm-1"}, "result": json.dumps(one_slot)}
    # 'the start in rm-1' a booking has too: the question says whose start it is
    assert only_record(one_slot, ["free", 0, "start"]) == "the free slot"
    assert Candidate([step], ["free", 0, "start"], "08:00").mention() == {"room_id": "rm-1", "position": "the free slot"}
    two = {"free": one_slot["free"] * 2}
    assert only_record(two, ["free", 0, "start"]) is None  # several: item_label names which
    assert only_record({"bookings": [{"booking_id": "bk-1"}]}, ["bookings", 0, "booking_id"]) is None  # said once
    assert only_record({"items": [{"price": 3}]}, ["items", 0, "price"]) is None  # 'the one' names nothing
    assert only_record({"tags": ["a"]}, ["tags", 0]) is None and only_record(one_slot, ["room_id"]) is None
    member = {"members": [{"member_id": "M-1", "name": "Ana Ruiz", "branch": "Central"}]}
    assert only_record(member, ["members", 0, "branch"]) == "the member"
    assert only_record(member, ["members", 0, "branch"], ["ana ruiz"]) is None  # the user named the record


def test_records_are_called_by_their_list_key_and_spans_of_time_slots_by_hand():
    spans = [{"start": "9:30", "end": "10:00"}, {"from": "2025-01-02", "until": "2025-01-05"}]
    assert records_noun("free", spans) == "free slots"  # the key is no noun: the records say what they are
    assert records_noun("free", [{"start": "9:30", "note": "10:00"}]) == "free ones"  # no end: no span
    assert records_noun("free", [{"start": "soon", "end": "later"}]) == "free ones"  # no times: no span
    assert records_noun("free", []) == "free ones"
    assert records_noun("bookings", spans) == "bookings"  # a plural noun is kept
    assert records_noun("ticketList", []) == "tickets"
    assert records_noun("items", spans) == "items"


OPEN = {"2025-05-06": [("08:30", "09:00"), ("11:00", "12:30"), ("15:00", "17:00")],
        "2025-05-07": [("10:00", "10:45"), ("13:15", "16:00")]}


def clinic(tool: str, doc: str, list_key: str) -> str:
    """A one-tool clinic server whose result lists the day's free spans of OPEN under `list_key`."""
    return f'''
    from typing import Annotated
    from pydantic import Field

    OPEN = {OPEN!r}

    @mcp.tool
    def {tool}(day: Annotated[str, Field(description="Day, YYYY-MM-DD; the clinic lists 2025-05-06 and 2025-05-07.")]) -> dict:
        """{doc}"""
        if day not in OPEN:
            return {{"error": f"no schedule for {{day!r}}"}}
        return {{"day": day, "{list_key}": [{{"start": a, "end": b}} for a, b in OPEN[day]]}}
'''


CLINIC = clinic("openings", "The free appointment slots of the clinic on one day, earliest first.", "openings")
GAPS = clinic("gaps", "The clinic's free time on one day.", "free")


async def test_questions_ask_for_the_first_and_last_opening_and_their_answers_are_those(tmp_path):
    _, kept, _, yaml = await explore(tmp_path, CLINIC)
    assert any(r["tool"] == "openings" and '"openings":[{' in r["content"] for r in kept), kept
    tasks = await tasks_of(yaml, tmp_path, n=40)
    for word, index in (("first", 0), ("last", -1)):
        asked = [t for t in tasks if f"the {word} opening" in t["query"]]
        assert asked, (word, [t["query"] for t in tasks])
        for task in asked:
            day = task["answer"]["calls"][-1]["arguments"]["day"]
            assert task["answer"]["final"] in OPEN[day][index], (task["query"], task["answer"])
            assert task["metadata"]["target"][:2] == ["openings", index % len(OPEN[day])], task["metadata"]["target"]


async def test_a_list_key_that_is_no_noun_is_asked_by_what_its_records_are(tmp_path):
    """`free` holds spans of time: 'How many free slots ...', never 'number of free'; a record named by its
    place is said first, as whose field is asked: 'the start of the first free slot on May 6, 2025', never
    'the start on May 6 on the first free slot'."""
    _, _, _, yaml = await explore(tmp_path, GAPS)
    tasks = await tasks_of(yaml, tmp_path, n=40)
    counted = [t for t in tasks if t["metadata"]["target"][-1] == COUNT]
    assert counted, [t["query"] for t in tasks]
    for task in counted:
        assert "free slots" in task["query"], task["query"]
        day = task["answer"]["calls"][-1]["arguments"]["day"]
        assert task["answer"]["final"] == len(OPEN[day]), (task["query"], task["answer"])
    assert not [t["query"] for t in tasks if re.search(r"free (?!slot)", t["query"])]
    placed = [t["query"] for t in tasks if re.search(r"\b(first|last) free slot", t["query"])]
    assert placed, [t["query"] for t in tasks]
    for query in placed:
        assert re.search(r"\b(start|end) of the (first|last) free slot\b", query, re.IGNORECASE), query
        assert not query.startswith("Of "), query
