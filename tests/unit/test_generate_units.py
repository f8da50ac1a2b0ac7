"""Three rules of the question generator, on small MCP servers written for these tests (never a zoo
server): an enum value its description glosses with units is asked for in those units ("in Fahrenheit",
never "in imperial"), an optional argument the answer does not depend on is no part of a question, and
no question asks a value that a mode the call must send (an enum, a boolean) does not change."""

from __future__ import annotations

from ajet.generate.candidates import candidates
from ajet.generate.glosses import enum_glosses, noun_gloss, unit_gloss
from ajet.generate.twins import mode_blind

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


MONTHLY = '''
    from typing import Annotated, Literal
    from pydantic import Field

    DAYS = {1: 31, 2: 28, 3: 31}

    @mcp.tool
    def stats(
        site: Annotated[str, Field(description="Site name, 'North' or 'South'.")],
        month: Annotated[int, Field(description="Month of 2027, 1-3.", ge=1, le=3)],
        variable: Annotated[Literal["rain", "wind"], Field(description="rain (mm) or wind (km/h).")],
        stat: Annotated[Literal["mean", "max"], Field(description="mean or max.")] = "mean",
    ) -> dict:
        """A statistic of one variable over a month at a site; also the month's days and wet days."""
        if site not in ("North", "South"):
            return {"error": f"unknown site {site}"}
        base = (3.5 if variable == "rain" else 17.0) * (1.4 if stat == "max" else 1.0) + month + (site == "South")
        return {"site": site, "month": month, "variable": variable, "stat": stat, "value": round(base, 1),
                "days": DAYS[month], "wet_days": 9 + month * 2 + (site == "South")}
'''


async def test_a_mode_the_answer_does_not_depend_on_makes_no_question(tmp_path):
    """The month's wet days are the same whichever variable a call asks: "how many wet days" names none,
    so a task whose reference call sends one (that a model then cannot guess) is not made."""
    _, kept, _, yaml = await explore(tmp_path, MONTHLY)
    bank = [r for r in kept if r["tool"] == "stats"]

    def twins(argument: str) -> bool:
        rest = [(r["arguments"]["site"], r["arguments"]["month"], r["arguments"].get("stat", "mean"),
                 r["arguments"]["variable"]) for r in bank]
        index = ["site", "month", "stat", "variable"].index(argument)
        return any(a[:index] + a[index + 1:] == b[:index] + b[index + 1:] and a[index] != b[index]
                   for a in rest for b in rest)

    assert twins("variable") or twins("stat"), "the bank holds no twins: the rule is not exercised"
    rows = await tasks_of(yaml, tmp_path, n=40)
    targets = [t["metadata"]["target"][-1] for t in rows]
    assert "value" in targets
    assert not {"days", "wet_days"} & set(targets), [t["query"] for t in rows if t["metadata"]["target"][-1] != "value"]


