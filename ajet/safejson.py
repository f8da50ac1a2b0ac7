"""JSON that comes from outside (HTTP bodies, task files): parsed with a nesting limit and checked for
text that is not valid Unicode.

Python's `json.loads` recurses once per nesting level, so `[[[[...]]]]` a few thousand deep raises
`RecursionError` (in the parser, or later in whatever walks the value: pydantic, Jinja, `json.dumps`).
JSON also allows `"\\ud800"`, a lone UTF-16 surrogate, which parses into a Python `str` that cannot be
encoded as UTF-8: the tokenizer, or the `episodes.jsonl` writer, fails on it much later. Both are
refused here, at the door, with the place they were found.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64  # OpenAI requests and task rows nest a handful of levels; tool schemas maybe a dozen

_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins valid pairs, so any left is unpaired
# Text that could parse into a surrogate: a \\uD800-\\uDFFF escape, or one as raw (surrogatepass) UTF-8
# bytes. A body without any (nearly all of them) has no string worth searching, only its depth to check.
_MAYBE_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_MAYBE_SURROGATE_TEXT = re.compile("\\\\u[dD][89a-fA-F]|[\ud800-\udfff]")


class JSONProblem(ValueError):
    """A JSON text or value that ajet does not accept; the message says what and where."""


def loads(data: str | bytes, *, max_depth: int = MAX_DEPTH, strict: bool = True) -> Any:
    """`json.loads` that raises `JSONProblem` for invalid JSON, nesting deeper than `max_depth` and
    unpaired surrogates. strict: refuse NaN / Infinity, which are not JSON (Python writes them)."""
    try:
        if strict:
            value = json.loads(data, parse_constant=_refuse_constant)
        else:
            value = json.loads(data)
    except RecursionError:
        raise JSONProblem(f"JSON nested deeper than {max_depth} levels") from None
    except JSONProblem:
        raise
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, int too long
        raise JSONProblem(f"not valid JSON: {exc}") from None
    pattern = _MAYBE_SURROGATE_BYTES if isinstance(data, (bytes, bytearray)) else _MAYBE_SURROGATE_TEXT
    problem = find_problem(value, max_depth=max_depth, strings=pattern.search(data) is not None)
    if problem is not None:
        raise JSONProblem(problem)
    return value


def find_problem(value: Any, *, max_depth: int = MAX_DEPTH, root: str = "", strings: bool = True) -> str | None:
    """The first problem of a parsed value (too deep, or a string or key with an unpaired surrogate),
    naming its path like `messages.0.content`; None when there is none. Iterative: never recurses.
    strings=False: only the depth is checked (the caller knows no string can hold a surrogate)."""
    stack: list[tuple[Any, int, tuple | None]] = [(value, 1, None)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            if not strings:
                continue
            found = _SURROGATE.search(item)
            if found:
                return (f"{_where(path, root)} holds an unpaired surrogate {ascii(found.group())} at character "
                        f"{found.start()}, which is not valid Unicode")
        elif isinstance(item, (dict, list)):
            if depth > max_depth:
                return f"{root or 'the JSON value'} is nested deeper than {max_depth} levels"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if strings and isinstance(key, str) and _SURROGATE.search(key):
                    return f"a key in {_where(path, root)} holds an unpaired surrogate, which is not valid Unicode"
                if isinstance(child, (dict, list)) or (strings and isinstance(child, str)):  # numbers, null: no check
                    stack.append((child, depth + 1, (path, key)))
    return None


def _where(path: tuple | None, root: str) -> str:
    """A linked path (parent, key) as `a.b.0`; the root itself as `root` or 'the value'."""
    keys: list[str] = []
    while path is not None:
        path, key = path
        keys.append(str(key))
    dotted = ".".join(reversed(keys))
    if root:
        return f"{root}.{dotted}" if dotted else root
    return dotted or "the value"


def _refuse_constant(name: str) -> Any:
    raise JSONProblem(f"not valid JSON: {name} is not a JSON number")
