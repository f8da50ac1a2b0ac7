"""Which record of a list a question names, when a value inside one record of several is asked or passed
on: its title or name, its id, its place in time order ('the first booking', 'the latest commit'), or a
short text no other record shares; AMBIGUOUS when nothing names it, and no question can say which.
Used by ajet.generate.candidates for every candidate's values and for the mention of its record."""

from __future__ import annotations

import re
from typing import Any, Sequence

from ajet.generate import phrasing
from ajet.generate.result_data import same_value, structured


_LABELS = ("title", "name", "label")
_ID_WORDS = {"id", "code", "sku", "number", "key"}
AMBIGUOUS = ("", "")  # item_label's answer for a record that nothing in it names


def item_label(result: Any, path: list[Any], whole: bool = False) -> tuple[str, str] | None:
    """The (key, text) naming the list record `path` runs through, when the list holds several: its
    `title`, `name` or `label` ({"loans": [{"loan_id", "title": "Dune", ...}, ...]} -> ("title", "Dune")),
    else its id ('id': 'O-5'), else its place in time order ('the first booking'; the last one's only
    when the list is `whole`: `uncut`); the key asked for is never its own label. AMBIGUOUS when nothing
    names the record ("Ada's order total" when Ada has two orders): no question can say which one."""
    node = result
    for i, step in enumerate(path):
        if isinstance(node, list) and isinstance(step, int) and step < len(node):
            item = node[step]
            if len(node) > 1:
                asked = (path[i + 1:i + 2] or [None])[0]
                if not isinstance(item, dict):
                    return AMBIGUOUS
                label = _record_label(item, step, asked, node, path[i - 1] if i else None, whole)
                if label is None:
                    return AMBIGUOUS
                if len(path) == i + 2 or not isinstance(item.get(asked), (dict, list)):
                    return label
            node = item
        elif isinstance(node, dict) and step in node:
            node = node[step]
        else:
            return None
    return None


def only_record(result: Any, path: list[Any], said: Sequence[Any] = ()) -> str | None:
    """How a question names the record its answer sits in when the record is its list's only one: 'the
    free slot' for ["free", 0, "start"] on a day with one free slot. Without it the question asked for
    'the start in rm-205', which a booking has too (rooms, dev: 7 of 8 free-slot questions went to the
    bookings tool). None where a list on the path holds several (item_label names those), where a text
    the user `said` is in the record (find_member('Ana Ruiz')'s one member is hers), or where its records
    have no noun of their own ('items', a key that is no plural)."""
    node, noun = result, None
    for i, step in enumerate(path):
        if isinstance(node, list) and isinstance(step, int) and step < len(node):
            if len(node) > 1 or not isinstance(node[step], dict) or not i or not isinstance(path[i - 1], str):
                return None
            noun = _record_noun(path[i - 1], node)
            node = node[step]
            if any(isinstance(v, str) and isinstance(t, str) and same_value(v, t) for v in node.values() for t in said):
                return None
        elif isinstance(node, dict) and step in node:
            node = node[step]
        else:
            return None
    if noun is None or noun.split(" ")[-1] == "one" or noun.split(" ")[-1] in phrasing.field_name(path).split(" "):
        return None  # 'the booking id of the booking' says it twice
    return f"the {noun}"


def _record_label(item: dict[str, Any], index: int, asked: Any, records: list[Any], list_key: Any,
                  whole: bool) -> tuple[str, str] | None:
    """The field that names one record of `records`: a title or name no other record shares first
    ('common_name' too), else an id-like key, else for the first (or, in a `whole` list, the last) of
    records in time order its place ('the first booking': `_place_in_time`), else any short text no
    other record shares (a commit's message)."""
    def fits(key: Any, value: Any) -> bool:
        return key != asked and not isinstance(value, bool) and isinstance(value, (str, int)) \
            and 0 < len(str(value)) <= 60

    def alone(key: Any, value: Any) -> bool:  # no other record has it: two "Customer call"s name neither
        return sum(isinstance(r, dict) and same_value(r.get(key), value) for r in records) == 1
    for key, value in item.items():
        if fits(key, value) and isinstance(value, str) and key_words(key) & set(_LABELS) and alone(key, value):
            return str(key), value
    for key, value in item.items():
        if fits(key, value) and (key_words(key) & _ID_WORDS or str(key).lower() == "id"):
            return str(key), str(value)
    place = _place_in_time(records, index, list_key, whole)
    if place:
        return phrasing.POSITION, place
    for key, value in item.items():
        if fits(key, value) and isinstance(value, str) and not re.match(r"\d{4}-\d{2}", value) and alone(key, value):
            return str(key), value
    return None


