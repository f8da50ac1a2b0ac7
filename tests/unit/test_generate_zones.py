"""Time zones as users name them, on a small MCP server written for this test (never a zoo server): a
call sends `Asia/Tokyo`, its question says "Tokyo"; and a time converted between zones lands on today's
date, so its weekday is no answer (wrong tomorrow) while its time of day stays one."""

from __future__ import annotations

import zoneinfo
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ajet.generate.explore_values import ArgSpec
from ajet.generate.glosses import cities_for, zone_city
from ajet.generate.result_data import volatile_paths
from ajet.generate.standard_values import canonical_zones, time_zones, zone_names
from ajet.generate.text_values import fits_format

from tests.unit.test_generate_rules import explore, tasks_of

CLOCKS = '''
    from datetime import datetime, timedelta
    from typing import Annotated
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    from pydantic import Field

    @mcp.tool
    def convert(
        source_zone: Annotated[str, Field(description="Source IANA time zone name.")],
        time: Annotated[str, Field(description="Time of day in 24-hour format (HH:MM).")],
        target_zone: Annotated[str, Field(description="Target IANA time zone name.")],
    ) -> dict:
        """Convert a time of day between two time zones (today's date)."""
        try:
            source, target = ZoneInfo(source_zone), ZoneInfo(target_zone)
            hour, minute = (int(p) for p in time.split(":"))
        except (ZoneInfoNotFoundError, ValueError, KeyError):
            raise ValueError("Invalid time zone or time")
        moment = datetime.now(source).replace(hour=hour, minute=minute, second=0, microsecond=0)
        there = moment.astimezone(target)
        offset = (there.utcoffset() - moment.utcoffset()).total_seconds() / 3600
        return {"source": {"zone": source_zone, "datetime": moment.isoformat(), "weekday": moment.strftime("%A")},
                "target": {"zone": target_zone, "datetime": there.isoformat(), "weekday": there.strftime("%A")},
                "time_difference": f"{offset:+.1f}h"}
'''


def test_a_zone_is_said_as_its_city_by_hand():
    assert zone_city("America/Goose_Bay") == "Goose Bay"
    assert zone_city("America/Argentina/Buenos_Aires") == "Buenos Aires"
    assert zone_city("Asia/Tokyo") == "Tokyo"
    # no city: UTC, an Etc offset, a zone the tz database does not list, a word that is no zone
    for value in ("UTC", "Etc/GMT+5", "Mars/Olympus_Mons", "Tokyo", "a/b", 7, None):
        assert zone_city(value) is None
    # all of a call's zones as cities, or none (never "from Asia/Tokyo to Lima"); which calls, by the seed
    said = [cities_for({"from": "Asia/Tokyo", "to": "America/Lima", "at": "09:30"}, f"seed-{i}") for i in range(40)]
    assert {"from": "Tokyo", "to": "Lima"} in said and {} in said
    assert all(s in ({}, {"from": "Tokyo", "to": "Lima"}) for s in said)
    assert sum(bool(s) for s in said) > len(said) / 2  # users name cities more often than zones
    assert cities_for({"zone": "UTC", "at": "09:30"}, "seed-0") == {}


def test_the_zones_tried_are_canonical_and_even_over_the_areas_by_hand():
    if not any((Path(base) / "zone.tab").is_file() for base in zoneinfo.TZPATH):
        pytest.skip("no zone.tab in the tz database (zoneinfo.TZPATH): the zones tried are every zone name")
    assert "Asia/Ashkhabad" in zone_names() and "Asia/Ashkhabad" not in canonical_zones()  # a backward link
    assert "America/Argentina/Buenos_Aires" in canonical_zones()
    zones = time_zones(48)
    areas = Counter(zone.split("/")[0] for zone in zones)
    # America has three times Asia's zones in the database; a bank that large in it puts any city there
    assert len(zones) == 48 and set(areas.values()) == {8} and len(areas) == 6
    assert set(zones) <= canonical_zones() and any(zone.count("/") == 2 for zone in time_zones(96))


def test_a_result_dated_today_has_a_volatile_weekday_by_hand():
    now = datetime(2027, 5, 1, 7, 40, tzinfo=timezone.utc)  # hours from the times converted: no clock reading
    converted = {"target": {"datetime": "2027-05-01T19:00:00+09:00", "weekday": "Saturday", "month": "May"},
                 "source": {"datetime": "2027-05-01T10:00:00+00:00", "weekday": "Saturday"}, "offset": "+9.0h"}
    # the weekdays and month move with the day of the call; the date-times keep their time of day as answers
    assert volatile_paths(converted, converted, now, {"time": "10:00"}) == [
        ("target", "weekday"), ("target", "month"), ("source", "weekday")]
    # a zone that has a month inside a word ('America/Juneau') dates nothing
    assert volatile_paths(converted, converted, now, {"zone": "America/Juneau", "time": "10:00"}) == [
        ("target", "weekday"), ("target", "month"), ("source", "weekday")]
    # the same result for a date the user gave is no reading of the calendar
    assert volatile_paths(converted, converted, now, {"date": "2027-05-01", "time": "10:00"}) == []
    # nor is a result dated another day
    assert volatile_paths({"day": "2025-03-03", "weekday": "Monday"}, {"day": "2025-03-03", "weekday": "Monday"},
                          now, {"room": "R-1"}) == []


def test_a_value_of_another_shape_than_the_named_format_feeds_nothing_by_hand():
    time = ArgSpec("time", {"type": "string", "description": "Time of day in 24-hour format (HH:MM)."}, "string", True)
    day = ArgSpec("day", {"type": "string", "format": "date"}, "string", True)
    free = ArgSpec("note", {"type": "string", "description": "Any text."}, "string", True)
    assert fits_format(time, "16:45") and fits_format(time, "9:30")
    assert not fits_format(time, "+2.0h") and not fits_format(time, "2027-05-01T16:45:00+00:00")
    assert fits_format(day, "2027-05-01") and not fits_format(day, "May 1st")
    assert fits_format(free, "+2.0h") and fits_format(time, 7)  # no format named; not a text


async def test_questions_name_cities_and_calls_send_zones(tmp_path):
    _, kept, dropped, yaml = await explore(tmp_path, CLOCKS)
    conversions = [r for r in kept if r["tool"] == "convert"]
    assert conversions
    # the time difference a conversion returned ('+9.0h') is never sent as a time of day
    assert all(":" in r["arguments"]["time"] for r in kept + dropped if r["tool"] == "convert"
               and "time" in r["arguments"] and "probe" not in str(r["arguments"]["time"]))
    # the weekday of a conversion is today's: never an answer; the converted time is
    assert all(["target", "weekday"] in r.get("volatile", []) for r in conversions)
    rows = await tasks_of(yaml, tmp_path, n=40)
    assert rows and not any(r["answer"]["final"] in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                                                     "Saturday", "Sunday") for r in rows)
    with_city = 0
    for row in rows:
        arguments = row["answer"]["calls"][0]["arguments"]
        zones = [arguments[k] for k in ("source_zone", "target_zone")]
        cities = [zone_city(z) for z in zones]
        if all(c and c in row["query"] and z not in row["query"] for z, c in zip(zones, cities)):
            with_city += 1
        else:  # a question that does not say the cities says the zones the call sends (UTC has no city)
            assert all(z in row["query"] for z, c in zip(zones, cities) if c is None or c not in row["query"]), row
    assert with_city >= len(rows) / 2, [r["query"] for r in rows]
