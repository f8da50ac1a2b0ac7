"""Where each value a user gives goes in a question, and how it is said: 'in Boston' (the description's
placeholder, "in a city"), 'member M-2041' (an id with its noun), 'for 2 weeks' (a count with its
plural), 'for two hours' (120 minutes), 'at 14:00' (a time of day), 'with capacity at least 4' (a
bound), 'from UTC to Asia/Tokyo' (a conversion's two sides), 'between March 2 and March 10, 2024' (a
span), '12 times 7' (an expression). Pure functions of a call's arguments and its tool's description;
ajet.generate.natural builds the sentences around them.
"""

from __future__ import annotations

import random
import re
from typing import Any

from ajet.generate.phrasing import (DAY_IN_WORDS, MONTHS, NUMBER_WORDS, POSITION, TIME_OF_DAY, flag_phrase, hours_in_words, in_minutes,
                                    show, singular, time_bound, words)

PREPOSITIONS = "in|of|for|at|on|from|to|by|with|between|near|during|per|about"
_ARTICLES = "a|an|the|one|some|each|any|two|both"
ID = re.compile(r"[A-Za-z]{1,6}[-_]?\d{2,}[A-Za-z0-9-]*")
_UNITS = {"minutes", "minute", "hours", "hour", "days", "day", "weeks", "week", "seconds", "months", "years", "km",
          "m", "mi", "miles", "kg", "g", "lb", "lbs", "usd", "eur", "percent", "pct", "mb", "gb"}
MAX_DESCRIPTION = 1_000  # characters of a tool description read for phrasing: its first sentences say what it does


def words_before(text: str, end: int, most: int) -> list[str]:
    """Up to `most` words right before position `end` of `text`, each letters or an apostrophe, nearest
    last; [] when a word does not end right before it. A slice and a split, no backtracking regex: a
    description can be a megabyte long."""
    if end == 0 or not text[end - 1].isspace():
        return []
    found: list[str] = []
    for word in reversed(text[max(0, end - 120):end].split()):
        if len(found) == most or not re.fullmatch(r"[A-Za-z']+", word):
            break
        found.insert(0, word)
    return found


def placeholder(name: str, description: str) -> re.Match | None:
    """The description's phrase standing for argument `name`: 'in a city' for `city`, 'of a US state' for `state`."""
    parts = words(name).split(" ")
    noun = parts[-1] if len(parts[-1]) >= 3 else parts[0]
    return re.search(rf"\b({PREPOSITIONS})\s+(?:{_ARTICLES})\s+(?:[A-Za-z]+\s+)?{re.escape(noun)}(?:s|es)?\b",
                     description or "", re.IGNORECASE)


def noun_of(name: str) -> str:
    """`member_id` -> 'member', `loan_id` -> 'loan', `query` -> 'query'."""
    parts = [p for p in words(name).split(" ") if p not in {"id", "ids", "key", "code", "no", "number"}]
    return " ".join(parts) or words(name)


