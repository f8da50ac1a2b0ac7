"""Where `ajet generate explore` finds argument values, most trusted first:

    schema_enum      enum, const, a boolean's true/false
    schema_default   default
    schema_example   examples, and values inside minimum/maximum
    description      the argument's description and the tool's (ajet.generate.text_values: examples,
                     quoted values, lists, ranges, bare ids, dates, times, formats)
    error_hint       error messages (ajet.generate.text_values): "unknown city 'x'; known cities: ..."
    graph            a value an earlier result returned under a matching key (customer_id <- the id
                     of a customer; price <- price_usd_per_mmbtu)
    generic          numbers with no hint (1, 2.5, 10, 100), formats (a date, an email), plain values
                     for common names (city: Lisbon, country: Japan)

Every function here is pure: schemas and results in, values out. `explore.py` runs the calls.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ajet.generate.phrasing import in_minutes
from ajet.generate.result_data import structured

ORIGINS = ("schema_enum", "schema_default", "schema_example", "description", "error_hint", "graph", "generic",
           "wildcard")

_STOP = {"a", "b", "c", "x", "y", "z", "the", "of", "per", "from", "to", "in", "by", "for", "and", "or", "with",
         "at", "on", "get", "list", "fetch", "find", "search", "show", "new", "old", "is", "an"}
_NUM = r"-?\d+(?:\.\d+)?"
_GENERIC_NUMBERS = {"integer": [1, 2, 10, 100], "number": [1, 2.5, 10, 100]}
# Plain values for common argument names, the most specific word first: the last resort for a
# free-text argument that the server accepts anything for, or that no other source names. None of
# them is a value of a server this project was tuned on: a fallback that happens to be one would
# make that server look easier than a user's.
_NAMED = {"email": "alice@example.com", "username": "alice", "user": "alice", "first": "Alice", "last": "Smith",
          "name": "Alice", "city": "Lisbon", "town": "Lisbon", "place": "Lisbon", "location": "Lisbon",
          "address": "1 Main Street", "county": "Kings County", "state": "Ohio", "country": "Japan",
          "region": "North", "language": "en", "lang": "en", "locale": "en-US", "currency": "EUR",
          "ticker": "MSFT", "symbol": "MSFT", "date": "2025-06-02", "day": "2025-06-02", "time": "09:30",
          "timezone": "UTC", "url": "https://example.com", "phone": "+1 555 0100", "color": "blue",
          "expression": ["12 * 7", "(3 + 4) * 5", "100 / 8", "2 ** 10"], "expr": ["12 * 7", "(3 + 4) * 5"],
          "formula": ["12 * 7", "(3 + 4) * 5"], "equation": ["12 * 7", "(3 + 4) * 5"]}
# A free-text argument that searches (a query, a name to look up): a one-letter query matches most
# records of a server that searches by substring, which is how a list with real ids and names comes
# back when no description names a value. Calls made with them are for discovery only (origin
# "wildcard": no task is written from them).
_SEARCH_WORDS = {"query", "q", "search", "keyword", "term", "text", "name", "pattern", "filter"}
_WILDCARDS = ["a", "e"]
# Result fields that name their record: a name or a title seen in one result is a query another
# call can search for.
_LABEL_KEYS = {"title", "name", "label"}
_FORMATS = {"date": "2025-06-02", "date-time": "2025-06-02T09:30:00Z", "time": "09:30:00", "email": "user@example.com",
            "uri": "https://example.com", "url": "https://example.com", "uuid": "00000000-0000-4000-8000-000000000001"}


@dataclass(frozen=True)
class Value:
    """One candidate value of an argument; `source` is {"call", "path"} for a value an earlier result
    returned (origin graph); `shared` marks a value of a key that repeats across the records of its
    list (an author of two books), so it names no one record."""

    value: Any
    origin: str
    source: dict[str, Any] | None = field(default=None, compare=False)
    shared: bool = field(default=False, compare=False)


def value_key(value: Any) -> str:
    """A canonical text of a value or an arguments dict: equal values, equal keys."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


# ----------------------------------------------------------------------- names and types


