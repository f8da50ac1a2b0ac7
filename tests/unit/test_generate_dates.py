"""Dates and people as users say them, on a small MCP server written for this test (never a zoo server):
a date argument (`since`) takes the days a log returned, not only the description's example; a question
says such a day as 'since March 4, 2025' (or as the server wants it) while the call sends 2025-03-04; a
labelled 'Author: Ada Lovelace <ada@example.org>' is a name and an address apart; and a line of code is
no labelled value."""

from __future__ import annotations

import random
import re

from ajet.generate.explore_values import ArgSpec
from ajet.generate.glosses import day_words, days_for
from ajet.generate.phrasing import said
from ajet.generate.placement import place
from ajet.generate.result_data import structured
from ajet.generate.text_values import day_of

from tests.unit.test_generate_rules import explore, tasks_of

HISTORY = '''
    from typing import Annotated
    from pydantic import Field

    LOG = [("a1f3", "Ada Lovelace", "ada@example.org", "2025-03-04 10:00:00 +0000", "Add the engine"),
           ("b2e4", "Grace Hopper", "grace@example.org", "2025-02-11 09:30:00 +0000", "Fix the compiler"),
           ("c3d5", "Alan Turing", "alan@example.org", "2025-01-20 16:45:00 +0000", "Start the machine")]

    def entries(rows):
        return "\\n\\n".join(f"Commit: {c}\\nAuthor: {n} <{e}>\\nDate: {d}\\nMessage: {m}" for c, n, e, d, m in rows)

    @mcp.tool
    def history() -> str:
        """The whole log, newest first."""
        return entries(LOG)

    @mcp.tool
    def commits_since(since: Annotated[str, Field(description="Only commits on or after this day, e.g. 2024-12-01")]) -> str:
        """The commits made on or after a day."""
        return entries([row for row in LOG if row[3][:10] >= since]) or "No commits found"
'''


def test_a_results_date_feeds_a_day_argument_by_hand():
    since = ArgSpec("since", {"type": "string", "description": "Only commits on or after this day, e.g. 2024-12-01"},
                    "string", False)
    start = ArgSpec("start_timestamp", {"type": "string", "description": "Start timestamp. Accepts ISO 8601 "
                                        "format (e.g., '2024-01-15T14:30:25') or absolute dates (e.g., '2024-01-15')"},
                    "string", False)
    unit = ArgSpec("from_unit", {"type": "string", "description": "Unit to convert from"}, "string", True)
    assert day_of(since, "2025-03-04 10:00:00 +0000") == "2025-03-04"
    assert day_of(start, "2024-04-02 09:05:00+00:00") == "2024-04-02"  # its description shows a bare day
    assert day_of(since, "Ada Lovelace") is None and day_of(unit, "2025-03-04") is None


def test_a_day_is_said_in_words_and_a_bound_with_since_or_until_by_hand():
    assert day_words("2025-03-04") == "March 4, 2025" and day_words("2025-13-04") is None
    assert day_words("2025-03-04T10:00:00") is None
    # all or none of a call's days, for half the candidates
    said = [days_for({"since": "2025-03-04", "until": "2025-03-09"}, f"candidate {i}") for i in range(40)]
    assert {len(s) for s in said} == {0, 2} and 10 <= sum(bool(s) for s in said) <= 30
    rng = random.Random(0)
    assert place("start_timestamp", "March 4, 2025", "", rng) == "since March 4, 2025"
    assert place("end_date", "2025-03-09", "", rng) == "until 2025-03-09"
    assert place("before", "2025-03-09", "", rng) == "until 2025-03-09"
    assert not place("from_unit", "MMBtu", "", rng).startswith("since")


def test_a_month_is_said_with_the_one_year_its_description_names_by_hand():
    def said_as(description: str) -> set[str]:
        return {place("month", 7, description, random.Random(seed)) for seed in range(40)}

    # 'a month of 2024': users say the year as often as not; the call still sends 7
    assert said_as("A statistic over a month of 2024 at a station.") == {"in July", "in July 2024"}
    assert said("month", 7, "What was the mean wind at KSEA in July 2024?")
    assert said_as("A statistic over a month at a station.") == {"in July"}  # no year named
    assert said_as("Months of 2023 and 2024.") == {"in July"}  # which year is the user's to say
    assert said_as("Monthly sales since 2019.") == {"in July"}  # a year, but not the months'


def test_a_time_of_day_is_said_at_and_whole_hours_in_words_by_hand():
    rng = random.Random(0)
    assert place("start", "14:00", "", rng) == "at 14:00"  # a booking's start, never 'on 14:00'
    assert place("end", "16:00", "", rng) == "ending at 16:00"  # the slot that ends then, not one at 16:00
    assert place("start_time", "09:30", "", rng) == "since 09:30"  # a bound of a span, as before
    said_as = {place("duration_minutes", 120, "", random.Random(seed)) for seed in range(30)}
    assert said_as == {"for 120 minutes", "for 2 hours", "for two hours"}, said_as
    assert {place("duration_minutes", 60, "", random.Random(seed)) for seed in range(30)} \
        == {"for 60 minutes", "for an hour", "for one hour", "for 1 hour"}
    assert {place("duration_minutes", 90, "", random.Random(seed)) for seed in range(10)} == {"for 90 minutes"}
    assert said("duration_minutes", 120, "Is rm-1 free for two hours on May 2?")
    assert said("duration_minutes", 60, "Find me an hour in rm-203.")
    assert not said("duration_minutes", 60, "Find me 6 hours in rm-203.")
    assert not said("duration_minutes", 120, "Is rm-1 free for twelve hours?")
    assert not said("capacity", 120, "Room for two hours?")  # not minutes: hours say nothing of it


def test_a_mailbox_is_a_name_and_an_address_and_code_is_no_label_by_hand():
    assert structured("Commit: a1f3\nAuthor: Ada Lovelace <ada@example.org>\nDate: 2025-03-04") == {
        "Commit": "a1f3", "Author": "Ada Lovelace", "Author email": "ada@example.org", "Date": "2025-03-04"}
    diff = "@@ -1,3 +1,3 @@\n def last_frost(zone: str) -> str:\n-    return 'May 10'\n+    return 'May 1'"
    assert structured(diff) == diff  # no record: 'def last_frost(zone' is no label


async def test_days_a_log_returned_are_asked_in_words_and_sent_as_iso(tmp_path):
    _, kept, _, yaml = await explore(tmp_path, HISTORY)
    log_days = {"2025-03-04", "2025-02-11", "2025-01-20"}
    sent = {r["arguments"]["since"] for r in kept if r["tool"] == "commits_since"}
    assert sent & log_days, sent  # the description's example alone would be 2024-12-01
    rows = await tasks_of(yaml, tmp_path, n=60)
    dated = [r for r in rows if r["answer"]["calls"][0]["name"] == "commits_since"
             and r["answer"]["calls"][0]["arguments"]["since"] in log_days]
    in_words = [r for r in dated if day_words(r["answer"]["calls"][0]["arguments"]["since"]) in r["query"]]
    as_sent = [r for r in dated if r["answer"]["calls"][0]["arguments"]["since"] in r["query"]]
    assert in_words and as_sent and len(in_words) + len(as_sent) == len(dated), [r["query"] for r in dated]
    assert all(re.search(r"\bsince\b", r["query"], re.I) for r in dated)
    # who made a commit is answered with the name; the address is an answer of its own
    finals = {r["answer"]["final"] for r in rows}
    assert "Ada Lovelace <ada@example.org>" not in finals and finals & {"Ada Lovelace", "Grace Hopper", "Alan Turing"}
