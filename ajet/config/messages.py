"""How a bad config is told: pydantic's validation errors as one line per bad key (its path, value,
the layer it came from, what was expected), and unknown keys with a did-you-mean. Used by the loader."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from ajet.config import walk


def unknown_key_text(key: str, names: list[str]) -> str:
    """What to say of a key a level does not have: the closest name, or every name there is."""
    close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    if not names:
        return "unknown key; this value takes no keys"
    return f"unknown key; valid keys here: {', '.join(names)}"


def format_validation_error(exc: ValidationError, data: dict[str, Any], source_of: Callable[[tuple], str]) -> str:
    """One line per bad key: path, value, source, expectation (union alternatives joined)."""
    found: dict[tuple, dict[str, Any]] = {}
    for err in exc.errors():
        path, has_tag = _real_path(err["loc"], data, missing=err["type"] == "missing")
        entry = found.setdefault(path, {"type": err["type"], "input": err.get("input"), "msgs": [], "tag": has_tag})
        if err["type"] == "extra_forbidden":
            parent = walk.model_at(path[:-1])
            names = sorted(parent.model_fields) if parent is not None else []
            entry["msgs"].append(unknown_key_text(str(path[-1]), names))
        elif err["type"] == "missing":
            entry["msgs"].append("required but not set; add it to the YAML or pass "
                                 f"{'.'.join(map(str, path[1:]))}=... on the command line")
        else:
            msg = err["msg"]
            msg = msg.replace("Value error, ", "", 1)
            msg = "expected " + msg[len("Input should be "):] if msg.startswith("Input should be ") else msg
            if msg not in entry["msgs"]:
                entry["msgs"].append(msg)
    # A union reports one error per alternative; when one alternative got deeper into the value
    # (an item of a list), the shallow "not a list" complaints of the others are noise.
    for path in [p for p, e in found.items() if e["tag"]]:
        if any(q[: len(path)] == path and q != path for q in found):
            del found[path]
    lines = [_error_line(path, entry, source_of) for path, entry in found.items()]
    if len(lines) == 1:
        return f"invalid config: {lines[0]}"
    return f"invalid config ({len(lines)} errors):\n" + "\n".join(f"  - {line}" for line in lines)


def _error_line(path: tuple, entry: dict[str, Any], source_of: Callable[[tuple], str]) -> str:
    dotted = ".".join(str(p) for p in path)
    first, *rest = entry["msgs"]
    expectation = "; or ".join([first] + [m.removeprefix("expected ") for m in rest])
    if entry["type"] == "missing":
        return f"{dotted}: {expectation}"
    value = entry["input"]
    if isinstance(value, dict) and entry["type"] not in ("extra_forbidden",):
        return f"{dotted}: {expectation}"  # a rule over a whole section: its fields are named in the text
    return f"{dotted} = {short_repr(value)} (from {source_of(path)}): {expectation}"


def _real_path(loc: tuple, data: Any, missing: bool) -> tuple[tuple, bool]:
    """The key path of an error inside `data`, dropping pydantic's union tags (e.g. 'list[str]')."""
    path: list = []
    node, has_tag = data, False
    for i, segment in enumerate(loc):
        if isinstance(node, dict) and segment in node:
            node = node[segment]
            path.append(segment)
        elif isinstance(node, list) and isinstance(segment, int) and 0 <= segment < len(node):
            node = node[segment]
            path.append(segment)
        elif missing and i == len(loc) - 1:
            path.append(segment)
        else:
            has_tag = True  # a union alternative's name, not a key
    return tuple(path), has_tag


def short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(exc: BaseException | str) -> str:
    return " ".join(str(exc).split())
