"""Twins: calls of one tool that differ in one argument, the others alike. What they return says
whether an argument changes an answer, and a question must not name an argument that does not: the
model it trains learns to send what no user's words call for, or cannot tell which value to send.

`needless_option` judges one call's optional argument by its twins; `mode_blind` judges a tool's
enum and boolean arguments (modes) over all of them, for what the tool returns of one record.
"""

from __future__ import annotations

from typing import Any

from ajet.generate.record_names import naming_keys
from ajet.generate.result_data import COUNT, MISSING, same_value, structured, value_at
from ajet.judge.function_call import values_match


def needless_option(step: dict[str, Any], result: Any, path: list[Any], value: Any, by_place: bool,
                    same_tool: list[dict[str, Any]]) -> bool:
    """Whether the call sets an optional argument that the answer does not depend on: a call of the same tool
    with that argument left out or set otherwise, the others alike, returned the same value for the same
    record (`twin_path`: the day's high 'including hourly', Harbor View's capacity 'with floor 2'). Asked
    with it, the question teaches a model to send options the user's words never call for. `result` is the
    step's parsed result; `by_place`: the question names the record by its place ('the latest commit' of a
    span of days), so the twin's record is the one at that place."""
    sent = _sent(step)
    for name in (n for n in step.get("optional") or [] if n in step["arguments"]):
        rest = {k: v for k, v in sent.items() if k != name}
        for twin in same_tool:
            other = _sent(twin)
            if twin is step or not values_match({k: v for k, v in other.items() if k != name}, rest, 1e-9) \
                    or same_value(other.get(name), step["arguments"][name]):
                continue
            twin_result = structured(twin.get("result"))
            where = path if by_place else twin_path(result, path, twin_result)
            found = MISSING if where is None else value_at(twin_result, where)
            if found is not MISSING and same_value(found, value):
                return True
    return False


def _sent(row: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments with its tool's defaults filled in: an option left out is its default, so
    units=metric sent and units left out are one call."""
    return {**(row.get("defaults") or {}), **row["arguments"]}


def twin_path(result: Any, path: list[Any], twin: Any) -> list[Any] | None:
    """The path in `twin` (another call's result of the same tool) to what `path` reaches in `result`, each
    list record found again as the record equal to it (list_rooms() holds Harbor View at another place
    than list_rooms(floor=2)). None where the twin lacks the record, or where `result`'s list holds that
    one record and the twin's holds several: the option narrowed the list to it, so the question names the
    record by that option ('the room on floor 3 with video') and needs it."""
    found: list[Any] = []
    node, other = result, twin
    for step in path:
        if isinstance(node, list) and isinstance(step, int):
            if not isinstance(other, list) or not 0 <= step < len(node) or (len(node) == 1 < len(other)):
                return None
            place = step if step < len(other) and same_record(node[step], other[step]) else next(
                (i for i, record in enumerate(other) if same_record(node[step], record)), None)
            if place is None:
                return None
            node, other = node[step], other[place]
            found.append(place)
        elif isinstance(node, dict) and step in node:
            node, other = node[step], other.get(step, MISSING) if isinstance(other, dict) else MISSING
            found.append(step)
        else:
            found.append(step)  # a final COUNT: the twin's list length
    return found


def same_record(record: Any, other: Any) -> bool:
    """Whether two list records are one: the same name and id (`naming_keys`), or for a record that has
    none, the same texts and numbers under every key."""
    if not isinstance(record, dict) or not isinstance(other, dict):
        return same_value(record, other)
    keys = [k for k in naming_keys(record) if k in other] or [
        k for k, v in record.items() if isinstance(v, (str, int, float)) and k in other]
    return bool(keys) and all(same_value(record[k], other[k]) for k in keys)


def mode_blind(same_tool: list[dict[str, Any]]) -> set[tuple[str, tuple[Any, ...]]]:
    """The (argument, path) pairs of a tool whose answer its mode argument (an enum or a boolean, the
    bank row's `modes`: it picks what the tool computes of a record, not which record) leaves alone:
    twins of one record (`same_record`) that differ in that argument alone agree on the value, and no
    twins that differ in it alone, of any record, disagree. monthly_stats(variable=wind) and
    (variable=precipitation) of one station and month return the same `rainy_days`: "how many rainy
    days" names no variable, so a reference call that sends one is a value the question could not have
    given. A zero, an empty text or a false agreeing is no evidence (two months' driest day are both
    0.0 mm), only disagreeing is."""
    agree: set[tuple[str, tuple[Any, ...]]] = set()
    differ: set[tuple[str, tuple[Any, ...]]] = set()
    rows = [(_sent(row), structured(row.get("result")), row) for row in same_tool]
    for i, (sent, result, row) in enumerate(rows):
        if not isinstance(result, dict):
            continue
        for other_sent, other, _ in rows[i + 1:]:
            changed = [k for k in sent.keys() | other_sent.keys()
                       if not same_value(sent.get(k, MISSING), other_sent.get(k, MISSING))]
            if len(changed) != 1 or changed[0] not in (row.get("modes") or []) or not isinstance(other, dict):
                continue
            echoed = [*sent.values(), *other_sent.values()]  # an argument said back is asked of no call
            pairs = [(path, value, value_at(other, path)) for path, value in _scalar_leaves(result)
                     if path[-1] == COUNT or not any(same_value(value, v) for v in echoed)]
            pairs = [(path, value, found) for path, value, found in pairs if found is not MISSING]
            one = _one_record(result, other, pairs)
            for path, value, found in pairs:
                key = (changed[0], tuple(path))
                if not same_value(found, value):
                    differ.add(key)  # of any record: a filter that cut floor 3's rooms from 3 to 2 counts
                elif one and value not in (0, "") and value is not False:
                    agree.add(key)
    return agree - differ


def _one_record(result: dict[str, Any], other: dict[str, Any], pairs: list[tuple[list[Any], Any, Any]]) -> bool:
    """Whether two twins' results are of one record: the same name and id where the result has them
    (`same_record`), else more of their values (echoes left out) agree than differ. An enum
    that picks the record (a country's code) changes its name, or most of what it returns."""
    if naming_keys(result):
        return same_record(result, other)
    # a list agrees when its records do, not its length: open and closed tickets, three of each, are two lists
    agreeing = sum(1 for path, value, found in pairs if (
        value_at(result, path[:-1]) == value_at(other, path[:-1]) if path[-1] == COUNT else same_value(value, found)))
    return agreeing > len(pairs) - agreeing


def _scalar_leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[list[Any], Any]]:
    """The scalar values of a result's nested dicts and the lengths of its lists ("how many hourly
    readings"), with their paths; a list's records are not walked (which record is which is no mode's)."""
    if isinstance(node, dict):
        return [leaf for key, child in node.items() for leaf in _scalar_leaves(child, (*path, key))]
    if isinstance(node, list):
        return [([*path, COUNT], len(node))] if path else []
    return [(list(path), node)] if isinstance(node, (int, float, str)) and path else []
