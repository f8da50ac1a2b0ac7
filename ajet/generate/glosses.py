"""What a user says instead of the value a call sends: units for an enum value (`units` described as
"metric (°C, mm, km/h) or imperial (°F, in, mph)" is asked for as "in Fahrenheit" or "in inches", never
"in imperial"), a city for an IANA time zone ("Tokyo" for `Asia/Tokyo`), and a day in words for an
ISO date ("March 2, 2024" for `2024-03-02`).

A result key that ends in one of those units (`temp_max_f`, `precip_in`, `wind_kmh`) says which unit
the question asks in; the enum value in effect for the call (sent, or the default) says which value the
unit stands for. Trained on questions that name the value itself, SmolLM2-135M sent `imperial` to a
question asked in millimeters: it had never seen a unit stand for the value. Read off the server's own
descriptions; the spellings below are the units' common names, tied to no server.
"""

from __future__ import annotations

import re
import zlib
from datetime import date
from typing import Any

from ajet.generate.phrasing import MONTHS, singular, words
from ajet.generate.standard_values import zone_names

# how people spell a unit the descriptions abbreviate; an abbreviation that reads as an ordinary word
# ('in', 'ft' beside 'in') is never said bare
_SPELLINGS = {"f": ["°F", "Fahrenheit", "degrees Fahrenheit"], "c": ["°C", "Celsius", "degrees Celsius"],
              "k": ["kelvin"], "in": ["inches"], "inch": ["inches"], "ft": ["feet"], "mm": ["mm", "millimeters"],
              "cm": ["cm", "centimeters"], "m": ["meters"], "km": ["km", "kilometers"], "mi": ["miles"],
              "kmh": ["km/h", "kilometers per hour"], "kph": ["km/h", "kilometers per hour"],
              "mph": ["mph", "miles per hour"], "ms": ["m/s", "meters per second"], "kn": ["knots"],
              "kt": ["knots"], "kg": ["kg", "kilograms"], "g": ["grams"], "lb": ["pounds"], "lbs": ["pounds"],
              "oz": ["ounces"], "l": ["liters"], "ml": ["ml", "milliliters"], "gal": ["gallons"],
              "hpa": ["hPa"], "inhg": ["inHg"], "pct": ["percent"]}


# one-letter units written as capitals (the temperature scales: 'in F'); the others ('m', 'g', 'l') are
# said by name, since 'in M' reads as mega
_CAPITAL_SYMBOLS = {"f", "c", "k"}


def one_letter_unit(letter: str) -> str:
    """How a question says the one-letter unit a result key ends in: 'F' for `temp_f`, 'meters' for
    `elevation_m`; the capital letter where no unit is known by it."""
    known = _SPELLINGS.get(letter.casefold())
    if letter.casefold() in _CAPITAL_SYMBOLS or not known:
        return letter.upper()
    return known[-1]


def _bare(text: str) -> str:
    """'°F' -> 'f', 'km/h' -> 'kmh': a gloss as a result key spells it."""
    return re.sub(r"[^a-z0-9]", "", text.casefold())


def enum_glosses(description: str, values: list[Any]) -> dict[str, list[str]]:
    """The glosses a description gives each enum value in parentheses: "metric (°C, mm, km/h) or
    imperial (°F, in, mph)" -> {'metric': ['°C', 'mm', 'km/h'], 'imperial': ['°F', 'in', 'mph']}."""
    found: dict[str, list[str]] = {}
    for value in values:
        if not isinstance(value, str) or not value.strip():
            continue
        match = re.search(rf"(?<![\w-])['\"`]?{re.escape(value)}['\"`]?\s*\(([^()]{{1,80}})\)", description or "",
                          re.IGNORECASE)
        if match:
            parts = [p.strip() for p in re.split(r"[,;]|\bor\b|\band\b", match.group(1)) if p.strip()]
            if parts and all(len(p) <= 12 for p in parts):  # unit-like words, not a sentence
                found[value] = parts
    return found


