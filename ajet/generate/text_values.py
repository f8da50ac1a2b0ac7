"""Argument values that text names: a tool's or an argument's description, and a server's error messages.

    description      "e.g. Boston", "like X-1234", "such as A or B", quoted 'A-1001', lists "East, Midwest
                     or Pacific", ranges "2019 to 2023", an id written bare ("an id like X-1234"), dates
                     and times ("open on 2027-03-01", "at 14:30"), and a format ("YYYY-MM-DD", "HH:MM")
    error_hint       "unknown city 'x'; known cities: Houston, Dallas", "one of ['a', 'b']", "must be between
                     1 and 50", "Expected HH:MM": a format is a recipe for values (09:30), never a value

Every function here is pure: text and argument specs in, values out. Long texts are read up to
MAX_TEXT characters: a 1 MB description must cost milliseconds, not minutes.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from ajet.generate.explore_values import ArgSpec, Value, in_range, item_spec, significant, tokens, typed
from ajet.generate.result_data import ID_SHAPE
from ajet.generate.standard_values import ZONE_STANDARD, code_values, time_zones

MAX_TEXT = 4_000  # characters of one description or error message that are read

_EG = re.compile(r"\b(?:e\.\s?g\.|eg\.|for example|for instance|such as|like)\s*[,:]?\s*([^;)\n]{0,120}?)"
                 r"(?=[;)\n]|\.\s|\.$|$)", re.IGNORECASE)
_QUOTED = re.compile(r"(?<![A-Za-z0-9])'([^'\n]{1,40})'(?![A-Za-z0-9])|\"([^\"\n]{1,40})\"|`([^`\n]{1,40})`")
_NUM = r"-?\d+(?:\.\d+)?"
_RANGE = re.compile(rf"(?<![\w.-])(?:between\s+({_NUM})\s+and\s+({_NUM})"
                    rf"|({_NUM})\s*(?:to|through|–|-|\.\.)\s*({_NUM}))(?!\w|\.\d|-)", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<!\d)\.(?:\s+|$)|;|\n")
_HINT_COLON = re.compile(r"\b(?:known|valid|available|allowed|supported|accepted|possible|expected|options|choices|"
                         r"choose from|one of|try)\b[^:;.\n]{0,40}?:\s*([^;\n]{0,400})", re.IGNORECASE)
_HINT_BARE = re.compile(r"\b(?:one of|should be|must be|choose from|expected|valid values are|try)\s+([^:;\n]{0,400})",
                        re.IGNORECASE)
# A path written out: '/srv/data/repo', '~/notes', 'C:\\work' is left to quotes.
_PATH = re.compile(r"(?<![\w/~.-])(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+/?(?![\w/])")
_PATH_WORDS = {"path", "dir", "directory", "folder", "file", "filename", "repo", "repository", "root", "cwd"}
# An error's quoted value is offered as valid when the message says so ("outside the allowed repository '/srv/x'")
_OFFERS = re.compile(r"\b(?:allowed|valid|expected|available|supported|known|did you mean|instead|only|use|try)\b",
                     re.IGNORECASE)
_DATE = re.compile(r"(?<![\w-])(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)Z?)?(?![\w-])")
_TIME = re.compile(r"(?<![\w:.-])((?:[01]?\d|2[0-3]):[0-5]\d)(?![\w:])")
# Words that make an argument's name an id (`customer_id`): the rest of the name is the thing it identifies.
_ID_WORDS = {"id", "key", "code", "no", "number", "num", "ref", "reference", "sku"}


# ----------------------------------------------------------------------- formats

# A format named in text, and values of it. Checked before values are read from the same text, so the
# format's own letters ('MM [24-hour format') never become a value.
_FORMATS = [
    (re.compile(r"\bYYYY-MM-DD[T ]HH:MM(?::SS)?\b|\bISO[- ]?8601\b(?:\s+date[- ]?time)?|\bdate[- ]time\b", re.I),
     "datetime"),
    (re.compile(r"\bYYYY-MM-DD\b|\bYYYY/MM/DD\b", re.I), "date"),
    (re.compile(r"\bMM/DD/YYYY\b", re.I), "date_us"),
    (re.compile(r"\bDD/MM/YYYY\b|\bDD\.MM\.YYYY\b", re.I), "date_eu"),
    (re.compile(r"\bYYYY-MM\b(?![-/])", re.I), "month"),
    (re.compile(r"\bHH:MM:SS\b", re.I), "time_s"),
    (re.compile(r"\bHH:MM\b|\b24[- ]hour\b|\bhh:mm\b", re.I), "time"),
]
# (month, day) of the dates a format makes, and times; the year is one a text names, else YEAR
_DAYS = [(1, 15), (6, 2), (11, 14)]
_TIMES = ["09:30", "16:45", "21:05"]
YEAR = 2025
_KIND = {"datetime": "date", "date": "date", "date_us": "date", "date_eu": "date", "month": "date",
         "time_s": "time", "time": "time"}
_SCHEMA_FORMATS = {"date": "date", "date-time": "datetime", "time": "time_s"}
_YEAR = re.compile(r"(?<![\w-])((?:19|20)\d\d)(?![\w-])")


def named_formats(text: str) -> list[str]:
    """The formats a text names ('Expected HH:MM [24-hour format]' -> ['time'])."""
    text = text[:MAX_TEXT]
    return [name for pattern, name in _FORMATS if pattern.search(text)]


# what a value of each format looks like (a time zone's date-time is still a date-time)
_SHAPES = {"datetime": r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}.*", "date": r"\d{4}[-/]\d{2}[-/]\d{2}",
           "date_us": r"\d{1,2}/\d{1,2}/\d{4}", "date_eu": r"\d{1,2}[/.]\d{1,2}[/.]\d{4}", "month": r"\d{4}-\d{2}",
           "time_s": r"\d{1,2}:\d{2}:\d{2}", "time": r"\d{1,2}:\d{2}"}


def _formats_named(spec: ArgSpec, *texts: str) -> list[str]:
    """The formats the schema's `format` and `texts` name for `spec`, each once, the schema's first."""
    names = [_SCHEMA_FORMATS[spec.schema["format"]]] if spec.schema.get("format") in _SCHEMA_FORMATS else []
    for text in texts:
        names += [n for n in named_formats(text) if n not in names]
    return names


def fits_format(spec: ArgSpec, value: Any) -> bool:
    """Whether a text value has the shape of the format the argument's schema or own description names
    (any value when it names none): a time difference '+2.0h' is no time for 'Time (HH:MM)', and a server
    answers every such call with the same format error."""
    names = _formats_named(spec, spec.description)
    if not names or not isinstance(value, str):
        return True
    return any(re.fullmatch(_SHAPES[name], value.strip()) for name in names)


def _format_values(name: str, year: int) -> list[str]:
    dates = [(year, m, d) for m, d in _DAYS]
    return {"datetime": [f"{y}-{m:02d}-{d:02d}T{t}:00" for (y, m, d), t in zip(dates, _TIMES)],
            "date": [f"{y}-{m:02d}-{d:02d}" for y, m, d in dates],
            "date_us": [f"{m:02d}/{d:02d}/{y}" for y, m, d in dates],
            "date_eu": [f"{d:02d}/{m:02d}/{y}" for y, m, d in dates],
            "month": [f"{y}-{m:02d}" for y, m, _ in dates],
            "time_s": [f"{t}:00" for t in _TIMES], "time": list(_TIMES)}[name]


def format_values(spec: ArgSpec, *texts: str, scoped: tuple[str, ...] = ()) -> list[Value]:
    """Values of the formats the schema (`format`, `pattern`) or a text names, typed for `spec`: dates in
    a year a text names ("Day in 2024, YYYY-MM-DD" -> 2024-01-15, ...), else YEAR. `scoped` texts (a
    tool's description, the system prompt) give a format only to an argument that takes its kind (a
    date, a time): "start and end (HH:MM)" in a tool's description is no recipe for its room id."""
    names = _formats_named(spec, *texts)
    for text in scoped:
        names += [n for n in named_formats(text) if n not in names and _takes(spec, _KIND[n])]
    if any(ZONE_STANDARD.search(text[:MAX_TEXT]) for text in (*texts, *scoped)) and _takes(spec, "timezone"):
        names.append("timezone")
    years = [int(y) for text in (*texts, *scoped) for y in _YEAR.findall(_strip_formats(text[:MAX_TEXT]))]
    raw = [v for name in names for v in (time_zones() if name == "timezone"
                                         else _format_values(name, years[0] if years else YEAR))]
    if spec.type in ("string", None):
        # a code list the argument's own description names ("Two-letter US state code"), or the tool's
        # when the list is of the argument's thing ('country' for country_code)
        lists = [code_values(text[:MAX_TEXT]) for text in texts]
        lists += [code_values(text[:MAX_TEXT], about=tokens(spec.name)) for text in scoped]
        raw += [v for v in dict.fromkeys(v for values in lists for v in values) if v not in raw]
    pattern = spec.schema.get("pattern")
    if isinstance(pattern, str):
        raw += pattern_values(pattern)
    return typed(raw, spec, "description")


