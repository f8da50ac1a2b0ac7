"""Two rules of the question generator, on a small MCP server written for this test (never a zoo server):
an enum value its description glosses with units is asked for in those units ("in Fahrenheit", never
"in imperial"), and an optional argument the answer does not depend on is no part of a question."""

from __future__ import annotations

from ajet.generate.candidates import candidates
from ajet.generate.glosses import enum_glosses, unit_gloss

from tests.unit.test_generate_rules import explore, tasks_of

READINGS = '''
    from typing import Annotated, Literal
    from pydantic import Field

    DAYS = {("North", "2027-05-01"): (21.5, 3.0), ("North", "2027-05-02"): (18.0, 12.5),
            ("South", "2027-05-01"): (25.0, 0.5), ("South", "2027-05-02"): (23.5, 7.0)}

    @mcp.tool
    def reading(
        site: Annotated[str, Field(description="Site name, 'North' or 'South'.")],
        date: Annotated[str, Field(description="Day, 2027-05-01 or 2027-05-02.")],
        units: Annotated[Literal["metric", "imperial"], Field(description="metric (°C, mm) or imperial (°F, in).")] = "metric",
        include_samples: Annotated[bool, Field(description="Also return the hourly samples.")] = False,
    ) -> dict:
        """Temperature and rain at a site on one day."""
        if (site, date) not in DAYS:
            return {"error": f"no reading for {site} on {date}"}
        temp, rain = DAYS[(site, date)]
        out = {"site": site, "temp_c": temp, "rain_mm": rain} if units == "metric" else {
            "site": site, "temp_f": round(temp * 9 / 5 + 32, 1), "rain_in": round(rain / 25.4, 2)}
        if include_samples:
            out["samples"] = [{"hour": h, "temp": temp - 2 + h / 6} for h in (6, 12, 18)]
        return out
'''


def test_enum_glosses_by_hand():
    assert enum_glosses("metric (°C, mm, km/h) or imperial (°F, in, mph).", ["metric", "imperial"]) == {
        "metric": ["°C", "mm", "km/h"], "imperial": ["°F", "in", "mph"]}
    assert enum_glosses("Either 'si' (m; kg) or 'us' (ft or lb)", ["si", "us"]) == {"si": ["m", "kg"], "us": ["ft", "lb"]}
    # a parenthesis that is a sentence, or a value it does not follow, glosses nothing
    assert enum_glosses("fast (uses the cache when the server has one warm), or slow", ["fast", "slow"]) == {}
    step = {"arguments": {"units": "imperial"}, "defaults": {"units": "metric"},
            "glosses": {"units": {"metric": ["°C", "km/h"], "imperial": ["°F", "mph"]}}}
    assert unit_gloss(step, "temp_max_f")[::2] == ("units", "temp max")
    assert unit_gloss(step, "temp_max_f")[1][0] == "°F"
    assert unit_gloss(step, "wind_kmh") is None  # km/h is the metric gloss; the call sent imperial
    assert unit_gloss({**step, "arguments": {}}, "wind_kmh")[1][0] == "km/h"  # the default in effect
    assert unit_gloss(step, "station") is None


async def test_a_glossed_enum_is_asked_in_its_units(tmp_path):
    _, kept, _, yaml = await explore(tmp_path, READINGS)
    readings = [r for r in kept if r["tool"] == "reading"]
    assert {r["arguments"].get("units") for r in readings} >= {"imperial"}
    assert any(r["arguments"].get("include_samples") for r in readings)
    rows = await tasks_of(yaml, tmp_path, n=40)
    assert rows
    imperial = [t for t in rows if t["answer"]["calls"][-1]["arguments"].get("units") == "imperial"]
    assert imperial
    for task in rows:
        question = task["query"].casefold()
        assert "imperial" not in question and "metric" not in question, task["query"]
        arguments, target = task["answer"]["calls"][-1]["arguments"], task["metadata"]["target"]
        if arguments.get("units") == "imperial" and target[-1] in ("temp_f", "rain_in"):
            spelled = ("°f", "fahrenheit") if target[-1] == "temp_f" else ("inches",)
            assert any(s in question for s in spelled), task["query"]
    # every kind of value still makes tasks: the temperature and rain in both units
    assert {t["metadata"]["target"][-1] for t in rows} >= {"temp_c", "temp_f", "rain_mm", "rain_in"}


def test_an_option_the_answer_does_not_depend_on_is_not_asked():
    def call(i: str, arguments: dict, result: dict) -> dict:
        return {"id": i, "tool": "reading", "arguments": arguments, "result": result, "origin": {}, "inputs_from": [],
                "optional": ["units", "include_samples"], "defaults": {"units": "metric", "include_samples": False}}

    plain = call("c1", {"site": "North", "date": "2027-05-01"}, {"temp_c": 21.5, "rain_mm": 3.0})
    samples = call("c2", {"site": "North", "date": "2027-05-01", "include_samples": True},
                   {"temp_c": 21.5, "rain_mm": 3.0, "samples": [{"hour": 6, "temp": 19.5}, {"hour": 12, "temp": 21.5}]})
    imperial = call("c3", {"site": "North", "date": "2027-05-01", "units": "imperial", "include_samples": True},
                    {"temp_f": 70.7, "rain_in": 0.12, "samples": [{"hour": 6, "temp": 19.5}, {"hour": 12, "temp": 21.5}]})
    asked = {(c.steps[-1]["id"], tuple(c.path)) for c in candidates([plain, samples, imperial])}
    # the day's temperature 'including samples' is asked without them (the plain call gives it);
    # a sample is asked with them, and units only where the answer is in them
    assert ("c1", ("temp_c",)) in asked and ("c2", ("temp_c",)) not in asked
    assert ("c2", ("samples", "#")) in asked and ("c3", ("samples", "#")) not in asked
    assert ("c3", ("temp_f",)) in asked
    # a twin that sends an option at its default is the call that leaves it out: the day's temperature
    # 'including samples' is needless beside units=metric alone, as beside the plain call
    metric = call("c4", {"site": "North", "date": "2027-05-01", "units": "metric"}, {"temp_c": 21.5, "rain_mm": 3.0})
    asked = {(c.steps[-1]["id"], tuple(c.path)) for c in candidates([metric, samples])}
    assert ("c2", ("temp_c",)) not in asked and ("c2", ("samples", "#")) in asked
    # alone, with no call to compare with, a call's options are kept: nothing shows them needless
    assert ("c2", ("temp_c",)) in {(c.steps[-1]["id"], tuple(c.path)) for c in candidates([samples])}