def place(name: str, value: Any, description: str, rng: random.Random) -> str:
    """Where one given value goes in a question: 'in Boston', 'member M-2041', 'for 2 weeks', 'for Dune',
    'including tax' (a boolean is said with its name, never as a bare 'yes')."""
    if isinstance(value, bool):
        return flag_phrase(name, value)
    shown = show(value)
    bound = time_bound(name)
    if bound and isinstance(value, str):  # start_timestamp='2024-03-02': 'since March 2, 2024'
        return f"{bound} {shown}"
    spot = placeholder(name, description)
    if spot:
        noun = noun_of(name).split(" ")[-1]  # 'the C-42 customer', never 'the C-42 id'
        if rng.random() < 0.15 and not isinstance(value, (int, float)):  # 'in the East region', 'of the Transco pipeline'
            return f"{spot.group(1).lower()} the {shown} {noun}"
        return f"{spot.group(1).lower()} {shown}"
    if isinstance(value, str) and ID.fullmatch(value):
        noun = noun_of(name)
        return rng.choice([f"for {noun} {shown}", f"of {noun} {shown}", f"for {shown}", f"on {noun} {shown}"])
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        noun = words(name)
        parts = noun.split(" ")
        if parts[-1] == "month" and isinstance(value, int) and 1 <= value <= 12:  # phrasing.said reads the name back
            # the months of one year ('over a month of 2024'), never any year ('monthly sales since 2019')
            years = set(re.findall(r"\b(?:19|20)\d\d\b", description))
            year = years.pop() if len(years) == 1 else None
            if year and re.search(rf"\bmonths?\s+(?:of|in)\s+{year}\b", description, re.IGNORECASE) \
                    and rng.random() < 0.5:  # users say 'in July 2024' as often as 'in July'
                return f"in {MONTHS[value - 1]} {year}"
            return f"in {MONTHS[value - 1]}"
        if parts[0] in ("min", "minimum", "max", "maximum") and len(parts) > 1:  # min_capacity=4: 'with capacity at least 4'
            unit = parts[-1] if parts[-1] in _UNITS and len(parts) > 2 else ""
            thing = " ".join(parts[1:-1] if unit else parts[1:])
            bound = "at least" if parts[0].startswith("min") else "at most"
            return f"with {thing} {bound} {shown}{' ' + unit if unit else ''}"
        if in_minutes(name) and hours_in_words(value) and rng.random() < 0.7:  # 120: 'for two hours'
            return f"for {rng.choice(hours_in_words(value))}"
        if parts[-1] in _UNITS and len(parts) > 1:  # duration_minutes=30: 'for 30 minutes'
            return f"for {shown} {parts[-1]}"
        if singular(noun) != noun and " " not in noun:
            # users write small counts as words too ('for two weeks'); phrasing.mentions reads them back
            if isinstance(value, int) and value in NUMBER_WORDS and rng.random() < 0.4:
                shown = NUMBER_WORDS[value]
            return f"for {shown} {singular(noun) if value == 1 else noun}"
        if re.fullmatch(r"(19|20)\d\d", shown):
            return f"in {shown}"
        return f"with {noun} {shown}"
    if isinstance(value, str) and TIME_OF_DAY.fullmatch(value):  # a time of day: 'at 14:00', 'ending at 16:00'
        return f"ending at {shown}" if set(words(name).split(" ")) & {"end", "ends", "until", "finish"} else f"at {shown}"
    return rng.choice([f"for {shown}", f"for {shown}", f"of {shown}", f"on {shown}"])


def pair_of(arguments: dict[str, Any]) -> tuple[str, str, str] | None:
    """The (stem, first, second) of a pair of arguments (`city_a`/`city_b`, `from_x`... no: `x1`/`x2`)."""
    for name, first in arguments.items():
        found = re.fullmatch(r"(.+?)_?(a|1)", name)
        if not found:
            continue
        other = next((n for n in arguments if n != name and re.fullmatch(
            rf"{re.escape(found.group(1))}_?{'b' if found.group(2) == 'a' else '2'}", n)), None)
        if other is not None:
            return found.group(1), show(first), show(arguments[other])
    return None


# prefixes (and suffixes) of the two arguments of a conversion: from_unit / to_unit, source_timezone / target_timezone
_CONVERSION_PAIRS = (("from", "to"), ("source", "target"), ("src", "dst"), ("origin", "destination"), ("input", "output"))


def conversion_pair(arguments: dict[str, Any]) -> tuple[str, str] | None:
    for first, second in _CONVERSION_PAIRS:
        for name in arguments:
            if name.startswith(f"{first}_") and f"{second}_{name[len(first) + 1:]}" in arguments:
                return name, f"{second}_{name[len(first) + 1:]}"
            if name.endswith(f"_{first}") and f"{name[:-len(first) - 1]}_{second}" in arguments:
                return name, f"{name[:-len(first) - 1]}_{second}"
    return None


def conversion_of(arguments: dict[str, Any], description: str) -> dict[str, str] | None:
    """A call with `from_X` and `to_X` arguments (or source_/target_, src_/dst_, X_from/X_to) converts:
    its amount ('2.5', or the one other argument: a time '16:45'), what it is converted from and to, each
    with the words the description puts before it ('USD per MMBtu' when it says "from USD per from_unit")."""
    pair = conversion_pair(arguments)
    if pair is None:
        return None
    source, target = pair
    others = [n for n in arguments if n not in (source, target)]
    amounts = [n for n in others if isinstance(arguments[n], (int, float)) and not isinstance(arguments[n], bool)]
    if not amounts and len(others) == 1 and isinstance(arguments[others[0]], str):
        amounts = others

    def prefix(name: str) -> str:
        text = (description or "")[:MAX_DESCRIPTION]
        for m in re.finditer(rf"\b{re.escape(name)}\b", text):
            before = words_before(text, m.start(), 4)
            for i, word in enumerate(before[:-1]):  # 'from USD per from_unit' -> 'USD per '
                if word in ("from", "to") and before[i + 1:]:
                    return " ".join(before[i + 1:]) + " "
        return ""

    return {"amount": show(arguments[amounts[0]]) if len(amounts) == 1 else "",
            "amount_arg": amounts[0] if len(amounts) == 1 else "",
            "source": prefix(source) + show(arguments[source]), "source_arg": source,
            "target": prefix(target) + show(arguments[target]), "target_arg": target,
            "target_value": show(arguments[target])}