def _strip_formats(text: str) -> str:
    for pattern, _ in _FORMATS:
        text = pattern.sub(" ", text)
    return text


_CLASS = {r"\d": "0123456789", "[0-9]": "0123456789", "[A-Z]": "ABCDEFGHJK", "[a-z]": "abcdefghjk",
          "[A-Za-z]": "ABCDabcd", "[a-zA-Z]": "ABCDabcd", "[A-Z0-9]": "A1B2C3", "[a-z0-9]": "a1b2c3",
          r"\w": "abc123"}
_PIECE = re.compile(r"(\\d|\\w|\[[A-Za-z0-9-]+\]|\\.|[^\\\[\]{}()*+?|^$])(\{(\d+)(?:,(\d*))?\}|\?|\+)?")


def pattern_values(pattern: str) -> list[str]:
    """Two strings matching a simple JSON-schema `pattern` (literals, \\d, \\w, [A-Z]-style classes, {n,m},
    ?, +), e.g. '^[A-Z]{2}-\\d{4}$' -> ['AA-0000', 'BB-1111']; [] for anything richer (groups,
    alternatives): those are left to descriptions and errors."""
    body = pattern.removeprefix("^").removesuffix("$")
    if len(body) > 200:
        return []
    out = []
    for variant in range(2):
        built, at = [], 0
        for m in _PIECE.finditer(body):
            if m.start() != at:
                return []
            at = m.end()
            atom, quant, low, high = m.group(1), m.group(2), m.group(3), m.group(4)
            chars = _CLASS.get(atom) or (atom[1] if atom.startswith("\\") else atom if not atom.startswith("[") else None)
            if chars is None:
                return []
            count = 1 if quant is None else 0 if quant == "?" else 1 if quant == "+" else int(low)
            if quant and quant.startswith("{") and high not in (None, ""):
                count = max(int(low), min(int(high), int(low) + variant))
            built.append("".join(chars[(variant + i) % len(chars)] for i in range(count)))
        if at != len(body):
            return []
        out.append("".join(built))
    return list(dict.fromkeys(out))