_WHEN = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)?|\d{1,2}:\d{2}")
_GENERIC_LISTS = {"item", "result", "record", "entry", "row", "data", "list", "value"}
_CUT_ARGUMENTS = {"limit", "max", "top", "page", "offset", "cursor", "size", "count"}
_CUT_RESULTS = {"next", "cursor", "page", "offset", "more", "truncated", "total"}


def naming_keys(record: dict[str, Any]) -> list[str]:
    """The keys of a record that name it: its title, name or label, and its id-like keys (`room_id`
    too: key_words drops two-letter words)."""
    return [key for key, value in record.items() if isinstance(value, (str, int)) and not isinstance(value, bool)
            and set(re.split(r"[^a-z0-9]+", str(key).casefold())) & {*_LABELS, *_ID_WORDS}]


def uncut(step: dict[str, Any], result: Any = None) -> bool:
    """Whether a call's lists are all there is: its tool takes no limit or page, and its result (`result`
    when already parsed) names no further page. The last record of a cut list is not the last there is."""
    names = set(step["arguments"]) | set(step.get("optional") or []) | set(step.get("defaults") or {})
    result = structured(step.get("result")) if result is None else result
    return not any(key_words(name) & _CUT_ARGUMENTS for name in names) and not (
        isinstance(result, dict) and any(key_words(key) & _CUT_RESULTS for key in result))


def _place_in_time(records: list[Any], index: int, list_key: Any, whole: bool) -> str | None:
    """How a user names a record of `records` when they come in time order by one of their fields (a
    booking's start, a commit's date): the first, 'the first booking' (earliest first) or 'the latest
    commit' (newest first); in a `whole` list the last too, 'the last booking' or 'the earliest commit'."""
    last = index == len(records) - 1
    if (index and not (last and whole)) or not isinstance(list_key, str) or not all(isinstance(r, dict) for r in records):
        return None
    for key, value in records[0].items():
        times = [r.get(key) for r in records]
        if not all(isinstance(t, str) and _WHEN.fullmatch(t) for t in times):
            continue
        ordered = [t.zfill(5) if len(t) <= 5 else t for t in times]  # '9:30' before '10:00'
        rising = all(a < b for a, b in zip(ordered, ordered[1:]))
        if rising or all(a > b for a, b in zip(ordered, ordered[1:])):
            word = ("last" if rising else "earliest") if last else ("first" if rising else "latest")
            return f"the {word} {_record_noun(list_key, records)}"
    return None


def _record_noun(list_key: str, records: list[Any] = ()) -> str:
    """What one record of a list is called: 'bookings' -> 'booking', 'free_slots' -> 'free slot',
    'items' -> 'one'; a key that is no plural noun ('free') -> 'free slot' when its records are spans
    of time (a start and an end), else 'free one'."""
    said = phrasing.words(list_key).split(" ")
    if said[-1] in ("list", "array") and len(said) > 1:  # 'ticketList' -> 'ticket'
        return " ".join(said[:-1])
    last = said[-1]
    if last.endswith("s") and not last.endswith(("ss", "us")) and len(last) > 3:
        single = last[:-3] + "y" if last.endswith("ies") else last[:-1]
        return "one" if single in _GENERIC_LISTS else " ".join([*said[:-1], single])
    return " ".join([*said, "slot" if records and all(_is_span(r) for r in records) else "one"])


def records_noun(list_key: str, records: list[Any] = ()) -> str:
    """What the records of a list are called together, as 'the number of ...' says them: 'bookings',
    'free slots' for a list `free` of spans of time, 'free ones' for another list `free`."""
    one = _record_noun(list_key, records)
    plural = phrasing.words(list_key)
    return plural if one == "one" or (plural.endswith("s") and not plural.endswith(("ss", "us"))) else f"{one}s"


def _is_span(record: Any) -> bool:
    """Whether a record is a span of time: a time or date under a start key and another under an end key
    ({'start': '09:00', 'end': '10:30'}, {'from': '2025-01-02', 'until': '2025-01-05'})."""
    if not isinstance(record, dict):
        return False
    bounds = set()  # the start and end words of the keys that hold a time or date
    for key, value in record.items():
        if isinstance(value, str) and _WHEN.fullmatch(value):
            bounds |= set(phrasing.words(key).split(" ")) & (_STARTS | _ENDS)
    return bool(bounds & _STARTS and bounds & _ENDS)


_STARTS = {"start", "starts", "begin", "begins", "from", "since"}
_ENDS = {"end", "ends", "until", "to", "finish", "finishes"}


def key_words(key: Any) -> set[str]:
    """The words of a key longer than two letters, lower-cased: `price_usd_per_mmbtu` -> {price, usd, per, mmbtu}."""
    return {w for w in re.split(r"[^a-z0-9]+", str(key).casefold()) if len(w) > 2}
