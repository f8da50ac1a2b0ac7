"""`ajet generate explore`: a bank of tool calls that really work, found by calling the server.

For every tool, argument values come from the schema, the descriptions, the server's error messages
and the results of earlier calls (`ajet.generate.explore_values` lists the sources, most trusted
first). First each free-text argument is probed once with a value no server knows, so that errors
like "unknown city 'zz'; known citys: Houston, Dallas, ..." give the valid values. Then, in
`generate.explore.rounds` passes over the tools, combinations of candidate values are sampled (every
value tried at least once, the rest at random with `seed`; the same call never runs twice) and run
with `ajet.mcp_client.call_tool`, so `content` is exactly what the agent would see. A call
is kept only when it returned a real result (not an MCP error, a timeout, `{"error": ...}`,
"Error: ..." or nothing: `ajet.tool_results`); the values a kept result holds feed the arguments of
other tools in the next calls (list_customers -> get_orders(customer_id) -> get_order(order_id)).

Kept calls go to `--out`, one per line (`docs/mcp_pipeline.md`, "Explore the server"):

    {"id": "c0007", "tool", "arguments", "content", "result", "origin": {arg: source},
     "inputs_from": [{"argument", "call", "path"}], "truncated": true (only when the content was cut),
     "not_shown": N (only when N content blocks are placeholders: an image, audio, a binary file)}

failed ones to `<out>.dropped.jsonl` with {"tool", "arguments", "reason", "error"}. An existing
`--out` is resumed: its calls and the dropped ones are not run again, and their results and errors
feed the values as if they had just run.
"""

from __future__ import annotations

import logging
import math
import random
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from ajet.config.schema import AjetConfig
from ajet.errors import GenerateError
from ajet.generate.explore_values import (ORIGINS, ArgSpec, Value, arg_specs, feeds, generic_values, item_spec,
                                          leaves, probe_value, schema_values, shared_paths, significant, tokens,
                                          value_key)
from ajet.jsonl import JsonlAppender, dropped_path
from ajet.generate.result_data import changed_paths, same_value, says_nothing, structured, under, volatile_paths
from ajet.generate.server import server_of
from ajet.generate.explore_variants import VariedCalls
from ajet.generate.phrasing import time_bound
from ajet.generate.text_values import ISO_DAY, day_of, description_values, fits_format, hint_values, hinted_arguments
from ajet.tool_results import DEFAULT_MAX_RESULT_CHARS

console = Console()

_OMIT = Value(None, "omitted")  # an optional argument left out of a call
_RANK = {origin: i for i, origin in enumerate(ORIGINS)}
_LOOSE_MAX = 40  # string values kept for free-text arguments that accept anything
_MAX_TIMEOUTS = 2  # a tool that timed out this often is not called again: 400 calls x 30 s would be hours
_READINGS = 3  # readings of a kept call before its result counts as stable
_SAYS_NOTHING = "says nothing"  # the drop's error text for a result that tells nothing (result_data.says_nothing)


@dataclass
class ExploreReport:
    """What `ajet generate explore` did: calls kept, run, rechecked (each kept call is made twice) and
    found to change between the two (`volatile`), dropped by reason, kept per tool, the tools left
    without a working call (with why), and those never called because the budget ran out first."""

    tools: int = 0
    kept: int = 0
    resumed: int = 0
    calls: int = 0
    rechecks: int = 0
    volatile: int = 0
    wall_s: float = 0.0
    dropped: Counter = field(default_factory=Counter)
    per_tool: Counter = field(default_factory=Counter)
    no_working_call: dict[str, str] = field(default_factory=dict)
    not_tried: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"tools": self.tools, "kept": self.kept, "resumed": self.resumed, "calls": self.calls,
                "rechecks": self.rechecks, "volatile": self.volatile, "wall_s": round(self.wall_s, 2),
                "dropped": dict(self.dropped), "per_tool": dict(self.per_tool),
                "no_working_call": dict(self.no_working_call), "not_tried": list(self.not_tried)}


@dataclass
class _Tool:
    name: str
    description: str
    specs: list[ArgSpec]

    @property
    def words(self) -> set[str]:
        return significant(tokens(f"{self.name} {self.description[:1000]}"))