# ----------------------------------------------------------------------- descriptions


@dataclass
class Mention:
    """Values a text names, with the words that introduce them (`label`: 'Units' in 'Units: kWh, GJ')."""

    values: list[Any]
    label: str
    context: str
    kind: str  # example | quoted | list | range | id | date | time | path


def text_mentions(text: str) -> list[Mention]:
    """The example values, quoted values, lists, numeric ranges, bare ids, dates and times a text names."""
    text = _strip_formats(text[:MAX_TEXT])
    found: list[Mention] = []
    for m in _EG.finditer(text):
        items = split_items(m.group(1), max_words=4)
        if items:
            found.append(Mention(items, "", text[:m.start()], "example"))
    # an example's place is marked: a list whose items each come with examples lists kinds of values
    # ("ISO 8601 format (e.g. ...), relative dates (e.g. ...)"), not values
    rest = _EG.sub(" \x00 ", text)
    for m in _QUOTED.finditer(rest):
        found.append(Mention([next(g for g in m.groups() if g is not None)], "", rest[:m.start()], "quoted"))
    unquoted = _QUOTED.sub(" ", rest)
    for m in _DATE.finditer(unquoted):
        found.append(Mention([m.group(0) if m.group(2) else m.group(1)], "", unquoted[:m.start()], "date"))
    for m in _PATH.finditer(unquoted):  # a sentence's full stop after a path is not part of it
        found.append(Mention([m.group(0).rstrip(".,;:").rstrip("/") or "/"], "", unquoted[:m.start()], "path"))
    no_dates = _DATE.sub(" ", _PATH.sub(" ", unquoted))
    for m in _TIME.finditer(no_dates):
        found.append(Mention([m.group(1)], "", no_dates[:m.start()], "time"))
    for m in ID_SHAPE.finditer(no_dates):
        found.append(Mention([m.group(0)], "", no_dates[:m.start()], "id"))
    for m in _RANGE.finditer(no_dates):
        low, high = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        found.append(Mention([float(low), float(high)], "", no_dates[:m.start()], "range"))
    for sentence in _SENTENCE.split(no_dates):
        clauses = [(m.group(1), sentence[:m.start()]) for m in re.finditer(r"\(([^()]{0,200})\)", sentence)]
        # (a bracket that held an example keeps its mark: "relative dates (e.g. ...), or ..." lists kinds)
        clauses.append((re.sub(r"\([^()]*\)", lambda m: " \x00 " if "\x00" in m.group(0) else " ", sentence), ""))
        for body, before in clauses:
            label, _, listed = body.rpartition(":") if ":" in body else ("", "", body)
            items = _list_items(listed)
            if items:
                found.append(Mention(items, (label or before).strip(), (label or before), "list"))
    return found