_CONVERTED = {"result", "converted", "target", "to", "output", "dst", "destination", "value"}
_CONVERTED_FIELDS = {"time", "datetime", "date", "value", "amount", "result", "price", "quantity"}  # target.datetime


def is_converted(path: list[Any]) -> bool:
    """Whether an answer path holds the converted value (`result`, `converted_price`, `target.time`),
    not another field of a conversion's result (its rate, the source's weekday)."""
    keys = [k for k in path if isinstance(k, str)]
    return bool(keys) and bool(set(words(keys[-1]).split()) & _CONVERTED
                               or (len(keys) > 1 and set(words(keys[-2]).split()) & _CONVERTED
                                   and set(words(keys[-1]).split()) & _CONVERTED_FIELDS))


_OPERATOR_WORDS = {"**": ["to the power of", "raised to the power of"], "*": ["times", "multiplied by"],
                   "/": ["divided by", "over"], "+": ["plus", "added to"], "-": ["minus", "less"]}


def expression_words(expression: str, rng: random.Random) -> str | None:
    """An arithmetic expression as people say it ('12 * 7' -> '12 times 7', '2 ** 10' -> '2 to the power
    of 10'); None for one with parentheses or anything else a sentence cannot say plainly."""
    if re.search(r"[()^%]", expression):
        return None
    out = expression
    for op, said in _OPERATOR_WORDS.items():  # '**' first, so that '*' never meets half of it
        out = re.sub(rf"\s*{re.escape(op)}\s*(?=\d)", f" {rng.choice(said)} ", out)
    out = " ".join(out.split())
    return out if re.fullmatch(r"[\d.]+(?: [a-z ]+ [\d.]+)+", out) else None


def places(steps: list[dict[str, Any]], given: dict[str, Any], rng: random.Random) -> list[str]:
    """Each given value placed with the description of the call that takes it; the two sides of a
    conversion together ('from UTC to Asia/Tokyo')."""
    placed = []
    if POSITION in given:  # the record first, as its own: 'the start of the first free slot on May 6'
        placed.append(f"of {given[POSITION]}")
        given = {k: v for k, v in given.items() if k != POSITION}
    pair = conversion_pair(given)
    if pair is not None:
        placed.append(f"from {show(given[pair[0]])} to {show(given[pair[1]])}")
        given = {k: v for k, v in given.items() if k not in pair}
    span = _time_span(given)
    if span is not None:
        placed.append(span[0])
        given = {k: v for k, v in given.items() if k not in span[1]}
    for name, value in given.items():
        bare = name.removeprefix("then ")
        step = next((s for s in steps if bare in s["arguments"]), None)
        description = (step or {}).get("description") or ""
        clause = re.split(r"(?<=[.;:])\s", description.strip())[0]
        placed.append(place(bare, value, clause, rng))
    return placed


def _time_span(given: dict[str, Any]) -> tuple[str, tuple[str, str]] | None:
    """A start and an end bound said together, as users say a span: 'between March 2 and March 10, 2024'
    (one year said once), 'between 2024-03-02 and 2024-03-10'; with the two names it places."""
    start = next((k for k, v in given.items() if isinstance(v, str) and time_bound(k.removeprefix("then ")) == "since"), None)
    end = next((k for k, v in given.items() if isinstance(v, str) and time_bound(k.removeprefix("then ")) == "until"), None)
    if start is None or end is None:
        return None
    first, second = show(given[start]), show(given[end])
    a, b = DAY_IN_WORDS.fullmatch(first), DAY_IN_WORDS.fullmatch(second)
    if a and b and a.group(2) == b.group(2):
        first = a.group(1)
    return f"between {first} and {second}", (start, end)
