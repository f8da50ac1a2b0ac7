"""What a tool result holds, for `ajet generate`: its data, whether it says anything, and which of its
values change between two identical calls.

- `structured`: a result as data. Structured content and JSON text as they are; a text of labelled
  lines ("Author: Ada Lovelace", "Total: 12.5"), as many servers write their results, as records
  `{label: value}` (a list of records when labels repeat, one record per block). Paths into a result
  (the bank's `inputs_from`, a task's `target`) are paths into this.
- `says_nothing`: an empty list, nothing but the arguments echoed back, zero counts beside empty
  lists, "No results found.": such a call ran, but it is no reference for a question (a customer id
  that is really a currency code gets `{"customer_id": "USD", "orders": []}`).
- `changed_paths`: where two results of the same call differ. A value that changes between identical
  calls (a clock, a random quote, a live price) is never a reference answer, nor passed along a chain.
- `volatile_paths`: those, and what reads the wall clock even when the repeat read the same second,
  with the dates and weekdays beside a clock reading, and the weekdays of a result dated today that no
  argument dated: what explore stores as a call's `volatile`.

Pure functions of the standard library's types.
"""

from __future__ import annotations

import html
import json
import re
from datetime import date, datetime, timezone
from typing import Any

Path = tuple[Any, ...]
COUNT = "#"  # the last step of a path to a list's length: ["bookings", "#"] is how many bookings there are

_LABELLED = re.compile(r"^\s*[-*•]?\s*([A-Za-z][A-Za-z0-9 _/().-]{0,40}?)\s*:\s+(\S.{0,300}?)\s*$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_DATEISH = re.compile(r"\d{4}-\d{2}|\d{1,2}:\d{2}|\d{1,2}/\d{1,2}")
# An id written bare: letters, then digits ('X-1234', 'C-17', 'tr-104', 'ORD-2024-001', 'SKU123'); lower-case
# letters only with a separator ('mp3' and 'covid19' are words).
ID_SHAPE = re.compile(r"(?<![\w-])(?:[A-Z][A-Za-z]{0,5}[-_]?|[a-z]{1,6}[-_])\d{2,}(?:[-_][A-Za-z0-9]+)*(?![\w-])")
_NOTHING = re.compile(r"\b(?:no|not|none|nothing|zero)\b[^.\n]{0,40}?\b(?:found|results?|match(?:es|ing)?|exists?|"
                      r"available|records?|data|entries|items)\b|^\s*(?:none|null|n/?a|\[\]|\{\})\s*\.?\s*$",
                      re.IGNORECASE)
_MAILBOX = re.compile(r"([^<>@\n]*[^<>@\s])\s*<([^<>@\s]+@[^<>@\s]+\.[^<>@\s]+)>")  # RFC 5322 'Name <address>'
MAX_LINES = 400  # lines of a text result read as labelled lines


_AMOUNT = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:%|[A-Za-z°$€£][A-Za-z/°%]{0,12})(?:\b.*)?")


def _scalar(text: str) -> Any:
    """A cell or a labelled value as data: a number, an amount with its unit as its number ('11.6 km
    round trip, 570 m gain' -> 11.6, '60 spaces' -> 60), else the text."""
    text = text.strip().strip("'\"`").strip()
    if _NUMBER.fullmatch(text):
        return int(text) if re.fullmatch(r"-?\d+", text) and len(text) < 16 else float(text)
    amount = _AMOUNT.fullmatch(text) if len(text) <= 60 else None
    if amount and not _DATEISH.match(text):
        return _scalar(amount.group(1))
    return text


def structured(result: Any) -> Any:
    """`result` as data: dicts and lists as they are; text as the first of these it holds: JSON, a bare
    number, an HTML or Markdown table (a list of records by its header; [] when it has no rows),
    labelled lines, or lines that each name one id ('- **Lake Serene** [tr-151]: 13.0 km round trip' ->
    {"id", "name", "round_trip_km"}); any other text stays text."""
    if not isinstance(result, str):
        return result
    text = result.strip()
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass
    if _NUMBER.fullmatch(text):
        return _scalar(text)
    for reader in (_html_table, _markdown_table, _labelled, _id_lines, _counted):
        found = reader(text)
        if found is not None:
            return found
    return result