def test_mode_blind_by_hand():
    def call(arguments: dict, result: dict, modes=("variable", "stat")) -> dict:
        return {"id": "c", "tool": "stats", "arguments": arguments, "result": result, "modes": list(modes),
                "defaults": {"stat": "mean"}}

    rain = call({"site": "North", "month": 1, "variable": "rain"}, {"site": "North", "value": 4.5, "wet_days": 11, "dry": 0})
    wind = call({"site": "North", "month": 1, "variable": "wind"}, {"site": "North", "value": 18.0, "wet_days": 11, "dry": 0})
    # the value changes with the variable; the wet days do not; two zeros agreeing are no evidence
    assert mode_blind([rain, wind]) == {("variable", ("wet_days",))}
    # stat=mean sent is stat left out: these two differ in the variable alone
    assert mode_blind([{**rain, "arguments": {**rain["arguments"], "stat": "mean"}}, wind]) == {("variable", ("wet_days",))}
    # one pair that disagrees outweighs one that agrees
    wet = call({"site": "North", "month": 2, "variable": "rain"}, {"site_id": "N1", "value": 5.5, "wet_days": 13})
    windy = call({"site": "North", "month": 2, "variable": "wind"}, {"site_id": "N1", "value": 19.0, "wet_days": 14})
    assert mode_blind([rain, wind, wet, windy]) == {("variable", ("site_id",))}
    # an argument that is no mode (a free text, the site) or twins of two records are no evidence
    assert mode_blind([call(rain["arguments"], rain["result"], modes=()), call(wind["arguments"], wind["result"], modes=())]) == set()
    ridge = call({"area": "hills", "variable": "rain"}, {"name": "North Ridge", "value": 4.5, "wet_days": 11})
    bay = call({"area": "hills", "variable": "wind"}, {"name": "South Bay", "value": 18.0, "wet_days": 11})
    assert mode_blind([ridge, bay]) == set()
    # with no name or id, most of what they return must agree for two results to be one record's
    other = call({"site": "North", "month": 1, "variable": "wind"}, {"value": 18.0, "wet_days": 11, "gust": 40, "dir": "W"})
    assert mode_blind([{**rain, "result": {"value": 4.5, "wet_days": 11, "gust": 20, "dir": "E"}}, other]) == set()
    # a list's length the mode leaves alone is asked of no call; two lists of as many records are not one
    hours = call({"site": "North", "variable": "rain"}, {"site_id": "N1", "readings": [{"h": 6, "v": 1.0}, {"h": 12, "v": 2.0}]})
    gusts = call({"site": "North", "variable": "wind"}, {"site_id": "N1", "readings": [{"h": 6, "v": 9.0}, {"h": 12, "v": 7.0}]})
    assert mode_blind([hours, gusts]) == {("variable", ("readings", "#")), ("variable", ("site_id",))}
    open_tickets = call({"status": "open"}, {"tickets": [{"subject": "printer"}, {"subject": "login"}]}, modes=("status",))
    closed_tickets = call({"status": "closed"}, {"tickets": [{"subject": "vpn"}, {"subject": "mail"}]}, modes=("status",))
    assert mode_blind([open_tickets, closed_tickets]) == set()
    # a filter that left one list as it was and cut another (3 rooms to 2) is no mode: the count depends on it
    floor1 = call({"floor": 1}, {"rooms": [{"room": "Dock"}, {"room": "Mast"}]}, modes=("video",))
    floor1_video = call({"floor": 1, "video": True}, {"rooms": [{"room": "Dock"}, {"room": "Mast"}]}, modes=("video",))
    floor5 = call({"floor": 5}, {"rooms": [{"room": "Keel"}, {"room": "Buoy"}, {"room": "Anchor"}]}, modes=("video",))
    floor5_video = call({"floor": 5, "video": True}, {"rooms": [{"room": "Keel"}, {"room": "Buoy"}]}, modes=("video",))
    assert mode_blind([floor1, floor1_video]) == {("video", ("rooms", "#"))}
    assert mode_blind([floor1, floor1_video, floor5, floor5_video]) == set()


def test_an_enum_value_named_in_words_is_said_by_that_name():
    """"temperature (daily highs)": users ask for 'the mean daily high', and the question says so (the
    call still sends variable=temperature); a gloss of units or of one word names nothing."""
    glossed = {"variable": enum_glosses("temperature (daily highs), rain (mm) or wind (gusts).",
                                        ["temperature", "rain", "wind"])}
    step = {"id": "c1", "tool": "stats", "arguments": {"site": "North", "month": 3, "variable": "temperature",
                                                      "stat": "max"},
            "result": {"site": "North", "value": 14.5}, "origin": {"variable": "schema_enum", "stat": "schema_enum"},
            "inputs_from": [], "optional": ["stat"], "defaults": {"stat": "mean"}, "glosses": glossed}
    assert noun_gloss(step, "variable", "temperature") == "daily high"
    assert noun_gloss(step, "variable", "rain") is None and noun_gloss(step, "variable", "wind") is None
    assert noun_gloss(step, "stat", "max") is None
    (candidate,) = [c for c in candidates([step]) if c.path == ["value"]]
    assert candidate.mention()["variable"] == "daily high" and candidate.steps[-1]["arguments"]["variable"] == "temperature"
    rain = {**step, "id": "c2", "arguments": {**step["arguments"], "variable": "rain"}, "result": {"site": "North", "value": 3.5}}
    assert [c.mention()["variable"] for c in candidates([rain]) if c.path == ["value"]] == ["rain"]


def test_an_enum_value_is_glossed_by_the_call_that_sends_it():
    """In a chain, the first call's enum value is said by the first tool's gloss ('daily high'), not
    looked up among the last tool's arguments; and the last tool's own argument of that name by its own."""
    first = {"id": "a", "tool": "stats", "arguments": {"site": "North", "variable": "temperature"},
             "result": {"site": "North", "station": "N-1", "value": 14.5}, "inputs_from": [],
             "glosses": {"variable": enum_glosses("temperature (daily highs) or rain (mm).", ["temperature", "rain"])}}
    then = {"id": "b", "tool": "station_log", "arguments": {"station": "N-1", "variable": "temperature"},
            "result": {"station": "N-1", "entries": 12}, "glosses": {"variable": {}},
            "inputs_from": [{"argument": "station", "call": "a", "path": ["station"]}]}
    chain = next(c for c in candidates([first, then]) if [s["id"] for s in c.steps] == ["a", "b"])
    assert chain.mention()["variable"] == "daily high"
    assert chain.mention()["then variable"] == "temperature"