def split_items(text: str, max_words: int) -> list[str]:
    """'A, B or C' / "['a', 'b']" -> items, or [] when any item is too long to be a value."""
    text = text[:MAX_TEXT].strip().strip("[](){}").strip().rstrip(".").strip()
    parts = re.split(r"\s*,\s*(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+|\s*\|\s*", text)
    items = [p.strip().strip("'\"`").strip() for p in parts]
    items = [i for i in items if i]
    if not items or any(len(i.split()) > max_words or len(i) > 40 for i in items):
        return []
    return items


def _list_items(text: str) -> list[str]:
    if "\x00" in text:
        return []
    items = split_items(text, max_words=3)
    # three or more, or two joined by 'or': "Bcf and percent full" is a phrase, not a choice
    if len(items) >= 3 or (len(items) == 2 and re.search(r"\sor\s", text)):
        return items
    return []


def expand(values: list[Any], spec: ArgSpec, kind: str) -> list[Any]:
    """A range's values for a numeric argument; other mentions as they are."""
    if kind == "range":
        return in_range(values[0], values[1], spec.type, spec.name) if spec.type in ("integer", "number") else []
    out: list[Any] = []
    for value in values:
        ranged = _RANGE.fullmatch(str(value).strip()) if spec.type in ("integer", "number") else None
        if ranged:
            low, high = (ranged.group(1), ranged.group(2)) if ranged.group(1) else (ranged.group(3), ranged.group(4))
            out += in_range(float(low), float(high), spec.type, spec.name)
        else:
            out.append(value)
    return out


def thing_words(name: str) -> set[str]:
    """What an argument names, without the words that make it an id: customer_id -> {customer}."""
    words = significant(tokens(name)) or tokens(name)
    return (words - _ID_WORDS) or words


def id_variants(value: str, count: int, rng: random.Random, exclude: set[str]) -> list[str]:
    """Up to `count` ids shaped like `value`, its digits drawn anew ('X-1234' -> 'X-5831'), none in `exclude`."""
    out: list[str] = []
    for _ in range(count * 10):
        if len(out) == count:
            break
        variant = "".join(str(rng.randrange(1 if i == 0 and ch != "0" else 0, 10)) if ch.isdigit() else ch
                          for i, ch in enumerate(value))
        if variant != value and variant not in exclude and variant not in out:
            out.append(variant)
    return out