def error_pattern(error: str) -> str:
    """An error message with its quoted values and numbers blanked, so equal errors count together."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"|-?\d+(?:\.\d+)?", "…", " ".join(str(error).split()))
    return text[:120]


def _timed_out(error: Any) -> bool:
    return "did not answer within" in str(error or "")  # call_tool's words for its timeout


def drop_reason(outcome: Any, probed: list[str]) -> str:
    """The category of a failed (or probe) call, counted in the report."""
    if probed:
        return "probe" if outcome.error is not None else "probe_accepted"
    error = outcome.error or ""
    if _timed_out(error):
        return "timeout"
    if outcome.result is None:  # the server flagged an error, or the call raised
        return "invalid_arguments" if "validation error" in error.casefold() else "tool_error"
    if error == _SAYS_NOTHING:
        return "says_nothing"
    return "empty_result" if error == "empty result" else "error_result"


class Explorer(VariedCalls):
    """The state of one exploration: candidate values per argument, the calls tried, the results."""

    def __init__(self, tools: list[dict[str, Any]], cfg: AjetConfig, kept: JsonlAppender, dropped: JsonlAppender,
                 writes: frozenset[str] = frozenset()):
        self.opts = cfg.generate.explore
        self.tools = [_Tool(t["function"]["name"], t["function"].get("description") or "",
                            arg_specs(t["function"].get("parameters"))) for t in tools]
        self.by_name = {t.name: t for t in self.tools}
        self.writes = writes  # tools that say they change the server's state (MCP readOnlyHint false)
        self.turn = self.tools  # the tools being called now (explore: the readers, then the writers)
        self.reserved = 0  # calls of the budget kept for the tools of a later turn
        self.kept, self.dropped = kept, dropped
        self.rng = random.Random(self.opts.seed)
        self.pools: dict[tuple[str, str], dict[str, Value]] = defaultdict(dict)
        self.used: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.tried: set[str] = set()
        self.count: Counter = Counter()  # calls per tool, working or not
        self.errors: dict[str, Counter] = defaultdict(Counter)
        self.timeouts: Counter = Counter()
        self.probes: Counter = Counter()  # probe calls per tool
        self.probe_errors: dict[tuple[str, str], str] = {}
        self.blocked: dict[str, str] = {}
        self.free_text: set[tuple[str, str]] = set()
        self.probed: set[tuple[str, str]] = set()
        self.loose: dict[str, Value] = {}
        self.call_tool: dict[str, str] = {}  # kept call id -> its tool
        self.kept_rows: dict[str, list[dict[str, Any]]] = defaultdict(list)  # tool -> its kept calls
        self.next_id = 1
        self.report = ExploreReport(tools=len(self.tools))
        wargs = cfg.workflow_args
        self.timeout_s = self.opts.call_timeout_s or float(wargs.get("tool_timeout_s") or 30.0)
        self.max_chars = int(wargs.get("max_result_chars") or DEFAULT_MAX_RESULT_CHARS)
        prompt = str(wargs.get("system_prompt") or "")
        self.starved: set[tuple[str, str]] = set()  # string arguments nothing but a last resort gives a value
        self.guessed: dict[tuple[str, str], set[str]] = defaultdict(set)  # values a starved one got by its key
        for tool in self.tools:
            for spec in tool.specs:
                found = schema_values(spec) + description_values(spec, tool.description, tool.specs, prompt)
                if not found and spec.type in ("string", None):
                    self.starved.add((tool.name, spec.name))
                self.add(tool.name, spec.name, found + generic_values(spec))

    # ------------------------------------------------------------------ candidate values

    def add(self, tool: str, arg: str, values: list[Value]) -> None:
        pool = self.pools[(tool, arg)]
        for value in values:
            key = value_key(value.value)
            old = pool.get(key)
            if old is None or _RANK[value.origin] < _RANK[old.origin]:
                pool[key] = value
            elif value.shared and not old.shared and value.origin == old.origin:
                # a list showed this value repeating (one author, two books): it names no one record
                pool[key] = replace(old, shared=True)

    def pool(self, tool: _Tool, spec: ArgSpec) -> list[Value]:
        values = sorted(self.pools[(tool.name, spec.name)].values(),
                        key=lambda v: (_RANK[v.origin], v.shared, self._own(tool.name, v)))
        if any(v.origin not in ("generic", "wildcard", "schema_default") for v in values):
            # 1, 2.5, 10, 100 only without a hint; a one-letter search always (a description's
            # "full or partial name" names no record); beside a lone default (max_count 10) they are the
            # only values a user would ask for, since the default itself is never asked
            values = [v for v in values if v.origin != "generic"]
        if not values and (tool.name, spec.name) in self.free_text:
            values = list(self.loose.values())
        return values[: self.opts.max_values_per_argument]

    def _own(self, tool_name: str, value: Value) -> bool:
        """True for a value this tool returned itself."""
        return value is not _OMIT and bool(value.source) and self.call_tool.get(value.source.get("call")) == tool_name

    def learn_result(self, row: dict[str, Any]) -> None:
        """Feed the values of a kept call's result to every argument they fit (and to free-text
        arguments); not the call's own arguments echoed back (the user gave those: passing one on makes
        no chain), nor a value that changed when the call was made again (a clock, a random quote)."""
        call_id, tool_name = str(row.get("id")), str(row.get("tool"))
        self.call_tool[call_id] = tool_name
        given = [v for v in (row.get("arguments") or {}).values() if not isinstance(v, (dict, list))]
        found = [leaf for leaf in leaves(row.get("result"), tool_name)
                 if not under(leaf.path, row.get("volatile")) and not any(same_value(leaf.value, g) for g in given)]
        shared = shared_paths(found)

        def graph_value(leaf: Any, value: Any) -> Value:
            return Value(value, "graph", {"call": call_id, "path": leaf.path}, tuple(leaf.path) in shared)

        for tool in self.tools:
            about = significant(tokens(tool.name))
            for spec in tool.specs:
                item = item_spec(spec)
                if item is not None:  # customer_ids <- [a customer's id]
                    fits = [graph_value(leaf, [leaf.value]) for leaf in found if feeds(item, leaf)]
                else:  # an id returned as a number (survey 101) goes to a text argument as text
                    fits = [graph_value(leaf, str(leaf.value) if spec.type == "string" else leaf.value)
                            for leaf in found if feeds(spec, leaf, about) and fits_format(spec, leaf.value)]
                    # (a search argument is not starved: its own wildcard results name what to search)
                    if not fits:  # a date argument (since, start_timestamp) takes the days results name:
                        # a log's commit dates, so that a range asked by days has real values in the data
                        fits = [graph_value(leaf, day) for leaf in found if (day := day_of(spec, leaf.value))]
                    slot = (tool.name, spec.name)
                    # nothing names a value for it (but guesses of this kind, none of which has worked
                    # yet): a text whose key the tool's description names (git_show(revision) "shows the
                    # contents of a commit" <- a log's `Commit`; a status's `new file`, refused, does not
                    # stop the log's commits from being tried)
                    if not fits and slot in self.starved and all(
                            v.origin == "generic" or (key in self.guessed[slot] and not self.kept_rows[tool.name])
                            for key, v in self.pools[slot].items()):
                        fits = [graph_value(leaf, leaf.value) for leaf in found if isinstance(leaf.value, str)
                                and significant(leaf.key_words) and significant(leaf.key_words) <= tool.words]
                        self.guessed[slot].update(value_key(v.value) for v in fits)
                self.add(tool.name, spec.name, fits)
        for leaf in found:
            if isinstance(leaf.value, str) and len(self.loose) < _LOOSE_MAX:
                self.loose.setdefault(value_key(leaf.value), Value(leaf.value, "graph",
                                                                    {"call": call_id, "path": leaf.path}))

    def learn_error(self, tool: _Tool, arguments: dict[str, Any], error: str, probed: list[str]) -> None:
        sent = {value_key(v) for v in arguments.values()}
        for spec in hinted_arguments(error, arguments, tool.specs, probed):
            # never a value this call sent: an error quotes it back ("unknown room 'x'")
            self.add(tool.name, spec.name, [v for v in hint_values(error, spec) if value_key(v.value) not in sent])

    # ------------------------------------------------------------------ resume

    def resume(self) -> None:
        """Count the calls already in both files and learn from them as if they had just run."""
        for row in self.kept.existing:
            tool = self.by_name.get(row.get("tool"))
            self._seen(row)
            if tool is not None:
                self.learn_result(row)
                self.kept_rows[tool.name].append(row)
                self.report.per_tool[tool.name] += 1
            number = re.fullmatch(r"c(\d+)", str(row.get("id")))
            if number:
                self.next_id = max(self.next_id, int(number.group(1)) + 1)
        for row in self.dropped.existing:
            tool = self.by_name.get(row.get("tool"))
            self._seen(row)
            self.timeouts[str(row.get("tool"))] += _timed_out(row.get("error"))
            probed = list(row.get("probe") or [])
            self.probed.update((str(row.get("tool")), arg) for arg in probed)
            self.probes[str(row.get("tool"))] += bool(probed)
            if tool is not None and row.get("reason") == "probe_accepted":
                self.free_text.update((tool.name, arg) for arg in probed)
            elif tool is not None and row.get("error"):
                self.probe_errors.update({(tool.name, arg): str(row["error"]) for arg in probed})
                self.learn_error(tool, row.get("arguments") or {}, str(row["error"]), probed)
                if not probed:
                    self.errors[tool.name][error_pattern(row["error"])] += 1
        self.report.resumed = len(self.kept.existing)

    def _seen(self, row: dict[str, Any]) -> None:
        name, arguments = str(row.get("tool")), row.get("arguments") or {}
        self.tried.add(value_key([name, arguments]))
        self.count[name] += 1
        for arg, value in arguments.items():
            self.used[(name, arg)].add(value_key(value))

    # ------------------------------------------------------------------ running calls

    def budget_left(self) -> int:
        return self.opts.max_calls - sum(self.count.values()) - self.reserved

    async def run(self, client: Any, tool: _Tool, arguments: dict[str, Any], origin: dict[str, str],
                  inputs_from: list[dict[str, Any]], probed: list[str] | None = None,
                  variant_of: str | None = None, seeking: bool = False) -> bool:
        """Run one call and file it; True when it was kept. `variant_of`: the kept call this one varies
        (`vary`): refused, it is filed as `refused_variant` with the text the agent would see. `seeking`:
        a try of a day search (`seek_days`): kept only when its result says something, else filed as
        `day_search`."""
        from ajet.mcp_client import call_tool

        probed = probed or []
        self.probed.update((tool.name, arg) for arg in probed)
        self.probes[tool.name] += bool(probed)
        self.tried.add(value_key([tool.name, arguments]))
        self.count[tool.name] += 1
        self.report.calls += 1
        for arg, value in arguments.items():
            self.used[(tool.name, arg)].add(value_key(value))
        outcome = await call_tool(client, tool.name, arguments, timeout_s=self.timeout_s, max_chars=self.max_chars)
        if outcome.error is None and not probed and says_nothing(outcome.result, arguments) \
                and (seeking or not self._validated(tool, arguments, origin, outcome.result)):
            outcome.error = _SAYS_NOTHING  # ran, but no reference: an empty list, the arguments echoed back
        if outcome.error is None and not probed:
            # the same call again: what changed between the two is never an answer nor passed on; read
            # until something changes or `_READINGS` agree (a random tip of six repeats one time in six)
            for _ in range(_READINGS - 1):
                again = await call_tool(client, tool.name, arguments, timeout_s=self.timeout_s, max_chars=self.max_chars)
                self.report.rechecks += 1
                if again.error is not None or changed_paths(outcome.result, again.result):
                    break
            volatile = volatile_paths(outcome.result, again.result if again.error is None else None,
                                      arguments=arguments)
            call_id = f"c{self.next_id:04d}"
            self.next_id += 1
            row = {"id": call_id, "tool": tool.name, "arguments": arguments, "content": outcome.content,
                   "result": outcome.result, "origin": origin, "inputs_from": inputs_from}
            if outcome.truncated:
                row["truncated"] = True
            if outcome.not_shown:  # an image, audio or binary block the model sees as a placeholder only
                row["not_shown"] = outcome.not_shown
            if volatile:
                row["volatile"] = [list(path) for path in volatile]
                self.report.volatile += 1
            self.kept.write(row)
            self.report.kept += 1
            self.report.per_tool[tool.name] += 1
            self.kept_rows[tool.name].append(row)
            self.learn_result(row)
            return True
        reason = drop_reason(outcome, probed)
        self.timeouts[tool.name] += _timed_out(outcome.error)
        row = {"tool": tool.name, "arguments": arguments, "reason": reason, "error": outcome.error}
        if probed:
            row["probe"] = probed
        if seeking and reason == "says_nothing":
            row["reason"] = reason = "day_search"
        if variant_of is not None and reason in ("error_result", "tool_error", "says_nothing", "empty_result"):
            row.update(reason="refused_variant", refused=reason, content=outcome.content, variant_of=variant_of)
            reason = "refused_variant"
        self.dropped.write(row)
        self.report.dropped[reason] += 1
        if outcome.error is not None:
            self.probe_errors.update({(tool.name, arg): outcome.error for arg in probed})
            self.learn_error(tool, arguments, outcome.error, probed)
            if not probed:
                self.errors[tool.name][error_pattern(outcome.error)] += 1
        else:
            self.free_text.update((tool.name, arg) for arg in probed)
        return False

    def _validated(self, tool: _Tool, arguments: dict[str, Any], origin: dict[str, str], result: Any) -> bool:
        """Whether an empty list is the true answer: every argument is one the server checks (its probe
        was refused) and came from a trusted source, and the result holds a list to count. No bookings
        for a real room on a real date is an answer; no orders for a currency code sent as a customer
        id, on a server that takes any text, is not."""
        data = structured(result)
        has_list = isinstance(data, dict) and any(isinstance(v, list) for v in data.values())
        return has_list and all((tool.name, name) not in self.free_text and origin.get(name) not in (
            "generic", "wildcard", None) for name in arguments) and all(
            (tool.name, s.name) in self.probed for s in tool.specs if s.name in arguments and s.type in ("string", None))

    async def probe(self, client: Any) -> None:
        """Call each free-text argument once with a value no server knows, other required arguments
        filled with their best candidate, and read the valid values from the error."""
        for tool in self.turn:
            for spec in tool.specs:
                if self.timeouts[tool.name] >= _MAX_TIMEOUTS:
                    break
                if spec.type not in ("string", None) or spec.schema.get("enum") or "const" in spec.schema \
                        or (tool.name, spec.name) in self.probed:
                    continue
                arguments = {spec.name: probe_value(spec.name)}
                for other in tool.specs:
                    if other.required and other.name != spec.name:
                        pool = self.pool(tool, other)
                        if pool:
                            arguments[other.name] = pool[0].value
                        elif other.type in ("string", None):
                            arguments[other.name] = probe_value(other.name)
                # probes never take the call a tool not yet called needs: the budget is shared fairly
                if all(s.name in arguments for s in tool.specs if s.required) and self.budget_left() > self._owed() \
                        and value_key([tool.name, arguments]) not in self.tried:
                    await self.run(client, tool, arguments, {}, [], probed=[spec.name])

    def plan(self, tool: _Tool, allowance: int) -> list[tuple[dict[str, Any], dict[str, str], list[dict[str, Any]]]]:
        """Up to `allowance` new calls: first every candidate value not tried yet, then random ones."""
        if self.timeouts[tool.name] >= _MAX_TIMEOUTS:
            self.blocked[tool.name] = f"timed out {self.timeouts[tool.name]} times; not called again"
            return []
        pools: dict[str, list[Value]] = {}
        for spec in tool.specs:
            pool = self.pool(tool, spec)
            if spec.required and not pool:
                probe = self.probe_errors.get((tool.name, spec.name))
                self.blocked[tool.name] = f"no value found for its argument {spec.name!r}" + (
                    f" (its probe got: {error_pattern(probe)!r})" if probe else "")
                return []
            if any(v.origin == "graph" and not self._own(tool.name, v) for v in pool):
                # another tool's results fit this argument: leave out this tool's own outputs, which
                # only convert a conversion again, so the budget goes to chains a user asks for
                pool = [v for v in pool if not self._own(tool.name, v)]
            pools[spec.name] = pool if spec.required else [_OMIT, *pool]
        self.blocked.pop(tool.name, None)
        combos: list[dict[str, Value]] = []
        unused = {a: [v for v in pool if v is _OMIT or value_key(v.value) not in self.used[(tool.name, a)]]
                  for a, pool in pools.items()}
        unused = {a: u for a, u in unused.items() if any(v is not _OMIT for v in u)}
        for i in range(max((len(u) for u in unused.values()), default=0)):
            combo: dict[str, Value] = {}
            for j, (a, pool) in enumerate(pools.items()):
                if a not in unused:
                    combo[a] = self.rng.choice(pool)
                    continue
                options = unused[a]
                texts = {v.value for v in combo.values() if isinstance(v.value, str)}
                options_text = [o.value if isinstance(o.value, str) else None for o in options]
                # the next value not already given to another argument: comparing Dallas with Dallas is no question
                combo[a] = next((options[(i + j + k) % len(options)] for k in range(len(options))
                                 if options_text[(i + j + k) % len(options)] not in texts), options[(i + j) % len(options)])
            combos.append(_cohere(combo, pools))
        for _ in range(20 * allowance):
            combo = _cohere({a: self.rng.choice(pool) for a, pool in pools.items()}, pools)
            texts = [v.value for v in combo.values() if isinstance(v.value, str)]
            if len(set(texts)) == len(texts):  # compare Dallas with Dallas: a call, but not a question
                combos.append(combo)
        planned, keys = [], set()
        for combo in combos:
            arguments = {a: v.value for a, v in combo.items() if v is not _OMIT}
            key = value_key([tool.name, arguments])
            if key in self.tried or key in keys or _inverted(arguments):
                continue
            keys.add(key)
            origin = {a: v.origin for a, v in combo.items() if v is not _OMIT}
            inputs = [{"argument": a, **v.source} for a, v in combo.items() if v is not _OMIT and v.source]
            planned.append((arguments, origin, inputs))
            if len(planned) >= allowance:
                break
        return planned

    def _owed(self) -> int:
        """Tools that have had no real call yet (probes aside) and may still get one: each is owed one
        call of the budget before any tool gets a second."""
        return sum(1 for t in self.turn if self.count[t.name] == self.probes[t.name]
                   and self.timeouts[t.name] < _MAX_TIMEOUTS)

    async def explore(self, client: Any) -> None:
        """Probe, rounds and variants; the tools that only read first, then those that write (when the
        server's annotations say which), so that every reading shows the state the agent will meet: a
        git server's status read after the explorer's own checkout and reset names the wrong branch
        and no staged file. The writers' share of the budget is kept for them."""
        readers = [t for t in self.tools if t.name not in self.writes]
        writers = [t for t in self.tools if t.name in self.writes]
        turns = [readers, writers] if readers and writers else [self.tools]
        if len(turns) == 2:
            console.print(f"{len(writers)} tool(s) say they change the server's state ({', '.join(t.name for t in writers)}): "
                          f"explored after the {len(readers)} that only read")
        for i, turn in enumerate(turns):
            later = sum(len(t) for t in turns[i + 1:])
            self.turn = turn
            self.reserved = math.ceil(self.budget_left() * later / (later + len(turn))) if later else 0
            if self.opts.probe:
                await self.probe(client)
            await self._rounds(client, self.opts.max_calls_per_tool, self.opts.rounds)
            found = await self.seek_days(client)
            if found:
                console.print(f"days with data found by a day search: {', '.join(found)}")
            await self.vary(client)
        self.turn, self.reserved = self.tools, 0

    async def _rounds(self, client: Any, per_tool: int, rounds: int) -> None:
        for r in range(rounds):
            ran, limited = 0, False
            # tools never called go first: when the budget cannot reach every tool, as many get a call as it allows
            order = sorted(self.turn, key=lambda t: self.count[t.name] > self.probes[t.name])
            for i, tool in enumerate(order):
                # probes do not eat into a pass's share, only into the tool's and the run's budget
                share = math.ceil(per_tool * (r + 1) / rounds) - (self.count[tool.name] - self.probes[tool.name])
                fair = max(1, self.budget_left() // (len(order) - i))  # the rest of the budget split over the rest
                allowance = min(share, per_tool - self.count[tool.name], self.budget_left(), fair)
                if allowance <= 0:
                    limited = limited or self.count[tool.name] < per_tool
                    continue
                for arguments, origin, inputs in self.plan(tool, allowance):
                    if self.timeouts[tool.name] >= _MAX_TIMEOUTS:
                        break
                    await self.run(client, tool, arguments, origin, inputs)
                    ran += 1
            console.print(f"round {r + 1}/{rounds}: {ran} calls, {self.report.kept + self.report.resumed} kept "
                          f"in all, {sum(self.report.dropped.values())} dropped")
            if (ran == 0 and not limited) or self.budget_left() <= 0:
                break

    def finish(self) -> None:
        """Name the tools left without a working call, and why; and those the budget never reached."""
        for tool in self.tools:
            if self.report.per_tool[tool.name]:
                continue
            if self.count[tool.name] == self.probes[tool.name] and self.budget_left() <= 0:
                self.report.not_tried.append(tool.name)
                self.report.no_working_call[tool.name] = (
                    f"not called: the budget (generate.explore.max_calls={self.opts.max_calls}) ran out first")
            elif tool.name in self.blocked and not self.errors[tool.name]:
                self.report.no_working_call[tool.name] = self.blocked[tool.name]
            else:
                common = _commonest(self.errors[tool.name], 1)
                self.report.no_working_call[tool.name] = (f"{self.count[tool.name]} call(s) failed; commonest "
                                                          f"error: {common}")


def _cohere(combo: dict[str, Value], pools: dict[str, list[Value]]) -> dict[str, Value]:
    """A value taken from a result under a key that names a candidate of another argument brings that
    candidate along: price <- price_usd_per_mmbtu sets from_unit MMBtu (the first such argument), so
    the chain get_gas_price -> convert_price is one a user would ask for."""
    for arg, value in combo.items():
        if value.origin != "graph" or not value.source or not isinstance(value.source["path"][-1], str):
            continue
        words = set(re.split(r"[^a-z0-9]+", value.source["path"][-1].casefold()))
        for other, pool in pools.items():
            match = next((v for v in pool if other != arg and isinstance(v.value, str)
                          and v.value.casefold() in words), None)
            if match is not None:
                # a third argument holding that value gets the replaced one: MMBtu -> MMBtu is no conversion
                return {a: match if a == other else combo[other] if v.value == match.value and a != arg else v
                        for a, v in combo.items()}
    return combo


def _inverted(arguments: dict[str, Any]) -> bool:
    """Whether a call's start bound is a later day than its end bound (start_timestamp 2024-04-09,
    end_timestamp 2024-04-02): an empty span, no question a user asks, and a call spent for nothing."""
    days = {time_bound(name): value[:10] for name, value in arguments.items()
            if isinstance(value, str) and ISO_DAY.match(value)}
    return "since" in days and "until" in days and days["since"] > days["until"]


def _commonest(errors: Counter, n: int) -> str:
    return ", ".join(f"{pattern!r} ({count})" for pattern, count in errors.most_common(n)) or "none recorded"


async def explore_server(cfg: AjetConfig, out: Path, *, fresh: bool = False) -> ExploreReport:
    """Explore the config's MCP server and write the call bank to `out` (resuming from what is there).
    Raises GenerateError when no call works, naming the tools and the commonest errors."""
    from ajet.mcp_client import changes_state, open_client, server_tool_list, tool_to_openai

    started = time.monotonic()
    server = server_of(cfg)
    listed = await server_tool_list(server, cfg.base_dir)
    tools = [tool_to_openai(tool) for tool in listed]
    writes = frozenset(tool.name for tool in listed if changes_state(tool))
    with JsonlAppender(out, fresh) as kept, JsonlAppender(dropped_path(out), fresh) as dropped:
        explorer = Explorer(tools, cfg, kept, dropped, writes)
        explorer.resume()
        console.print(f"{len(tools)} tools on {server}; exploring up to {explorer.budget_left()} more calls "
                      f"({explorer.report.resumed} kept calls already in {out})")
        async with open_client(server, cfg.base_dir) as client:
            # Exploring provokes errors on purpose, and each is in the dropped file: an in-memory
            # server's own log lines (with tracebacks for plain exceptions) would only bury the progress.
            server_log = logging.getLogger("fastmcp.server.server")
            level = server_log.level
            server_log.setLevel(logging.CRITICAL)
            try:
                await explorer.explore(client)
            finally:
                server_log.setLevel(level)
        explorer.finish()
    report = explorer.report
    report.wall_s = time.monotonic() - started
    if report.kept + report.resumed == 0:
        every: Counter = Counter()
        for errors in explorer.errors.values():
            every.update(errors)
        tried = ", ".join(f"{t.name} ({explorer.count[t.name]})" for t in explorer.tools)
        raise GenerateError(
            f"no call to the MCP server {server!r} worked: {sum(explorer.count.values())} call(s) to "
            f"{len(tools)} tool(s) [{tried}] all failed; dropped: "
            f"{', '.join(f'{k} {v}' for k, v in report.dropped.most_common())}; commonest errors: "
            f"{_commonest(every, 3)}. Each call and its error is in {dropped_path(out)}")
    return report
