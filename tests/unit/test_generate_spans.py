"""Spans of days and lists written as text, on small MCP servers written for this test (never a zoo
server): a tool bounded by a start and an end day is also called with a few days around a day its
results name, and asked as users ask ('between March 2 and March 10, 2025'); a line of text that names
an id states its quantities ('13.0 km round trip, 820 m gain'), so a search that already answers is
asked alone, and a chain whose last answer that line already states is no task."""

from __future__ import annotations

import random
from datetime import date

from ajet.generate.chain_checks import passed_lines, stated_before
from ajet.generate.explore_plan import _inverted
from ajet.generate.explore_variants import VariedCalls
from ajet.generate.placement import places
from ajet.generate.phrasing import said
from ajet.generate.result_data import structured

from tests.unit.test_generate_rules import explore, tasks_of

LOG = '''
    from typing import Annotated
    from pydantic import Field

    LOG = [("a1f3", "Ada Lovelace", "2025-03-04 10:00:00 +0000", "Add the engine"),
           ("b2e4", "Grace Hopper", "2025-02-11 09:30:00 +0000", "Fix the compiler"),
           ("c3d5", "Alan Turing", "2025-01-20 16:45:00 +0000", "Start the machine")]

    @mcp.tool
    def commits(start_date: Annotated[str, Field(description="First day, e.g. 2025-01-01")],
                end_date: Annotated[str, Field(description="Last day, e.g. 2025-12-31")]) -> str:
        """The commits made between two days."""
        rows = [row for row in LOG if start_date <= row[2][:10] <= end_date]
        return "\\n\\n".join(f"Commit: {c}\\nAuthor: {n}\\nDate: {d}\\nMessage: {m}" for c, n, d, m in rows) \\
            or "No commits found"
'''

LOG_DAYS = {date(2025, 3, 4), date(2025, 2, 11), date(2025, 1, 20)}


def _spans(kept: list[dict]) -> list[tuple[date, date]]:
    return [(date.fromisoformat(r["arguments"]["start_date"]), date.fromisoformat(r["arguments"]["end_date"]))
            for r in kept if r["tool"] == "commits"]


def _narrow(spans: list[tuple[date, date]]) -> list[tuple[date, date]]:
    """The spans of at most a week that hold exactly one day of the log."""
    return [(a, b) for a, b in spans if (b - a).days <= 7 and sum(a <= d <= b for d in LOG_DAYS) == 1]


def test_a_span_is_said_between_its_days_with_one_year_by_hand():
    rng = random.Random(0)
    assert places([], {"start_date": "March 2, 2025", "end_date": "March 10, 2025"}, rng) == [
        "between March 2 and March 10, 2025"]
    assert places([], {"start_date": "2025-03-02", "end_date": "2025-03-10"}, rng) == [
        "between 2025-03-02 and 2025-03-10"]
    # two years are both said; one bound alone is still 'since'
    assert places([], {"since": "December 30, 2024", "until": "January 3, 2025"}, rng) == [
        "between December 30, 2024 and January 3, 2025"]
    assert places([], {"start_date": "March 2, 2025"}, rng) == ["since March 2, 2025"]
    question = "Who committed between March 2 and March 10, 2025?"
    assert said("start_date", "March 2, 2025", question) and said("end_date", "March 10, 2025", question)
    assert not said("start_date", "March 2, 2024", question) and not said("start_date", "March 3, 2025", question)


def test_a_span_that_ends_before_it_starts_is_not_called_by_hand():
    assert _inverted({"start_timestamp": "2024-04-09", "end_timestamp": "2024-04-02T10:00:00"})
    assert not _inverted({"start_timestamp": "2024-04-02", "end_timestamp": "2024-04-02T10:00:00"})
    assert not _inverted({"since": "2024-04-09", "until": "2 weeks ago"})  # not a day: the server decides
    assert not _inverted({"from_unit": "2024-04-09", "to_unit": "2024-04-02"})  # no time bounds


async def test_a_span_of_days_around_a_logged_day_is_called_and_asked_as_users_ask(tmp_path):
    _, kept, dropped, yaml = await explore(tmp_path, LOG)
    called = [r["arguments"] for r in kept + dropped if r["tool"] == "commits" and all(
        str(r["arguments"].get(k, ""))[:2] == "20" for k in ("start_date", "end_date"))]
    assert called and not [a for a in called if a["start_date"] > a["end_date"]], called  # none ends before it starts
    narrow = _narrow(_spans(kept))
    assert len(narrow) >= 2, _spans(kept)  # the description's 2025-01-01..2025-12-31 holds all three
    assert all((b - a).days >= 2 for a, b in narrow)  # a day either side at least
    rows = await tasks_of(yaml, tmp_path, n=60)
    spanned = [r for r in rows if r["answer"]["calls"][0]["name"] == "commits" and _narrow(
        [(date.fromisoformat(r["answer"]["calls"][0]["arguments"]["start_date"]),
          date.fromisoformat(r["answer"]["calls"][0]["arguments"]["end_date"]))])]
    assert spanned and all("between " in r["query"].lower() for r in spanned), [r["query"] for r in spanned]
    assert any(r["answer"]["final"] in ("Ada Lovelace", "Grace Hopper", "Alan Turing") for r in spanned)


