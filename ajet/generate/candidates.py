"""What call-first tasks can be built from a call bank: single calls, and chains of 2-3 calls along
the bank's links (an earlier result fed a later argument), each with one value of the last result.

`candidates` turns the bank of `ajet generate explore` into `Candidate`s; ajet.generate.schedule
picks and orders them and ajet.generate.call_tasks phrases each as a task. A chain's links are the
ones exploration recorded, moved where a user would make them: off a wildcard search (`rebased`),
onto another tool's call that returned the same value (`other_sources`), off one side of a pair
(`unpaired`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ajet.generate import natural, phrasing
from ajet.generate.chain_checks import passed_lines, passes_given, stated_before
from ajet.generate.glosses import cities_for, days_for, noun_gloss, spelled_for
from ajet.generate.record_names import AMBIGUOUS, item_label, key_words, only_record, uncut
from ajet.generate.result_data import COUNT, same_value, structured, under
from ajet.generate.twins import mode_blind, needless_option
from ajet.tool_results import result_error
from ajet.judge.function_call import values_match


@dataclass
class Candidate:
    """Calls in order, and the path of the answer in the last call's result. A refused candidate
    (`refused`: the server's answer to an id it does not know, ajet.generate.explore's `vary`) asks
    what its kept twin asks (`path`, `value` of that call), about the id the server refused."""

    steps: list[dict[str, Any]]
    path: list[Any]
    value: Any
    variant: int = 0  # the same calls phrased again (ajet.generate.schedule): a task of its own
    refused: str | None = None  # the refusal's text (an error, or 'no result'), for a refused candidate
    varied: str | None = None  # the argument a refused candidate varies

    @property
    def key(self) -> str:
        ids = [s["id"] for s in self.steps]
        if self.refused is not None:  # refused ids are numbered per file: the arguments say which call
            ids = [json.dumps([s["tool"], s["arguments"]], sort_keys=True) for s in self.steps]
        return json.dumps([ids, self.path, self.variant] if self.variant else [ids, self.path])

    @property
    def field(self) -> str:
        """What the question asks for: the answer's field, and for a chain whose first result holds
        several values that fit the passed argument (price_a, price_b, cheaper_price), which of them."""
        answer = phrasing.field_name(self.path)
        if len(self.steps) < 2:
            return answer
        link = (self.steps[1].get("inputs_from") or [{}])[0]
        if link and len(_fitting(answer_paths(self.steps[0]), link["argument"])) > 1:
            return f"{answer} of the {phrasing.field_name(link['path'])}"
        return answer

    @property
    def tools(self) -> list[str]:
        return [s["tool"] for s in self.steps]

    def mention(self) -> dict[str, Any]:
        """The values the user gives: the first call's arguments, and later arguments no earlier call returned
        or names (convert_price's from_unit MMBtu is read off get_gas_price's `price_usd_per_mmbtu`: a user
        asks for Seattle's price per GJ, never "from MMBtu")."""
        given: dict[str, Any] = {}
        for i, step in enumerate(self.steps):
            passed = {link["argument"] for link in step.get("inputs_from") or []} if i else set()
            for name, value in step["arguments"].items():
                if name in passed or (i and _read_off(value, self.steps[:i])) or name in (step.get("prompted") or []):
                    continue
                # a later call's argument of the same name is said again ("then to unit GJ"), never dropped
                given[name if name not in given else f"then {name}"] = value
        # which record of a list the question is about: the loan a chain renews, the loan whose fine it
        # asks ("renew Dune", not "renew a loan" when the member has three)
        picks = [(step, (self.steps[i + 1].get("inputs_from") or [{}])[0].get("path"))
                 for i, step in enumerate(self.steps[:-1])] + [(self.steps[-1], self.path)]
        for step, path in picks:
            result = parsed_result(step)
            label = item_label(result, path or [], uncut(step, result))
            if label and label != AMBIGUOUS and not any(values_match(label[1], v) for v in given.values()):
                given[label[0] if label[0] not in given else f"then {label[0]}"] = label[1]
            elif label is None and path is self.path and phrasing.POSITION not in given:
                # a list's only record by its noun: 'the start of the free slot', not a booking's start
                alone = only_record(result, path, list(given.values()))
                if alone:
                    given[phrasing.POSITION] = alone
        # an enum value the asked unit stands for is said as that unit ('in Fahrenheit', not 'in imperial')
        for argument, unit in spelled_for(self.steps[-1], self.path, self.key).items():
            said = next((k for k in reversed(given) if k.removeprefix("then ") == argument), None)
            if said is not None:
                given[said] = unit
        # an enum value its description names in words is said by that name ('the mean daily high' for
        # variable=temperature, "temperature (daily highs)": glosses.noun_gloss), in the gloss of the call
        # that sends it: a plain key is the first such call's argument, 'then X' the last one's
        for key, value in list(given.items()):
            argument = key.removeprefix("then ")
            sending = [s for s in self.steps if argument in s["arguments"]]
            named = sending and noun_gloss(sending[-1] if key != argument else sending[0], argument, value)
            if named:
                given[key] = named
        # a time zone the user gives is said as its city ('Tokyo'; the call sends 'Asia/Tokyo')
        given.update(cities_for(given, self.key))
        given.update(days_for(given, self.key))  # and a date in words ('March 2, 2024' for 2024-03-02)
        return given

    @property
    def final(self) -> Any:
        """The reference answer: the value asked for, or for a refused candidate the id that was refused."""
        return self.steps[0]["arguments"][self.varied] if self.refused is not None else self.value

    def hidden(self) -> list[Any]:
        """Values the user cannot know: the answer, and what a chain passes from one call to the next."""
        if self.refused is not None:
            return []
        values = [self.value]
        for step in self.steps[1:]:
            for link in step.get("inputs_from") or []:
                values.append(step["arguments"].get(link["argument"]))
        return [v for v in values if v is not None]


def parsed_result(step: dict[str, Any]) -> Any:
    """A bank row's result as data (JSON text parsed, labelled lines as records: result_data.structured)."""
    return structured(step.get("result"))


ASKED_RECORDS = 8  # records of one list whose fields a question may ask, spread over the list


def answer_paths(step: dict[str, Any], max_items: int = 3, spread: bool = False) -> list[tuple[list[Any], Any]]:
    """The values of a result a question can ask for: scalar leaves that are not an argument echoed
    back, not an argument's default said back, and not a value that changed when the call was made
    again (`volatile`), numbers first (they are what a judge can check exactly). Each list's first
    `max_items` records, or with `spread` that many spread over the whole list, first and last among
    them (questions asked only of the first three rooms of eight taught no model to find Keel, the
    seventh)."""
    found: list[tuple[list[Any], Any]] = []
    volatile = step.get("volatile")
    defaults = step.get("defaults") or {}

    def walk(node: Any, path: list[Any], depth: int) -> None:
        if isinstance(node, dict) and depth < 4:
            for key, child in node.items():
                walk(child, [*path, key], depth + 1)
        elif isinstance(node, list) and depth < 4:
            if path and isinstance(path[-1], str) and not under(path, volatile):
                found.append(([*path, COUNT], len(node)))  # "How many bookings ...": the list's length
            for i in _record_places(len(node), max_items, spread):
                walk(node[i], [*path, i], depth + 1)
        elif isinstance(node, (int, float, str)) and not isinstance(node, bool):
            if isinstance(node, str) and not (0 < len(node.strip()) <= 60):
                return
            if any(values_match(node, arg) for arg in step["arguments"].values()):
                return  # the call's own input: asking for it is no question
            if under(path, volatile):
                return  # it changes between identical calls: no reference answer
            if any(same_value(node, default) and (isinstance(node, str) or (path and key_words(name) & key_words(path[-1])))
                   for name, default in defaults.items()):
                return  # an argument's default said back ('units': 'metric'): the user never asked for it
            found.append((path, node))

    walk(parsed_result(step), [], 0)
    return sorted(found, key=lambda pv: isinstance(pv[1], str))


def _record_places(length: int, most: int, spread: bool) -> list[int]:
    """The places of a list's records to walk: the first `most`, or `most` spread evenly over it."""
    if not spread or length <= most:
        return list(range(min(length, most)))
    return sorted({round(k * (length - 1) / (most - 1)) for k in range(most)})


def _read_off(value: Any, earlier: list[dict[str, Any]]) -> bool:
    """Whether a text argument can be read off earlier calls: a key of the result names it (mmbtu in
    price_usd_per_mmbtu), a value is it ("unit": "MMBtu"), or the tool's description says it
    ("difference in USD per MMBtu")."""
    if not isinstance(value, str) or len(value.strip()) < 2:
        return False
    word = value.strip().casefold()

    def holds(node: Any) -> bool:
        if isinstance(node, dict):
            return any(word in key_words(key) or holds(child) for key, child in node.items())
        if isinstance(node, list):
            return any(holds(child) for child in node)
        return isinstance(node, str) and node.strip().casefold() == word

    return any(holds(parsed_result(step)) or word in key_words(step.get("description") or "") for step in earlier)


def _is_wildcard(row: dict[str, Any]) -> bool:
    return any(origin == "wildcard" for origin in (row.get("origin") or {}).values())


def _sources_of(row: dict[str, Any], link: dict[str, Any], bank: list[dict[str, Any]],
                leaves: dict[str, list[tuple[list[Any], Any]]], skip_tools: set[str]) -> list[tuple[dict[str, Any], list[Any]]]:
    """The calls (not of `skip_tools`, not wildcard searches) whose result holds the value `row` was passed
    under a key naming the argument, each with its most descriptive such key (cheaper_price over price_a)."""
    value = row["arguments"].get(link["argument"])
    found = []
    for other in bank:
        if other["tool"] in skip_tools or _is_wildcard(other):
            continue
        paths = [path for path, leaf in _fitting(leaves[other["id"]], link["argument"]) if values_match(leaf, value)]
        if paths:
            found.append((other, max(paths, key=lambda p: len(key_words(p[-1])))))
    return found


def rebased(bank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bank with each call fed by a wildcard search (find_member("a"), made to discover ids) fed
    instead by a real call that returned the same value (find_member("Ana Ruiz")): exploration records
    the first call a value came from, and no task is written through a wildcard, so without this the
    ids it discovered would start no chain at all."""
    by_id = {row["id"]: row for row in bank}
    leaves = {row["id"]: answer_paths(row) for row in bank}
    out = []
    for row in bank:
        links = row.get("inputs_from") or []
        parent = by_id.get(links[0]["call"]) if len(links) == 1 else None
        if parent is not None and _is_wildcard(parent):
            sources = _sources_of(row, links[0], bank, leaves, {row["tool"]})
            # the wildcard's own tool first: find_member("Ana Ruiz") is the search the user would make
            sources.sort(key=lambda found: found[0]["tool"] != parent["tool"])
            if sources:
                other, path = sources[0]
                row = {**row, "inputs_from": [{"argument": links[0]["argument"], "call": other["id"], "path": path}]}
        out.append(row)
    return out


_WHOLE_LIST = 1000  # records of a list `plainest` searches: all of any list a tool returns in one call


def _optional_count(step: dict[str, Any]) -> int:
    return sum(1 for name in step.get("optional") or [] if name in step["arguments"])


def plainest(bank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bank with each call fed by a call that set optional arguments fed instead by a call of the
    same tool that set fewer and returned the same value under the same key: exploration records the
    first call a value came from (list_rooms(min_capacity=1, has_video=false)), a user lists the rooms
    plainly (list_rooms()), and a chain through an argument sent at its default is no task at all. The
    plainer call is searched through every record of its lists (the room may stand tenth in list_rooms()),
    each walked when first searched. A call whose options narrowed its list to the one record passed on
    keeps its link: the question names that record by them ("the video room on floor 3", "the commit
    made between March 30 and April 5"), as users do."""
    leaves: dict[str, list[tuple[list[Any], Any]]] = {}
    by_id = {row["id"]: row for row in bank}
    out = []
    for row in bank:
        links = row.get("inputs_from") or []
        parent = by_id.get(links[0]["call"]) if len(links) == 1 else None
        if parent is not None and _optional_count(parent) and not _one_record(parsed_result(parent), links[0]["path"]):
            value = row["arguments"].get(links[0]["argument"])
            plainer = sorted((o for o in bank if o["tool"] == parent["tool"] and not _odd_options(o)
                              and _optional_count(o) < _optional_count(parent)), key=_optional_count)
            for other in plainer:
                if other["id"] not in leaves:
                    leaves[other["id"]] = answer_paths(other, max_items=_WHOLE_LIST)
                paths = [p for p, leaf in leaves[other["id"]] if values_match(leaf, value) and p[-1:] == links[0]["path"][-1:]]
                if paths:
                    row = {**row, "inputs_from": [{**links[0], "call": other["id"], "path": paths[0]}]}
                    break
        out.append(row)
    return out


def _one_record(result: Any, path: list[Any]) -> bool:
    """Whether `path` runs through a list that holds one record only."""
    node = result
    for step in path:
        if isinstance(node, list) and isinstance(step, int):
            if len(node) == 1:
                return True
            node = node[step] if 0 <= step < len(node) else None
        elif isinstance(node, dict) and step in node:
            node = node[step]
        else:
            return False
    return False


def other_sources(bank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the calls fed by one earlier result, fed instead by another tool's call that returned the
    same value under a key naming the argument: exploration records the first call a value came from
    (get_gas_price's price of Atlanta), while compare_prices' `cheaper_price` holds it too, so
    "convert the cheaper of Atlanta and Chicago to therm" is a chain as real as "convert Atlanta's"."""
    extra: list[dict[str, Any]] = []
    by_id = {row["id"]: row for row in bank}
    leaves = {row["id"]: answer_paths(row) for row in bank}  # each result walked once, not once per row
    for row in bank:
        links = row.get("inputs_from") or []
        if len(links) != 1 or links[0]["call"] not in by_id:
            continue
        parent = by_id[links[0]["call"]]
        for other, path in _sources_of(row, links[0], bank, leaves, {row["tool"], parent["tool"]}):
            extra.append({**row, "id": f"{row['id']}~{other['id']}",
                          "inputs_from": [{"argument": links[0]["argument"], "call": other["id"], "path": path}]})
    return extra


def unpaired(bank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bank with no call fed by one side of a pair: a comparison of city_a and city_b returns price_a,
    and "compare Boston and Dallas, then convert Boston's price" is no question a user asks (Boston's
    price alone is). Such a link moves to another key of the same result holding the same value
    (`cheaper_price`, when Boston is the cheaper), else the call starts no chain (its link is cut)."""
    by_id = {row["id"]: row for row in bank}
    out = []
    for row in bank:
        links = row.get("inputs_from") or []
        source = by_id.get(links[0]["call"]) if len(links) == 1 else None
        key = links[0]["path"][-1] if source is not None and links[0]["path"] else None
        side = re.fullmatch(r"(.+?)_?([ab12])", key) if isinstance(key, str) else None
        if side and natural.pair_of(source["arguments"]) and any(
                name.endswith(side.group(2)) for name in source["arguments"]):
            value = row["arguments"].get(links[0]["argument"])
            others = [path for path, leaf in _fitting(answer_paths(source), links[0]["argument"])
                      if values_match(leaf, value) and path[-1] != key
                      and not re.fullmatch(r".+?_?[ab12]", str(path[-1]))]
            if "~" in row["id"] and not others:
                continue  # a copy made only for this link: nothing left of it
            row = {**row, "inputs_from": [{**links[0], "path": others[0]}] if others else []}
        out.append(row)
    return out


MAX_OPTIONAL = 2  # optional arguments one gold call may set: users leave most of them out


def _odd_options(step: dict[str, Any]) -> bool:
    """Whether a call sets an optional argument to its default (no user asks for the default: the
    reference would carry an argument the question never gave) or sets more than MAX_OPTIONAL of them."""
    optional = [name for name in step.get("optional") or [] if name in step["arguments"]]
    defaults = step.get("defaults") or {}
    return len(optional) > MAX_OPTIONAL or any(
        name in defaults and same_value(step["arguments"][name], defaults[name]) for name in optional)


def _fitting(leaves: list[tuple[list[Any], Any]], argument: str) -> list[tuple[list[Any], Any]]:
    """The (path, value) leaves of a result whose key shares a word with `argument`."""
    return [(path, v) for path, v in leaves if path and isinstance(path[-1], str) and key_words(argument) & key_words(path[-1])]


def candidates(bank: list[dict[str, Any]], max_chain: int = 3) -> list[Candidate]:
    """Every (calls, answer path) a task can be built from: single calls and chains along inputs_from
    (the recorded source of a passed value, or another tool's call that returned it: `other_sources`).
    A chain uses each tool once, and its answer must be new: a value the user gave or an earlier call
    already returned makes the last call needless ("the member id of M-1648's loans")."""
    bank = plainest(rebased(bank))
    bank = unpaired([*bank, *other_sources(bank)])
    by_id = {row["id"]: row for row in bank}
    chains: list[list[dict[str, Any]]] = [[row] for row in bank if "~" not in row["id"]]
    for row in bank:
        links = row.get("inputs_from") or []
        parents = {link["call"] for link in links}
        if len(parents) != 1 or next(iter(parents)) not in by_id:
            continue  # fed by two calls (or a call missing from the bank): not a simple chain
        chain = [by_id[next(iter(parents))], row]
        if chain[0]["tool"] == row["tool"]:
            continue  # a tool fed its own output (convert, then convert again) is no question a user asks
        while len(chain) < max_chain:
            above = {link["call"] for link in chain[0].get("inputs_from") or []}
            if len(above) != 1 or next(iter(above)) not in by_id:
                break
            if by_id[next(iter(above))]["tool"] in {step["tool"] for step in chain}:
                break
            chains.append(list(chain))
            chain.insert(0, by_id[next(iter(above))])
        chains.append(chain)
    leaves_of: dict[str, list[tuple[list[Any], Any]]] = {}

    def whole_leaves(step: dict[str, Any]) -> list[tuple[list[Any], Any]]:
        if step["id"] not in leaves_of:  # a list feeds many chains: walked once
            leaves_of[step["id"]] = answer_paths(step, max_items=_WHOLE_LIST)
        return leaves_of[step["id"]]

    by_tool: dict[str, list[dict[str, Any]]] = {}
    for row in bank:
        by_tool.setdefault(row["tool"], []).append(row)
    blind = {tool: mode_blind(rows) for tool, rows in by_tool.items()}
    found = []
    for chain in chains:
        if any(_is_wildcard(step) for step in chain):
            continue  # a one-letter search made to discover ids: no question a user asks
        if any(_odd_options(step) for step in chain):
            continue  # an optional argument sent at its default, or more than MAX_OPTIONAL of them
        if any(passes_given(chain, i) for i in range(1, len(chain))):
            continue  # a link passes what the user gave (an id echoed back): the first call is needless
        if any(item_label(parsed_result(step), (chain[i + 1].get("inputs_from") or [{}])[0].get("path") or [],
                          uncut(step, parsed_result(step))) == AMBIGUOUS for i, step in enumerate(chain[:-1])):
            continue  # it passes one record of several that nothing names: "her order's status" when she has two
        # an id the user gave, or the same field an earlier call returned; a number equal to another
        # field's (holds 0, days overdue 0) is a coincidence, not a needless call
        given = [v for v in chain[0]["arguments"].values() if isinstance(v, str)]
        returned = [(path[-1] if path else None, leaf) for step in chain[:-1] for path, leaf in whole_leaves(step)]
        last = parsed_result(chain[-1])
        whole = uncut(chain[-1], last)
        named_lines = passed_lines(chain) if len(chain) > 1 else []
        for path, value in answer_paths(chain[-1], max_items=ASKED_RECORDS, spread=True):
            label = item_label(last, path, whole)
            if label == AMBIGUOUS:
                continue  # a value of one record of several that nothing names: no question can say which
            if len(chain) > 1 and (any(values_match(value, v) for v in given)
                                   or any(key == (path[-1] if path else None) and values_match(value, v) for key, v in returned)
                                   or stated_before(named_lines, value)):
                continue
            by_place = label is not None and label[0] == phrasing.POSITION
            if needless_option(chain[-1], last, path, value, by_place, by_tool[chain[-1]["tool"]]):
                continue  # asked with an option its answer does not depend on
            if any((name, tuple(path)) in blind[chain[-1]["tool"]] for name in chain[-1]["arguments"]):
                continue  # the call sends a mode its answer does not depend on: the question cannot say which
            found.append(Candidate(chain, path, value))
    return found


def refusals(bank: list[dict[str, Any]], refused_rows: list[dict[str, Any]]) -> list[Candidate]:
    """Candidates from the calls `ajet generate explore` varied and the server refused (its dropped file's
    `refused_variant` rows): each asks what the first single-call question of the kept call it varies
    asks, about the refused id; the answer reports the refusal (the text the agent saw)."""
    by_id = {row["id"]: row for row in bank}
    out = []
    for i, row in enumerate(refused_rows):
        base = by_id.get(row.get("variant_of"))
        if base is None:
            continue
        varied = next((k for k, v in row["arguments"].items() if base["arguments"].get(k) != v), None)
        paths = answer_paths(base)
        if varied is None or not paths:
            continue
        path, value = paths[0]
        step = {**row, "id": f"r{i:04d}", "result": None, "inputs_from": [], "origin": {},
                "description": base.get("description"), "defaults": base.get("defaults") or {}}
        text = result_error(row.get("content")) or row.get("error") or "no result"
        out.append(Candidate([step], path, value, refused="no result" if text == "says nothing" else str(text),
                             varied=varied))
    return out