def _labelled(text: str) -> Any:
    records: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in text.splitlines()[:MAX_LINES]:
        found = _LABELLED.match(line)
        if not found or "//" in found.group(2)[:2]:  # 'https://...' is no label
            continue
        label = found.group(1).strip()
        if label.count("(") != label.count(")"):  # a line of code ('def last_frost(zone: str) -> str:')
            continue
        if label in current:  # a label seen again starts the next record (a log of commits, a list of rows)
            records.append(current)
            current = {}
        mailbox = _MAILBOX.fullmatch(found.group(2))
        if mailbox:  # 'Author: Priya Raman <priya@example.dev>': who, and the address apart
            current[label], current[f"{label} email"] = mailbox.group(1), mailbox.group(2)
            continue
        current[label] = _scalar(found.group(2))
    if current:
        records.append(current)
    if sum(len(r) for r in records) < 2:
        return None
    return records[0] if len(records) == 1 else records


_CELL = re.compile(r"<t([hd])[^>]*>(.*?)</t[hd]>", re.IGNORECASE | re.DOTALL)
_ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]{0,200}>")


def _html_table(text: str) -> Any:
    if "<table" not in text[:2000].lower():
        return None
    header: list[str] = []
    records: list[dict[str, Any]] = []
    for row in _ROW.findall(text[:200_000]):
        cells = _CELL.findall(row)
        if cells and all(kind.lower() == "h" for kind, _ in cells) and not header:
            header = [" ".join(_TAG.sub(" ", body).split()) for _, body in cells]
        elif cells and header:
            values = [_scalar(html.unescape(" ".join(_TAG.sub(" ", body).split()))) for _, body in cells]
            records.append(dict(zip(header, values)))
    return records if header else None


def _markdown_table(text: str) -> Any:
    lines = [line.strip() for line in text.splitlines()[:MAX_LINES] if line.strip().startswith("|")]
    if len(lines) < 2 or not re.fullmatch(r"\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?", lines[1]):
        return None
    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip("|").split("|")]
    header = cells(lines[0])
    return [dict(zip(header, (_scalar(c) for c in cells(line)))) for line in lines[2:]]


_COUNTED = re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?)\s+([a-z]{3,20})\b")


def _counted(text: str) -> Any:
    """Prose that counts things ('parks at Chirico Trailhead (60 spaces)') as {thing: number}, when
    each thing is counted once."""
    if len(text) > 2000:
        return None
    found = [(m.group(2), _scalar(m.group(1))) for m in _COUNTED.finditer(text)]
    names = [name for name, _ in found]
    if not found or len(set(names)) != len(names):
        return None
    return dict(found)


_QUANTITY = re.compile(r"(-?\d+(?:\.\d+)?)\s*([A-Za-z°%][A-Za-z/°%]{0,12})((?:\s+[a-z]{2,20}){0,3})")
_BOLD = re.compile(r"\*\*([^*]{1,80})\*\*|__([^_]{1,80})__")


def _id_lines(text: str) -> Any:
    """Lines that each name exactly one id, as records {"id", "name"}: a list written as text."""
    records = []
    for line in text.splitlines()[:MAX_LINES]:
        ids = ID_SHAPE.findall(line)
        if len(ids) != 1:
            continue
        record: dict[str, Any] = {"id": ids[0]}
        bold = _BOLD.search(line)
        name = (bold.group(1) or bold.group(2)) if bold else line.split(ids[0])[0].strip(" -*•[(:#\t")
        if name and len(name) <= 80 and not ID_SHAPE.search(name):
            record["name"] = name.strip()
        for part in line.split(ids[0], 1)[1].lstrip(" ])*:-").split(","):
            amount = _QUANTITY.fullmatch(part.strip())
            if amount:  # '13.0 km round trip, 820 m gain': {"round_trip_km": 13.0, "gain_m": 820}
                first, rest = amount.group(2), amount.group(3).split()
                if len(first) > 3 and first.isalpha():  # '3 open tickets': no unit, all of it names the thing
                    key = "_".join([first, *rest])
                elif rest:  # a unit first ('km', 'm', '°C'): the thing, then its unit, as keys are named
                    key = "_".join([*rest, first])
                else:
                    continue  # '45%': nothing names what it measures
                record.setdefault(key, _scalar(amount.group(1)))
        records.append(record)
    return records if len(records) >= 1 and any("name" in r for r in records) else None