def carries_quantity(value: str) -> bool:
    """Free text with numbers that are quantities ('12 * 7', '55 mile/hour'): not an id, a date or a time."""
    return bool(re.search(r"\d", value)) and not ID_SHAPE.search(value) and not _DATE.search(value) \
        and not _TIME.search(value) and not _PATH.search(value) and len(value) <= 80


def is_id_argument(spec: ArgSpec) -> bool:
    """A string argument whose name says it identifies something (`customer_id`, `sku`, `order_no`)."""
    return spec.type in ("string", None) and bool(tokens(spec.name) & _ID_WORDS)


def _takes(spec: ArgSpec, kind: str) -> bool:
    """Whether a mention of `kind` (a bare id, a date, a time) can be a value of this argument."""
    words = tokens(spec.name)
    fmt = spec.schema.get("format")
    if kind == "id":
        return is_id_argument(spec)
    if kind == "date":
        return spec.type in ("string", None) and (bool(words & {"date", "day", "start", "end", "since", "until",
                                                               "from", "to", "when", "on", "after", "before"})
                                                 or fmt in ("date", "date-time"))
    if kind == "time":
        return spec.type in ("string", None) and (bool(words & {"time", "hour", "at", "start", "end"})
                                                 or fmt == "time")
    if kind == "timezone":
        return spec.type in ("string", None) and bool(words & {"timezone", "tz", "zone"})
    if kind == "path":
        return spec.type in ("string", None) and bool(words & _PATH_WORDS)
    return True


_DAY_WORDS = {"date", "day", "since", "until", "timestamp", "datetime", "after", "before"}
ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}(?!\d)")  # a day, or the day a date-time starts with
_DATED = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?\s*(?:Z|[+-]\d{2}:?\d{2})?)?")


def day_of(spec: ArgSpec, value: Any) -> str | None:
    """The day a result's date or date-time names ('2024-04-02 09:05:00+00:00' -> '2024-04-02'), when
    `spec` takes a day (its name says date, since, timestamp, ...; or start/end with a description
    about dates; or a date format) and that day fits its format; else None."""
    # the value first: it is called for every leaf of every result, and few leaves are dates
    found = _DATED.fullmatch(value.strip()) if isinstance(value, str) and spec.type in ("string", None) else None
    if found is None:
        return None
    words = tokens(spec.name)
    dated = words & _DAY_WORDS or spec.schema.get("format") in ("date", "date-time") or (
        words & {"start", "end", "from", "to"} and re.search(r"\b(?:date|day|timestamp)s?\b", spec.description, re.I))
    if not dated:
        return None
    # (a description that shows a bare day as an example takes one, whatever format it names first)
    shows_day = any(m.group(2) is None for m in _DATE.finditer(spec.description))
    return found.group(1) if shows_day or fits_format(spec, found.group(1)) else None


def description_values(spec: ArgSpec, tool_description: str, all_specs: list[ArgSpec],
                       prompt: str = "") -> list[Value]:
    """Values the argument's own description names, then those of the tool's description that are
    about this argument: a list labelled with the argument's words ('Units: ...' for from_unit), or an
    example, quoted value, bare id, date or range after those words (or in a one-argument tool, or for
    the tool's only argument of that shape); and values of a format either description names. An
    array argument gets one-item lists of its items' values."""
    item = item_spec(spec)
    if item is not None:
        inner = description_values(item, tool_description, [item], prompt)
        return [Value([v.value], v.origin) for v in inner]
    if spec.schema.get("enum") or "const" in spec.schema:
        return []  # the schema lists every value: a description's other words ('°C') are no values
    name_words = thing_words(spec.name)
    raw: list[Any] = []
    for mention in text_mentions(spec.description):
        if _takes(spec, mention.kind) or mention.kind in ("example", "quoted", "list", "range"):
            raw += expand(mention.values, spec, mention.kind)
    # the system prompt names what a deployment fixes (the repository, the account): only values of
    # a kind the argument takes, or right after the argument's own words
    for mention in text_mentions(prompt):
        if mention.kind in ("id", "date", "time", "path") and _takes(spec, mention.kind) \
                and (len([s for s in all_specs if _takes(s, mention.kind)]) == 1
                     or name_words <= tokens(mention.context)):
            raw += expand(mention.values, spec, mention.kind)
    for mention in text_mentions(tool_description):
        if mention.kind in ("id", "date", "time", "path"):
            takers = [s for s in all_specs if _takes(s, mention.kind)]
            about = _takes(spec, mention.kind) and (len(takers) == 1 or name_words <= tokens(mention.context))
        elif mention.kind == "list":  # every word of the name: 'One order: status, SKU' lists no order ids
            about = (significant(tokens(spec.name)) or tokens(spec.name)) <= tokens(mention.label)
        else:
            about = name_words <= tokens(mention.context) or len(all_specs) == 1
        if about:
            raw += expand(mention.values, spec, mention.kind)
    out = typed(raw, spec, "description")
    return out + [v for v in format_values(spec, spec.description, scoped=(tool_description,))
                  if v.value not in [o.value for o in out]]


