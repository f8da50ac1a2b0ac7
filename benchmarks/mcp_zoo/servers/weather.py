"""Weather station archive MCP server (a zoo server written here).

Daily observations of 2024 for a handful of stations, seeded and invented. The tools accept any
value for a station or a state: an unknown one gets an empty result (`"stations": []`,
`"observations": []`), never an error, as many archive APIs answer. `units` is an enum (metric or
imperial), `include_hourly` a boolean, and `monthly_stats` takes enums for the statistic and the
variable. Station ids (four letters, like KSEA) come from `list_stations`.

    python weather.py        # serve over stdio
"""

from __future__ import annotations

import datetime as dt
import math
import random
from calendar import monthrange
from typing import Annotated, Literal

from fastmcp import FastMCP
from pydantic import Field

mcp = FastMCP("weather-archive", instructions="Historical daily weather observations (2024) from airport and city "
              "stations in the US Pacific Northwest and California.")

Units = Literal["metric", "imperial"]
Stat = Literal["mean", "min", "max", "total"]
Variable = Literal["temperature", "precipitation", "wind"]

STATIONS = {  # id: (name, state, elevation m, base temp C, temp swing C, rainy-day chance in winter)
    "KSEA": ("Seattle-Tacoma Intl", "WA", 131, 11.5, 7.0, 0.65),
    "KGEG": ("Spokane Intl", "WA", 721, 9.0, 11.0, 0.35),
    "KBLI": ("Bellingham Intl", "WA", 46, 10.5, 6.5, 0.6),
    "KPDX": ("Portland Intl", "OR", 9, 12.5, 8.0, 0.6),
    "KEUG": ("Eugene Mahlon Sweet", "OR", 112, 12.0, 8.0, 0.6),
    "KSFO": ("San Francisco Intl", "CA", 4, 14.5, 3.5, 0.35),
    "KSAC": ("Sacramento Executive", "CA", 6, 17.0, 8.5, 0.3),
}


def _day(station: str, day: dt.date) -> dict:
    """One day's observations in metric units, the same every time for a station and a date."""
    name, _, _, base, swing, wet = STATIONS[station]
    rng = random.Random(f"{station}-{day.isoformat()}")
    # warmest in late July, coldest in late January
    season = -math.cos(2 * math.pi * (day.timetuple().tm_yday - 20) / 366)
    mean = base + swing * season + rng.uniform(-3, 3)
    spread = rng.uniform(4, 12)
    rain_chance = wet * (0.35 + 0.65 * (1 - season) / 2)
    rain = round(rng.expovariate(1 / 6), 1) if rng.random() < rain_chance else 0.0
    return {"date": day.isoformat(), "temp_max_c": round(mean + spread / 2, 1), "temp_min_c": round(mean - spread / 2, 1),
            "precip_mm": rain, "wind_kmh": round(rng.uniform(3, 30), 1)}


def _convert(obs: dict, units: str) -> dict:
    if units == "metric":
        return obs
    return {"date": obs["date"], "temp_max_f": round(obs["temp_max_c"] * 9 / 5 + 32, 1),
            "temp_min_f": round(obs["temp_min_c"] * 9 / 5 + 32, 1), "precip_in": round(obs["precip_mm"] / 25.4, 2),
            "wind_mph": round(obs["wind_kmh"] / 1.609344, 1)}


@mcp.tool
def list_stations(state: Annotated[str, Field(description="Two-letter US state code, e.g. WA.")]) -> dict:
    """Weather stations in a state: station id, name and elevation. Unknown states have no stations."""
    code = state.strip().upper()
    return {"state": code, "stations": [{"station_id": sid, "name": s[0], "elevation_m": s[2]}
                                        for sid, s in STATIONS.items() if s[1] == code]}


@mcp.tool
def daily_observations(
    station_id: Annotated[str, Field(description="Station id, e.g. KSEA.")],
    date: Annotated[str, Field(description="Day in 2024, YYYY-MM-DD.")],
    units: Annotated[Units, Field(description="metric (°C, mm, km/h) or imperial (°F, in, mph).")] = "metric",
    include_hourly: Annotated[bool, Field(description="Also return 3-hourly temperatures.")] = False,
) -> dict:
    """Observed high and low temperature, precipitation and mean wind speed at a station on one day. Days
    outside 2024 or stations not in the archive have no observations."""
    sid = station_id.strip().upper()
    try:
        day = dt.date.fromisoformat(date)
    except ValueError:
        return {"station_id": sid, "date": date, "observations": []}
    if sid not in STATIONS or day.year != 2024:
        return {"station_id": sid, "date": date, "observations": []}
    obs = _day(sid, day)
    out = {"station_id": sid, "station": STATIONS[sid][0], "units": units, "observations": [_convert(obs, units)]}
    if include_hourly:
        low, high = obs["temp_min_c"], obs["temp_max_c"]
        curve = [0.1, 0.0, 0.2, 0.6, 0.95, 1.0, 0.7, 0.35]  # 00:00, 03:00, ... 21:00
        temps = [round(low + (high - low) * c, 1) for c in curve]
        if units == "imperial":
            temps = [round(t * 9 / 5 + 32, 1) for t in temps]
        out["hourly"] = [{"time": f"{3 * i:02d}:00", "temp": t} for i, t in enumerate(temps)]
    return out


@mcp.tool
def monthly_stats(
    station_id: Annotated[str, Field(description="Station id, e.g. KSEA.")],
    month: Annotated[int, Field(description="Month of 2024, 1-12.", ge=1, le=12)],
    variable: Annotated[Variable, Field(description="temperature (daily highs), precipitation or wind.")],
    stat: Annotated[Stat, Field(description="mean, min, max, or total (total: precipitation only).")] = "mean",
) -> dict:
    """A statistic of one variable over a month of 2024 at a station, in metric units (°C, mm, km/h). Also
    gives the number of rainy days (precipitation above 0)."""
    sid = station_id.strip().upper()
    if sid not in STATIONS:
        return {"station_id": sid, "month": month, "observations": []}
    days = [_day(sid, dt.date(2024, month, d)) for d in range(1, monthrange(2024, month)[1] + 1)]
    key = {"temperature": "temp_max_c", "precipitation": "precip_mm", "wind": "wind_kmh"}[variable]
    values = [d[key] for d in days]
    if stat == "total" and variable != "precipitation":
        return {"error": "stat 'total' only applies to precipitation"}
    result = {"mean": sum(values) / len(values), "min": min(values), "max": max(values), "total": sum(values)}[stat]
    return {"station_id": sid, "month": month, "variable": variable, "stat": stat, "value": round(result, 1),
            "days": len(days), "rainy_days": sum(1 for d in days if d["precip_mm"] > 0)}


if __name__ == "__main__":
    mcp.run(show_banner=False)