def tokens(name: str) -> set[str]:
    """The words of an identifier or label, lower-cased and singular: 'customerIds' -> {customer, id}."""
    words = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name.replace("-", "_"))
    out = set()
    for word in (w.lower() for w in words):
        if word == "ids":
            word = "id"
        elif word.endswith("ies") and len(word) > 4:
            word = word[:-3] + "y"
        elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
            word = word[:-1]
        out.add(word)
    return out


def significant(words: set[str]) -> set[str]:
    return {w for w in words if w not in _STOP and not w.isdigit()}


@dataclass
class ArgSpec:
    """One argument of a tool: its resolved JSON schema, JSON type and whether it is required."""

    name: str
    schema: dict[str, Any]
    type: str | None
    required: bool

    @property
    def description(self) -> str:
        return str(self.schema.get("description") or "")


def arg_specs(parameters: dict[str, Any] | None) -> list[ArgSpec]:
    """The arguments of an OpenAI function spec's `parameters`, `$ref`s and nullable `anyOf`s resolved."""
    parameters = parameters or {}
    defs = {**(parameters.get("definitions") or {}), **(parameters.get("$defs") or {})}
    required = set(parameters.get("required") or [])
    specs = []
    for name, raw in (parameters.get("properties") or {}).items():
        schema = _resolve(raw if isinstance(raw, dict) else {}, defs)
        specs.append(ArgSpec(name, schema, _json_type(schema), name in required))
    return specs


def item_spec(spec: ArgSpec) -> ArgSpec | None:
    """The schema of one item of an array argument, under the argument's name, or None."""
    items = spec.schema.get("items") if spec.type == "array" else None
    return ArgSpec(spec.name, items, _json_type(items), True) if isinstance(items, dict) else None