def noun_gloss(step: dict[str, Any], argument: str, value: Any) -> str | None:
    """What an enum value means, as the description's parenthesis names it in words ("temperature (daily
    highs)" -> 'daily high'): users ask for 'the mean daily high', not 'the mean temperature'. A gloss of
    units (°C, mm) or of one word is no such name."""
    parts = ((step.get("glosses") or {}).get(argument) or {}).get(value) if isinstance(value, str) else None
    if not parts or len(parts) != 1 or not re.fullmatch(r"[A-Za-z]+(?: [A-Za-z]+)+", parts[0]):
        return None
    return singular(parts[0].lower())


def unit_gloss(step: dict[str, Any], key: Any) -> tuple[str, list[str], str] | None:
    """(argument, how people spell the unit, the key's words without it) when the last word of result key
    `key` is a unit that the enum value in effect for `step` glosses: `temp_max_f` of a call with
    units=imperial -> ('units', ['°F', 'Fahrenheit', ...], 'temp max'); None otherwise."""
    parts = words(key).split(" ")
    if len(parts) < 2:
        return None
    for argument, by_value in (step.get("glosses") or {}).items():
        in_effect = step["arguments"].get(argument, (step.get("defaults") or {}).get(argument))
        for gloss in by_value.get(in_effect, []) if isinstance(in_effect, str) else []:
            if _bare(gloss) == parts[-1]:
                spellings = _SPELLINGS.get(parts[-1], [gloss])
                return argument, spellings, " ".join(parts[:-1])
    return None


def spelled_for(step: dict[str, Any], path: list[Any], seed: str) -> dict[str, str]:
    """{argument: the unit said for it} for the enum argument of `step` that the answer's unit stands
    for, one spelling per candidate (`seed`), so that the question and its check agree; {} when none."""
    keys = [p for p in path if isinstance(p, str)]
    gloss = unit_gloss(step, keys[-1]) if keys else None
    if gloss is None or gloss[0] not in step["arguments"]:
        return {}
    argument, spellings, _ = gloss
    return {argument: spellings[zlib.crc32(seed.encode("utf-8")) % len(spellings)]}


# one question in CITY_SHARE says the zone as its city: users name cities, and the rest keep the model
# copying a zone name a user does give
CITY_SHARE = (3, 4)


def zone_city(value: Any) -> str | None:
    """The city an IANA `Area/City` zone is named for, as people write it ('America/Goose_Bay' ->
    'Goose Bay', 'America/Argentina/Buenos_Aires' -> 'Buenos Aires'); None for anything else ('UTC',
    'Etc/GMT+5', a zone the tz database does not list). The convention of the IANA names, no city list."""
    if not isinstance(value, str) or value.count("/") < 1 or value not in zone_names():
        return None
    area, city = value.split("/", 1)[0], value.rsplit("/", 1)[-1]
    if area in ("Etc", "SystemV") or not city[:1].isalpha() or not city[:1].isupper():
        return None
    return city.replace("_", " ")


def cities_for(arguments: dict[str, Any], seed: str) -> dict[str, str]:
    """{argument: city} for the zone arguments a question says as their city: all or none of a call's
    zones, for CITY_SHARE of the candidates (`seed`), so that one question never mixes the two."""
    cities = {name: city for name, value in arguments.items() if (city := zone_city(value))}
    share, of = CITY_SHARE
    if not cities or zlib.crc32(f"zone|{seed}".encode("utf-8")) % of >= share:
        return {}
    return cities


# one question in DAY_SHARE says an ISO date in words: users write "March 2, 2024", and the rest keep
# the model copying a date a user does write as the server wants it
DAY_SHARE = (1, 2)


def day_words(value: Any) -> str | None:
    """An ISO date as people write it ('2024-03-02' -> 'March 2, 2024'); None for anything else (a
    date-time, an impossible date)."""
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return None
    try:
        day = date.fromisoformat(value)
    except ValueError:
        return None
    return f"{MONTHS[day.month - 1]} {day.day}, {day.year}"


def days_for(arguments: dict[str, Any], seed: str) -> dict[str, str]:
    """{argument: the day in words} for the ISO dates a question says in words: all or none of a
    call's dates, for DAY_SHARE of the candidates (`seed`)."""
    days = {name: said for name, value in arguments.items() if (said := day_words(value))}
    share, of = DAY_SHARE
    if not days or zlib.crc32(f"day|{seed}".encode("utf-8")) % of >= share:
        return {}
    return days
