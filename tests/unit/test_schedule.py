"""The schedule's order of call-first tasks (ajet.generate.schedule), on a hand-built bank of a rooms
server: one room with six bookings, three rooms with one each."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from ajet.generate.candidates import candidates
from ajet.generate.schedule import schedule

ROOMS = [{"room_id": f"rm-{n}", "name": name} for n, name in ((101, "Anchor"), (102, "Lighthouse"),
                                                             (201, "Compass"), (301, "Keel"))]
TITLES = ("Standup", "Retro", "Budget sync", "Design review", "1:1", "Hiring")


def rooms_bank() -> list[dict]:
    listed = {"id": "c1", "tool": "list_rooms", "arguments": {}, "optional": [], "defaults": {}, "origin": {},
              "inputs_from": [], "result": {"rooms": ROOMS}}
    bank = [listed]
    for i, room in enumerate(ROOMS):
        # the second room is the busy one: six bookings, the others one each
        titles = TITLES if i == 1 else TITLES[i:i + 1]
        bookings = [{"booking_id": f"bk-{i}{k}", "title": title, "organizer": f"Person {i}{k}",
                     "start": f"{9 + k:02d}:00"} for k, title in enumerate(titles)]
        bank.append({"id": f"c{i + 2}", "tool": "get_bookings", "arguments": {"room_id": room["room_id"], "date": "2025-09-10"},
                     "optional": [], "defaults": {}, "origin": {"room_id": "graph", "date": "description"},
                     "inputs_from": [{"argument": "room_id", "call": "c1", "path": ["rooms", i, "room_id"]}],
                     "result": {"room_id": room["room_id"], "bookings": bookings}})
    return bank


@pytest.mark.parametrize("seed", range(6))
def test_a_room_with_more_bookings_is_not_passed_on_more_often(seed):
    found = candidates(rooms_bank())
    by_room = Counter(c.steps[-1]["arguments"]["room_id"] for c in found if len(c.steps) == 2)
    assert by_room["rm-102"] >= 3 * by_room["rm-101"]  # the busy room has far more chains to ask

    plan = schedule(list(found), 60, 0.5, random.Random(seed))
    chains = [c.steps[-1]["arguments"]["room_id"] for c in plan if len(c.steps) == 2]
    assert len(chains) >= 8
    # every room is passed on once before any is passed on twice, and so on: the SFT model learns no
    # favourite room (shuffled, the busy room came up in most of the first chains)
    for start in range(0, 8, 4):
        assert sorted(chains[start:start + 4]) == sorted(r["room_id"] for r in ROOMS), chains