def _resolve(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    if depth > 5:
        return schema
    if "$ref" in schema:
        target = defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    for key in ("anyOf", "oneOf", "allOf"):
        options = [_resolve(o, defs, depth + 1) for o in schema.get(key) or [] if isinstance(o, dict)]
        options = [o for o in options if o.get("type") != "null"]
        if options:
            merged = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf", "allOf")}
            for option in options:
                for k, v in option.items():
                    if k == "enum" and "enum" in merged:
                        merged["enum"] = [*merged["enum"], *v]
                    else:
                        merged.setdefault(k, v)
            schema = merged
    if isinstance(schema.get("items"), dict):
        schema = {**schema, "items": _resolve(schema["items"], defs, depth + 1)}
    return schema


def _json_type(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and schema.get("enum"):
        kind = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(schema["enum"][0]))
    return kind if isinstance(kind, str) else None


def coerce(value: Any, kind: str | None) -> tuple[bool, Any]:
    """`value` as the JSON type `kind` wants, and whether that worked ('2019' -> 2019 for an integer)."""
    if kind is None:
        return True, value
    if kind == "string":
        if isinstance(value, str):
            return bool(value.strip()), value.strip()
        return (True, str(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else (False, None)
    if kind in ("integer", "number"):
        if isinstance(value, bool):
            return False, None
        if isinstance(value, str) and re.fullmatch(_NUM, value.strip().replace(",", "")):
            value = float(value.strip().replace(",", ""))
        if isinstance(value, (int, float)):
            if kind == "integer":
                return (True, int(value)) if float(value).is_integer() else (False, None)
            return True, int(value) if float(value).is_integer() else value
        return False, None
    if kind == "boolean":
        if isinstance(value, bool):
            return True, value
        text = str(value).strip().lower()
        return (True, text == "true") if text in ("true", "false") else (False, None)
    if kind == "array":
        return (True, value) if isinstance(value, list) else (False, None)
    if kind == "object":
        return (True, value) if isinstance(value, dict) else (False, None)
    return True, value


def typed(values: list[Any], spec: ArgSpec, origin: str) -> list[Value]:
    out = []
    for raw in values:
        ok, value = coerce(raw, spec.type)
        if ok:
            out.append(Value(value, origin))
    return out


# ----------------------------------------------------------------------- the schema


def schema_values(spec: ArgSpec) -> list[Value]:
    """enum / const / boolean, default, examples and in-range numbers of the argument's schema."""
    schema = spec.schema
    item = item_spec(spec)
    if item is not None:
        wrapped = [Value([v.value], v.origin) for v in schema_values(item)]
        return typed([schema["default"]], spec, "schema_default") + wrapped if "default" in schema else wrapped
    out = typed(list(schema.get("enum") or []), spec, "schema_enum")
    if "const" in schema:
        out += typed([schema["const"]], spec, "schema_enum")
    if spec.type == "boolean" and not out:
        out += [Value(True, "schema_enum"), Value(False, "schema_enum")]
    if schema.get("default") is not None:
        out += typed([schema["default"]], spec, "schema_default")
    examples = schema.get("examples")
    out += typed(list(examples) if isinstance(examples, list) else [], spec, "schema_example")
    if "example" in schema:
        out += typed([schema["example"]], spec, "schema_example")
    if spec.type in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if isinstance(low, (int, float)) or isinstance(high, (int, float)):
            low = low if isinstance(low, (int, float)) else min(0, high - 10)
            high = high if isinstance(high, (int, float)) else max(low + 10, 100)
            strict = (low + (1 if spec.type == "integer" else 0.5) if "exclusiveMinimum" in schema else low,
                      high - (1 if spec.type == "integer" else 0.5) if "exclusiveMaximum" in schema else high)
            out += typed(in_range(*strict, spec.type, spec.name), spec, "schema_example")
    return out


_ROUND_STEPS = (1, 2, 3, 5)  # round numbers are these times a power of ten: 20, 30, 50, 100, 200


# the lengths of time people book or ask for, in minutes: a 45-minute or 2-hour meeting, never a 100-minute one
_MINUTE_STEPS = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 360, 480, 720, 1440)


def _round_near(target: float, minutes: bool = False) -> int:
    """The round number (1, 2, 3 or 5 times a power of ten; for minutes a length people say) nearest
    to `target` on a log scale."""
    scale = 10 ** math.floor(math.log10(target))
    options = _MINUTE_STEPS if minutes and target <= _MINUTE_STEPS[-1] else [step * scale for step in (*_ROUND_STEPS, 10)]
    return int(min(options, key=lambda option: abs(math.log(option / target))))


def in_range(low: float, high: float, kind: str | None, name: str = "") -> list[float]:
    """A few values from low to high: every integer of a short range; else the ends and, for
    integers, the round numbers a user would say between them, spread on a log scale (1..1000 ->
    1, 5, 30, 200, 1000; for argument `name` in minutes 15..600 -> 15, 45, 90, 240, 600: a 45-minute
    meeting, never a 307- or 100-minute one); for decimals the middle."""
    if high < low:
        return []
    if kind == "integer" and float(low).is_integer() and float(high).is_integer():
        low, high = int(low), int(high)
        if high - low <= 12:
            return list(range(low, high + 1))
        start = max(low, 1)  # 0 and below have no logarithm: the spread starts at 1
        minutes = in_minutes(name)
        inside = {_round_near(start * (high / start) ** (i / 4), minutes) for i in (1, 2, 3)} if high > start else set()
        inside = {v for v in inside if low < v < high} or {(low + high) // 2}  # none round in -100..-20: the middle
        return [low, *sorted(inside), high]
    return [low, round((low + high) / 2, 4), high]


def generic_values(spec: ArgSpec) -> list[Value]:
    """The last resort: a few plain numbers, a value of the string's declared format or a plain one for
    a common name (city: Boston, email, date), an empty list, an object of its required properties'
    first candidates."""
    if spec.type in _GENERIC_NUMBERS:
        return [Value(v, "generic") for v in _GENERIC_NUMBERS[spec.type]]
    fmt = spec.schema.get("format")
    if spec.type == "string" and fmt in _FORMATS:
        return [Value(_FORMATS[fmt], "generic")]
    if spec.type in ("string", None):
        words = tokens(spec.name)
        named = next((value for word, value in _NAMED.items() if word in words), None)
        found = [Value(v, "generic") for v in (named if isinstance(named, list) else [named] if named else [])]
        if words & _SEARCH_WORDS:
            found += [Value(w, "wildcard") for w in _WILDCARDS]
        return found
    if spec.type == "array":
        return [Value([], "generic")]
    if spec.type == "object":
        inner_specs = arg_specs(spec.schema)
        value = {}
        for inner in (s for s in inner_specs if s.required):
            found = schema_values(inner) + generic_values(inner)
            if not found:
                return []
            value[inner.name] = found[0].value
        return [Value(value, "generic")]
    return []


# ----------------------------------------------------------------------- probes


def probe_value(name: str) -> str:
    """The value a probe sends: no server knows it, and an error that quotes it names the argument."""
    return f"zz-{name}-probe"


# ----------------------------------------------------------------------- earlier results


@dataclass
class Leaf:
    """A scalar inside a result: its path, the words of its key and of the object around it."""

    path: list[Any]
    key_words: set[str]
    around_words: set[str]
    value: Any


def leaves(result: Any, tool: str, limit: int = 400) -> list[Leaf]:
    """The scalars of a structured result, or of the data a text result holds (depth 6, 50 items a
    list); the words 'around' a top-level value are the tool's name ('list_customers' -> customer),
    inside an object its key's."""
    out: list[Leaf] = []

    def walk(node: Any, path: list[Any], key: str, around: set[str], depth: int) -> None:
        if len(out) >= limit or depth > 6:
            return
        if isinstance(node, dict):
            inner = significant(tokens(key)) or around if key else around
            for k, v in node.items():
                walk(v, [*path, k], str(k), inner, depth + 1)
        elif isinstance(node, list):
            for i, item in enumerate(node[:50]):
                walk(item, [*path, i], key, around, depth + 1)
        elif isinstance(node, (str, int, float)) and not isinstance(node, bool) and key:
            if not isinstance(node, str) or 0 < len(node.strip()) <= 80:
                out.append(Leaf(path, tokens(key), around, node))

    # a server that sends JSON or labelled lines as text: the path is into that data (result_data.structured)
    result = structured(result)
    if isinstance(result, (dict, list)):
        walk(result, [], "", significant(tokens(tool)), 0)
    return out


def shared_paths(found: list[Leaf]) -> set[tuple[Any, ...]]:
    """The paths of leaves whose key repeats a value across the records of one list: in a search
    result, `author` (two books by one author) is shared, `title` and `book_id` are not. A question
    built on a shared value asks about several records at once, and a search for it teaches the model
    that a person's name goes to the catalog; values that identify one record are tried first."""
    by_key: dict[tuple[Any, ...], list[Leaf]] = defaultdict(list)
    for leaf in found:
        if any(isinstance(step, int) for step in leaf.path):
            by_key[tuple("*" if isinstance(step, int) else step for step in leaf.path)].append(leaf)
    shared: set[tuple[Any, ...]] = set()
    for group in by_key.values():
        texts = [value_key(leaf.value) for leaf in group]
        if len(set(texts)) < len(texts):
            shared.update(tuple(leaf.path) for leaf in group)
    return shared


def feeds(spec: ArgSpec, leaf: Leaf, tool_words: set[str] | None = None) -> bool:
    """Does this result value fit this argument? The JSON types agree, and the key holds every word of
    the argument's name (price <- price_usd_per_mmbtu, city_a <- city), or the key is part of the name
    and the object around it says the rest (customer_id <- the id of a customer, not a customer_id
    inside an order: order_id <- it would be wrong). A search argument (query, name) of a tool about
    `tool_words` takes a title or name found inside a record of that kind (find_member(name) <- a
    member's name, search_books(query) <- a book's title, never a book's title as a member's name)."""
    if spec.schema.get("enum") or "const" in spec.schema:
        return False
    if spec.type == "string" and not isinstance(leaf.value, str) and not (
            isinstance(leaf.value, int) and not isinstance(leaf.value, bool) and leaf.key_words & {"id", "code", "number"}):
        return False  # (a whole-number id fits a text argument: survey_id 101 <- "101")
    if spec.type in ("integer", "number") and not isinstance(leaf.value, (int, float)):
        return False
    if spec.type == "integer" and not float(leaf.value).is_integer():
        return False
    if spec.type not in ("string", "integer", "number", None):
        return False
    want = significant(tokens(spec.name))
    have_key = significant(leaf.key_words)
    if (tool_words and spec.type in ("string", None) and isinstance(leaf.value, str)
            and tokens(spec.name) & _SEARCH_WORDS and leaf.key_words & _LABEL_KEYS):
        return bool(leaf.around_words & tool_words)
    if not want:
        return tokens(spec.name) == leaf.key_words
    if not have_key:
        return False
    return want <= have_key or (have_key <= want and want <= have_key | leaf.around_words)
