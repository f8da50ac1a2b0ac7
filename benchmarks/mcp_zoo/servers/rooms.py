"""Meeting room booking MCP server for one office (a zoo server written here).

Room ids (rm-xxx) come from `list_rooms`, which filters by floor, capacity and a `has_video`
boolean; bookings are per date (YYYY-MM-DD) with HH:MM times and a boolean to include cancelled
ones; `find_free_slots` takes a duration in minutes. `current_time` reads the real clock, so its
answer changes between two identical calls: the one tool here whose result is never a reference.
Bookings cover the week of 2025-09-08 to 2025-09-12 (seeded, invented); other dates have none.
Errors are plain results (`{"error": ...}`).

    python rooms.py        # serve over stdio
"""

from __future__ import annotations

import random
from datetime import date, datetime, timezone
from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

mcp = FastMCP("rooms", instructions="Book meeting rooms at the Harbor Street office: find rooms, see bookings, "
              "find free time.")

OPEN, CLOSE = 8 * 60, 18 * 60  # the office's hours, in minutes after midnight
WEEK = [date(2025, 9, d) for d in range(8, 13)]
ROOMS = [  # id, name, floor, capacity, has_video
    ("rm-101", "Anchor", 1, 4, False), ("rm-102", "Lighthouse", 1, 8, True), ("rm-104", "Dock", 1, 2, False),
    ("rm-201", "Compass", 2, 6, True), ("rm-203", "Harbor View", 2, 14, True), ("rm-205", "Buoy", 2, 3, False),
    ("rm-301", "Keel", 3, 10, True), ("rm-302", "Mast", 3, 5, False),
]
ORGANIZERS = ["Nadia Petrova", "Owen Gallagher", "Fatima Zahra", "Lukas Brandt", "Mei Ling", "Carlos Ruiz"]
TITLES = ["Sprint planning", "1:1", "Design review", "Customer call", "Interview", "All-hands prep",
          "Budget sync", "Retro"]


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _minutes(text: str) -> int:
    hours, mins = text.split(":")
    return int(hours) * 60 + int(mins)


def _build() -> dict[tuple[str, str], list[dict]]:
    rng = random.Random(908)
    bookings: dict[tuple[str, str], list[dict]] = {}
    serial = 5000
    for day in WEEK:
        for room_id, *_ in ROOMS:
            start, items = OPEN + 30 * rng.randrange(0, 3), []
            while True:
                start += 30 * rng.randrange(0, 5)
                length = rng.choice([30, 30, 60, 60, 90, 120])
                if start + length > CLOSE:
                    break
                serial += rng.randrange(1, 9)
                items.append({"booking_id": f"bk-{serial}", "start": _clock(start), "end": _clock(start + length),
                              "title": rng.choice(TITLES), "organizer": rng.choice(ORGANIZERS),
                              "status": "cancelled" if rng.random() < 0.15 else "confirmed"})
                start += length
            bookings[(room_id, day.isoformat())] = items
    return bookings


BOOKINGS = _build()


def _check(room_id: str, day: str) -> str | None:
    if room_id not in {r[0] for r in ROOMS}:
        return f"unknown room {room_id!r}; list rooms with list_rooms"
    try:
        date.fromisoformat(day)
    except ValueError:
        return f"date must be YYYY-MM-DD, got {day!r}"
    return None


@mcp.tool
def list_rooms(
    floor: Annotated[int | None, Field(description="Only rooms on this floor (1-3).")] = None,
    min_capacity: Annotated[int, Field(description="Only rooms seating at least this many people.")] = 1,
    has_video: Annotated[bool, Field(description="Only rooms with a video conferencing screen.")] = False,
) -> dict:
    """List meeting rooms with their id, name, floor, capacity and whether they have video conferencing."""
    rooms = [{"room_id": rid, "name": name, "floor": fl, "capacity": cap, "has_video": video}
             for rid, name, fl, cap, video in ROOMS
             if floor in (None, fl) and cap >= min_capacity and (video or not has_video)]
    return {"rooms": rooms}


@mcp.tool
def get_bookings(
    room_id: Annotated[str, Field(description="Room id from list_rooms.")],
    date: Annotated[str, Field(description="Day, YYYY-MM-DD.")],
    include_cancelled: Annotated[bool, Field(description="Also show cancelled bookings.")] = False,
) -> dict:
    """A room's bookings on one day, in time order: start and end (HH:MM), title, organizer, status."""
    problem = _check(room_id, date)
    if problem:
        return {"error": problem}
    items = [b for b in BOOKINGS.get((room_id, date), []) if include_cancelled or b["status"] == "confirmed"]
    return {"room_id": room_id, "date": date, "bookings": items}


@mcp.tool
def find_free_slots(
    room_id: Annotated[str, Field(description="Room id from list_rooms.")],
    date: Annotated[str, Field(description="Day, YYYY-MM-DD.")],
    duration_minutes: Annotated[int, Field(description="Length of the meeting in minutes.", ge=15, le=600)] = 30,
) -> dict:
    """Free periods in a room on a day (office hours 08:00-18:00) long enough for a meeting of the given length.
    Cancelled bookings leave their time free."""
    problem = _check(room_id, date)
    if problem:
        return {"error": problem}
    taken = sorted((_minutes(b["start"]), _minutes(b["end"])) for b in BOOKINGS.get((room_id, date), [])
                   if b["status"] == "confirmed")
    free, cursor = [], OPEN
    for start, end in [*taken, (CLOSE, CLOSE)]:
        if start - cursor >= duration_minutes:
            free.append({"start": _clock(cursor), "end": _clock(start)})
        cursor = max(cursor, end)
    return {"room_id": room_id, "date": date, "duration_minutes": duration_minutes, "free": free}


@mcp.tool
def current_time() -> dict:
    """The current date and time at the office (UTC)."""
    now = datetime.now(timezone.utc)
    return {"now": now.isoformat(timespec="seconds"), "weekday": now.strftime("%A")}


if __name__ == "__main__":
    mcp.run(show_banner=False)
