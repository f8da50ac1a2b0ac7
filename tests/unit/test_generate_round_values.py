"""Numbers tried inside a range are the round ones a user says, on a small MCP server written for
this test (never a zoo server): a parking fee for 10 to 1440 minutes is asked for 30 minutes, two
hours or eight hours, not for 11 or 725 minutes (the range's start plus one and its middle, which no
user types), nor for 100 (round, but no length of time people book)."""

from __future__ import annotations

import re

from ajet.generate.explore_values import in_range

from tests.unit.test_generate_rules import explore, tasks_of

GARAGE = '''
    from typing import Annotated
    from pydantic import Field

    @mcp.tool
    def parking_fee(minutes: Annotated[int, Field(description="How long the car stays, in minutes.",
                                                  ge=10, le=1440)]) -> dict:
        """The fee in EUR for parking the given number of minutes: 2 EUR an hour started, 20 at most."""
        return {"minutes": minutes, "fee_eur": min(20, 2 * -(-minutes // 60))}
'''

ROUND = {1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300, 500, 1000}
LENGTHS = {5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 360, 480, 720, 1440}  # minutes people say


def test_round_numbers_between_the_ends_of_a_wide_range_spread_on_a_log_scale():
    # 10 * 144 ** (1/4) = 34.6 -> 30; 10 * 144 ** (1/2) = 120 -> 100; 10 * 144 ** (3/4) = 416 -> 500
    assert in_range(10, 1440, "integer") == [10, 30, 100, 500, 1440]
    assert in_range(1, 50, "integer") == [1, 3, 10, 20, 50]
    assert in_range(0, 100, "integer") == [0, 3, 10, 30, 100]  # from 1 on a log scale: 0 has no logarithm
    assert in_range(1900, 2100, "integer") == [1900, 2000, 2100]  # one round number inside, no duplicates
    assert in_range(3, 9, "integer") == [3, 4, 5, 6, 7, 8, 9]  # a short range: every value
    assert in_range(-100, -20, "integer") == [-100, -60, -20]  # below 1, no log scale: the middle
    assert in_range(-50, 0, "integer") == [-50, -25, 0]
    assert in_range(0.0, 1.0, "number") == [0.0, 0.5, 1.0]  # decimals: the middle, as before


def test_minutes_are_spread_over_the_lengths_people_say_by_hand():
    # 15 * 40 ** (1/4) = 37.7 -> 45 (x1.19; 30 is x1.26 away); 15 * 40 ** (1/2) = 94.9 -> 90; 15 * 40 ** (3/4) = 239 -> 240
    assert in_range(15, 600, "integer", "duration_minutes") == [15, 45, 90, 240, 600]
    assert in_range(15, 600, "integer", "seats") == [15, 30, 100, 200, 600]  # not minutes: round numbers
    assert in_range(1, 50, "integer", "min_capacity") == [1, 3, 10, 20, 50]  # 'min' is a minimum, not minutes
    assert in_range(10, 1440, "integer", "minutes") == [10, 30, 120, 480, 1440]  # 416 -> 480 (x1.15; 360 x1.16)


async def test_a_wide_range_is_explored_and_asked_with_round_numbers(tmp_path):
    _, kept, _, yaml = await explore(tmp_path, GARAGE)
    tried = {row["arguments"]["minutes"] for row in kept if row["tool"] == "parking_fee"}
    assert {30, 120, 480} <= tried and tried <= LENGTHS | {10, 1440}, tried
    tasks = await tasks_of(yaml, tmp_path, n=20)
    asked = [t["answer"]["calls"][-1]["arguments"]["minutes"] for t in tasks]
    assert asked and set(asked) <= LENGTHS | {10, 1440}, asked
    assert any(str(t["answer"]["calls"][-1]["arguments"]["minutes"]) in t["query"] for t in tasks), tasks
    # whole hours are said as people say them, and only for a length that is whole hours
    in_hours = [t for t in tasks if re.search(r"\b(an|one|\d+|two|three|four|five|six|seven|eight|nine|ten) hours?\b", t["query"])]
    assert in_hours and all(t["answer"]["calls"][-1]["arguments"]["minutes"] % 60 == 0 for t in in_hours), in_hours
