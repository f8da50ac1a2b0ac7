"""Whether a chain's later calls are needed, so that a chain is built only where a user would make one:
a value passes on that the user could not have given (`passes_given` says when it could), and the
answer is not already stated on the line of text that named the passed id (`stated_before`)."""

from __future__ import annotations

import json
import re
from typing import Any

from ajet.generate.result_data import same_value, under


def passes_given(chain: list[dict[str, Any]], i: int) -> bool:
    """Whether step `i` of a chain is passed a value that an earlier step was given, or one that changed
    between identical calls: a chain only where a value passes that the user could not have given."""
    given = [v for step in chain[:i] for v in step["arguments"].values() if not isinstance(v, (dict, list))]
    for link in chain[i].get("inputs_from") or []:
        passed = chain[i]["arguments"].get(link["argument"])
        source = next((step for step in chain[:i] if step["id"].split("~")[0] == link["call"]), None)
        if any(same_value(passed, v) for v in given) or (source is not None and under(link["path"], source.get("volatile"))):
            return True
    return False


_SMALL = 10  # an integer below this in a line of text beside the passed id is as likely a coincidence
_ROW_OR_LINE = re.compile(r"\n|(?=<tr[\s>])", re.IGNORECASE)  # an HTML table often comes on one line
_NUMBER_TOKEN = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?!\w|\.\d)")  # '15.3' in '15.3 km.', not 133 in 'tr-133'


def passed_lines(chain: list[dict[str, Any]]) -> list[str]:
    """The lines (or HTML table rows) of the chain's earlier plain-text results that name a value passed
    on: "**Mailbox Peak** [tr-133]: 15.3 km round trip" when trail_report(tr-133) follows. JSON results
    are compared by key instead (their records hold every field; text lines read as records keep their
    names and ids only)."""
    lines = []
    for i, step in enumerate(chain[:-1]):
        if not isinstance(step.get("result"), str) or _is_json(step["result"]):
            continue
        passed = [str(chain[i + 1]["arguments"].get(link["argument"])) for link in chain[i + 1].get("inputs_from") or []]
        lines += [line for line in _ROW_OR_LINE.split(step["result"]) if any(p and p in line for p in passed)]
    return lines


def stated_before(lines: list[str], value: Any) -> bool:
    """Whether one of the lines that name what a chain passes on (`passed_lines`) already states
    `value`: the trail's length on the search's line makes a trail_report after it needless. A small
    integer or a short text there is no evidence."""
    if isinstance(value, bool) or value is None or (isinstance(value, int) and abs(value) < _SMALL) \
            or (isinstance(value, str) and len(value.strip()) < 3):
        return False
    return any(_states(line, value) for line in lines)


def _states(line: str, value: Any) -> bool:
    if isinstance(value, (int, float)):
        return any(float(token) == float(value) for token in _NUMBER_TOKEN.findall(line))
    return str(value).strip().casefold() in line.casefold()


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