def same_value(a: Any, b: Any) -> bool:
    """Equal as a user would read them: text case-insensitively, numbers within 1e-9, 12 and '12' alike."""
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a))
    if isinstance(a, (int, float)) and isinstance(b, str) or isinstance(a, str) and isinstance(b, (int, float)):
        return str(a).strip() == str(b).strip()
    return a == b


def says_nothing(result: Any, arguments: dict[str, Any]) -> bool:
    """Whether a result that is not an error still tells nothing: no value but the call's own
    arguments, None, empty text, or zeros and `false` beside an empty list; or a short text that says
    nothing was found."""
    data = structured(result)
    if isinstance(data, str):
        text = data.strip()
        # "Commit history:" with nothing under it: a heading of an empty list
        return not text or (len(text) <= 120 and bool(_NOTHING.search(text))) or (len(text) <= 60 and text.endswith(":"))
    given = [v for v in arguments.values() if not isinstance(v, (dict, list))]
    scalars: list[Any] = []
    empty_list = False

    def walk(node: Any, depth: int) -> None:
        nonlocal empty_list
        if depth > 8:
            scalars.append(node)
        elif isinstance(node, dict):
            for child in node.values():
                walk(child, depth + 1)
        elif isinstance(node, list):
            empty_list = empty_list or not node
            for child in node:
                walk(child, depth + 1)
        elif node is not None and not (isinstance(node, str) and not node.strip()):
            if not any(same_value(node, g) for g in given):
                scalars.append(node)

    walk(data, 0)
    if empty_list:  # {"orders": [], "count": 0, "found": false}: the zeros and false say the list is empty
        scalars = [s for s in scalars if not (s is False or (isinstance(s, (int, float)) and s == 0))]
    return not scalars


def changed_paths(first: Any, second: Any, limit: int = 200) -> list[Path]:
    """The paths where two results of one call differ: [] when they agree, [()] (the whole result) when
    their shapes differ."""
    a, b = structured(first), structured(second)
    found: list[Path] = []

    def walk(x: Any, y: Any, path: Path) -> bool:
        if len(found) >= limit:
            return True
        if isinstance(x, dict) and isinstance(y, dict):
            if set(x) != set(y):
                return False
            return all(walk(x[k], y[k], (*path, k)) for k in x)
        if isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return False
            return all(walk(p, q, (*path, i)) for i, (p, q) in enumerate(zip(x, y)))
        if isinstance(x, (dict, list)) or isinstance(y, (dict, list)):
            return False
        if x != y:
            found.append(path)
        return True

    return found if walk(a, b, ()) else [()]


_CLOCK = re.compile(r"\d{1,2}:\d{2}")
_DAY_NAMES = (r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|january|february|march|april|may|june|july|august|"
              r"september|october|november|december")
_CALENDAR = re.compile(rf"\d{{4}}-\d{{2}}-\d{{2}}.*|{_DAY_NAMES}", re.IGNORECASE)
# an argument that dates the call: a date, or a weekday or month as a word ('June', not 'America/Juneau')
_DATED_ARGUMENT = re.compile(rf"\d{{4}}-\d{{2}}-\d{{2}}|\b(?:{_DAY_NAMES})\b", re.IGNORECASE)
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
_NEAR_S = 300  # a reading this close to the wall clock is the clock