# ----------------------------------------------------------------------- error messages


def hint_items(message: str) -> list[str]:
    """Valid values an error message lists: 'known citys: A, B', 'valid values: ...', "one of 'a', 'b'",
    'years available: 2019-2023'. A format it names ('Expected HH:MM') is no list of values."""
    message = _strip_formats(re.split(r"\s\[type=", message[:MAX_TEXT])[0])
    found: list[str] = []
    for m in _HINT_COLON.finditer(message):
        found += split_items(m.group(1), max_words=4)
    for m in _HINT_BARE.finditer(message):
        body = m.group(1)
        quoted = [next(g for g in q.groups() if g is not None) for q in _QUOTED.finditer(body)]
        if quoted:
            found += quoted
        elif body.strip().startswith("["):
            found += split_items(body, max_words=4)
    if not found and _OFFERS.search(message):  # "outside the allowed repository '/srv/x'", "did you mean 'Paris'?"
        found += [next(g for g in q.groups() if g is not None) for q in _QUOTED.finditer(message)]
    return [item for item in dict.fromkeys(found) if not re.search(r"[\[\]{}]|\bformat\b", item, re.IGNORECASE)]


def hinted_arguments(message: str, arguments: dict[str, Any], specs: list[ArgSpec], probed: list[str]) -> list[ArgSpec]:
    """Which arguments an error message is about: those whose probe value it quotes, else the probed
    ones, else those whose value or name it mentions, else the only argument."""
    from ajet.generate.explore_values import probe_value

    by_name = {s.name: s for s in specs}
    text = message[:MAX_TEXT].casefold()
    quoted = [n for n in arguments if n in by_name and isinstance(arguments[n], str) and len(arguments[n]) > 1
              and arguments[n].casefold() in text]
    probes = [n for n in quoted if arguments[n] == probe_value(n)]
    # an error that quotes what an argument was sent is about that argument, even when another was probed
    for names in (probes, quoted, [n for n in probed if n in by_name]):
        if names:
            return [by_name[n] for n in names]
    message_words = tokens(message[:MAX_TEXT])
    named = [s for s in specs if significant(tokens(s.name)) & message_words]
    if named:
        return named
    return specs if len(specs) == 1 else []


def hint_values(message: str, spec: ArgSpec) -> list[Value]:
    """The values an error message offers this argument: its listed items, for a number its ranges
    ('must be between 1 and 50'), and values of a format it names ('Expected HH:MM' -> 09:30, 16:45)."""
    items = expand(hint_items(message), spec, "list")
    if spec.type in ("integer", "number"):
        for m in _RANGE.finditer(re.split(r"\s\[type=", message[:MAX_TEXT])[0]):
            low, high = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            items += [v for v in in_range(float(low), float(high), spec.type, spec.name) if v not in items]
    formats = [v.value for v in format_values(ArgSpec(spec.name, {}, spec.type, spec.required), message)]
    return typed(items + [v for v in formats if v not in items], spec, "error_hint")
