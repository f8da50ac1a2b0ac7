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

Pure functions of the standard library's types.
"""

from __future__ import annotations

import json
import re
from typing import Any

Path = tuple[Any, ...]

_LABELLED = re.compile(r"^\s*[-*•]?\s*([A-Za-z][A-Za-z0-9 _/().-]{0,40}?)\s*:\s+(\S.{0,300}?)\s*$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_NOTHING = re.compile(r"\b(?:no|not|none|nothing|zero)\b[^.\n]{0,40}?\b(?:found|results?|match(?:es|ing)?|exists?|"
                      r"available|records?|data|entries|items)\b|^\s*(?:none|null|n/?a|\[\]|\{\})\s*\.?\s*$",
                      re.IGNORECASE)
MAX_LINES = 400  # lines of a text result read as labelled lines


def _scalar(text: str) -> Any:
    text = text.strip().strip("'\"`").strip()
    if _NUMBER.fullmatch(text):
        return int(text) if re.fullmatch(r"-?\d+", text) and len(text) < 16 else float(text)
    return text


def structured(result: Any) -> Any:
    """`result` as data: dicts and lists as they are, JSON text parsed, labelled lines as records; any
    other text stays text."""
    if not isinstance(result, str):
        return result
    text = result.strip()
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass
    records: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in text.splitlines()[:MAX_LINES]:
        found = _LABELLED.match(line)
        if not found or "//" in found.group(2)[:2]:  # 'https://...' is no label
            continue
        label = found.group(1).strip()
        if label in current:  # a label seen again starts the next record (a log of commits, a list of rows)
            records.append(current)
            current = {}
        current[label] = _scalar(found.group(2))
    if current:
        records.append(current)
    if sum(len(r) for r in records) < 2:
        return result
    return records[0] if len(records) == 1 else records


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
        return not text or (len(text) <= 120 and bool(_NOTHING.search(text)))
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


def under(path: list[Any] | Path, paths: list[list[Any]] | list[Path] | None) -> bool:
    """Whether `path` is one of `paths` or lies inside one of them."""
    return any(tuple(path[:len(p)]) == tuple(p) for p in paths or [])