def _is_now(value: Any, now: datetime) -> bool:
    """Whether `value` reads the wall clock: a date-time within minutes of `now` (in its own zone; a naive
    one in any zone, whole quarter hours off UTC), or a Unix time in seconds or milliseconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        stamp = now.timestamp()
        return abs(value - stamp) < _NEAR_S or abs(value / 1000 - stamp) < _NEAR_S
    if not (isinstance(value, str) and _DATETIME.fullmatch(value.strip())):
        return False
    try:
        read = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return False
    if read.tzinfo is not None:
        return abs((read - now).total_seconds()) < _NEAR_S
    off = (read - now.replace(tzinfo=None)).total_seconds()
    return abs(off) <= 14.5 * 3600 and min(off % 900, 900 - off % 900) < 120


def scalar_leaves(data: Any, depth: int = 8, per_list: int = 50) -> list[tuple[Path, Any]]:
    """The (path, value) of every scalar of parsed data, `per_list` items a list, `depth` levels deep."""
    found: list[tuple[Path, Any]] = []

    def walk(node: Any, path: Path) -> None:
        if isinstance(node, dict) and len(path) < depth:
            for key, child in node.items():
                walk(child, (*path, key))
        elif isinstance(node, list) and len(path) < depth:
            for i, child in enumerate(node[:per_list]):
                walk(child, (*path, i))
        elif not isinstance(node, (dict, list)):
            found.append((path, node))

    walk(data, ())
    return found


MISSING = object()


def value_at(data: Any, path: list[Any] | Path) -> Any:
    """The value at `path` of parsed data (a list's length for a final COUNT), or MISSING."""
    for i, step in enumerate(path):
        if step == COUNT and i == len(path) - 1:
            return len(data) if isinstance(data, list) else MISSING
        if isinstance(data, dict) and isinstance(step, str) and step in data:
            data = data[step]
        elif isinstance(data, list) and isinstance(step, int) and 0 <= step < len(data):
            data = data[step]
        else:
            return MISSING
    return data


def volatile_paths(first: Any, again: Any | None, now: datetime | None = None,
                   arguments: dict[str, Any] | None = None) -> list[Path]:
    """What of a result is no reference: the paths that differ from the same call made `again` ([()]: all
    of it, also when the repeat failed: None), the values that read the wall clock (`_is_now`: a repeat a
    second later can read the same second), and, when a clock reading is among them, the dates, weekdays
    and months beside it ({"now": "...T18:41:39", "weekday": "Monday"} keeps its weekday over two calls a
    second apart, and a task whose answer is today's weekday is wrong tomorrow). A result dated today that
    no argument dated (a time converted between zones lands on today's date) reads the calendar: its
    weekday and month names are volatile too, its date-times not (their time of day is the answer)."""
    found = changed_paths(first, again) if again is not None else [()]
    now = now or datetime.now(timezone.utc)
    data = structured(first)
    leaves = scalar_leaves(data)
    found += [path for path, value in leaves if _is_now(value, now) and path not in found]
    calendar = [(path, value.strip()) for path, value in leaves
                if isinstance(value, str) and path not in found and _CALENDAR.fullmatch(value.strip())]
    if any(isinstance(v, str) and _CLOCK.search(v) for p in found if p for v in [value_at(data, p)]):
        found += [path for path, _ in calendar]
    elif any(_is_today(value, now) for _, value in leaves) and not any(
            isinstance(v, str) and _DATED_ARGUMENT.search(v) for v in (arguments or {}).values()):
        found += [path for path, text in calendar if not text[:1].isdigit()]  # names, not the dates
    return found


def _is_today(value: Any, now: datetime) -> bool:
    """Whether `value` is a date or date-time on the day of `now` in some zone (a day either side of UTC's)."""
    if not isinstance(value, str):
        return False
    match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})(?:[T ].*)?", value.strip())
    if not match:
        return False
    try:
        day = date(*(int(g) for g in match.groups()))
    except ValueError:
        return False
    return abs((day - now.date()).days) <= 1


def under(path: list[Any] | Path, paths: list[list[Any]] | list[Path] | None) -> bool:
    """Whether `path` is one of `paths` or lies inside one of them."""
    return any(tuple(path[:len(p)]) == tuple(p) for p in paths or [])