async def test_without_the_spans_no_call_narrows_to_one_day(tmp_path, monkeypatch):
    async def no_spans(self, client, tool, rows):
        return None

    monkeypatch.setattr(VariedCalls, "_span_days", no_spans)
    _, kept, _, _ = await explore(tmp_path, LOG)
    assert _spans(kept) and not [s for s in _narrow(_spans(kept)) if (s[1] - s[0]).days <= 6]


TRAILS = '''
    TRAILS = {"tr-101": ("Cedar Loop", 5.2, 310, "Muddy by the creek."),
              "tr-102": ("Granite Peak", 14.8, 1240, "Snow above the saddle."),
              "tr-103": ("Fern Gully", 3.6, 90, "Dry and easy.")}

    @mcp.tool
    def search_trails(area: str) -> str:
        """Trails in an area such as 'North Fork'."""
        if area != "North Fork":
            return "No trails found"
        return "Found 3 trails:\\n" + "\\n".join(
            f"- **{name}** [{tid}]: {km} km round trip, {gain} m gain" for tid, (name, km, gain, _) in TRAILS.items())

    @mcp.tool
    def trail_report(trail_id: str) -> dict:
        """The latest report on a trail, by its id."""
        if trail_id not in TRAILS:
            return {"error": f"unknown trail {trail_id}"}
        name, km, gain, conditions = TRAILS[trail_id]
        return {"trail": name, "length_km": km, "conditions": conditions}
'''


def test_a_line_naming_an_id_states_its_quantities_by_hand():
    text = "Found 2:\n- **Cedar Loop** [tr-101]: 5.2 km round trip, 310 m gain, dogs on leash\n" \
           "- **Fern Gully** [tr-103]: 3.6 km round trip, 90 m gain, open"
    assert structured(text) == [{"id": "tr-101", "name": "Cedar Loop", "round_trip_km": 5.2, "gain_m": 310},
                                {"id": "tr-103", "name": "Fern Gully", "round_trip_km": 3.6, "gain_m": 90}]
    # a count says what it counts; a bare percentage names nothing
    assert structured("- **Acme** C-17: 12 orders, 3 open tickets, 45%") == [
        {"id": "C-17", "name": "Acme", "orders": 12, "open_tickets": 3}]


def _stated(chain: list[dict], value: object) -> bool:
    return stated_before(passed_lines(chain), value)


def test_a_chain_whose_answer_the_passed_line_states_is_needless_by_hand():
    search = {"id": "c1", "tool": "search", "arguments": {"area": "North Fork"},
              "result": "- **Cedar Loop** [tr-101]: 5.2 km round trip, 310 m gain\n- **Fern Gully** [tr-103]: 3.6 km"}
    report = {"id": "c2", "tool": "report", "arguments": {"trail_id": "tr-101"},
              "inputs_from": [{"call": "c1", "argument": "trail_id", "path": [0, "id"]}]}
    assert _stated([search, report], 5.2) and _stated([search, report], 310)
    assert not _stated([search, report], 3.6)  # another trail's line
    assert not _stated([search, report], "Muddy by the creek.")  # the report's own news
    assert not _stated([search, {**report, "arguments": {"trail_id": "tr-101"}}], 5)  # small: no evidence
    assert not _stated([search, report], 101)  # the digits of the passed id tr-101 are no quantity
    ends = {**search, "result": "- **Cedar Loop** [tr-101] is 5.2."}
    assert _stated([ends, report], 5.2)  # a number that ends a sentence
    table = {**search, "result": "<table><tr><th>id</th><th>km</th></tr><tr><td>tr-101</td><td>5.2</td></tr>"
                                 "<tr><td>tr-103</td><td>3.6</td></tr></table>"}  # one line, a row each
    assert _stated([table, report], 5.2) and not _stated([table, report], 3.6)
    as_json = {**search, "result": '[{"id": "tr-101", "note": "5.2 km"}]'}
    assert not _stated([as_json, report], 5.2)  # JSON is compared by key


async def test_a_search_that_states_the_answer_is_asked_alone(tmp_path):
    _, kept, _, yaml = await explore(tmp_path, TRAILS)
    assert any(r["tool"] == "trail_report" for r in kept)
    rows = await tasks_of(yaml, tmp_path, n=60)
    tools = [tuple(c["name"] for c in r["answer"]["calls"]) for r in rows]
    chains = [r for r, t in zip(rows, tools) if t == ("search_trails", "trail_report")]
    # the length is on the search's line: no chain asks it; the conditions are not: chains ask them
    assert not [r for r in chains if isinstance(r["answer"]["final"], float)], [r["query"] for r in chains]
    assert any(isinstance(r["answer"]["final"], str) for r in chains), tools
    alone = [r for r, t in zip(rows, tools) if t == ("search_trails",)]
    assert {r["answer"]["final"] for r in alone} & {5.2, 14.8, 3.6, 310, 1240, 90}, [r["query"] for r in alone]
