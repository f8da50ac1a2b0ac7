"""Which calls `ajet generate explore` makes next: the candidate values of every argument, ranked by
where they came from (`ajet.generate.explore_values.ORIGINS`), what each kept result and each error
teaches about them, and the combinations planned from them (every value tried once, then random).
A mixin of `ajet.generate.explore.Explorer`: it reads and fills the explorer's `tools`, `pools`,
`used`, `tried`, `rng`, `opts`, `starved`, `guessed`, `loose`, `free_text`, `call_tool`, `kept_rows`,
`probe_errors`, `blocked` and `timeouts`."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ajet.generate.explore_values import (ORIGINS, ArgSpec, Value, feeds, item_spec, leaves, shared_paths,
                                          significant, tokens, value_key)
from ajet.generate.phrasing import time_bound
from ajet.generate.result_data import same_value, under
from ajet.generate.text_values import ISO_DAY, day_of, fits_format, hint_values, hinted_arguments

OMIT = Value(None, "omitted")  # an optional argument left out of a call
_RANK = {origin: i for i, origin in enumerate(ORIGINS)}
_LOOSE_MAX = 40  # string values kept for free-text arguments that accept anything
MAX_TIMEOUTS = 2  # a tool that timed out this often is not called again: 400 calls x 30 s would be hours


@dataclass
class ExploredTool:
    """A tool of the server as the explorer sees it: its name, description and arguments."""

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


class CallPlanner:
    """The candidate values per argument and the calls planned from them."""

    def add(self, tool: str, arg: str, values: list[Value]) -> None:
        """Add candidates to an argument's pool; a value already there keeps the more trusted origin."""
        pool = self.pools[(tool, arg)]
        for value in values:
            key = value_key(value.value)
            old = pool.get(key)
            if old is None or _RANK[value.origin] < _RANK[old.origin]:
                pool[key] = value
            elif value.shared and not old.shared and value.origin == old.origin:
                # a list showed this value repeating (one author, two books): it names no one record
                pool[key] = replace(old, shared=True)

    def pool(self, tool: ExploredTool, spec: ArgSpec) -> list[Value]:
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
        return value is not OMIT and bool(value.source) and self.call_tool.get(value.source.get("call")) == tool_name

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

    def learn_error(self, tool: ExploredTool, arguments: dict[str, Any], error: str, probed: list[str]) -> None:
        sent = {value_key(v) for v in arguments.values()}
        for spec in hinted_arguments(error, arguments, tool.specs, probed):
            # never a value this call sent: an error quotes it back ("unknown room 'x'")
            self.add(tool.name, spec.name, [v for v in hint_values(error, spec) if value_key(v.value) not in sent])

    def _each_option_alone(self, tool: ExploredTool, pools: dict[str, list[Value]]) -> list[dict[str, Value]]:
        """Every optional value also sent with the other optional arguments left out, for a tool with two
        or more: the first pass sets them all at once, so `floor 3` was only ever asked beside a capacity
        and a feature, and no task asked the rooms on floor 3 alone (the trained model then added options
        nobody asked for). The plain call (every option left out) comes first; a value equal to its
        argument's default is not sent alone (it asks what the plain call asks). Required arguments take
        their best candidate in every such call, so that each is the plain call's twin but for one option
        (ajet.generate.twins' `needless_option` compares twins)."""
        optional = {spec.name: spec.schema.get("default", OMIT) for spec in tool.specs
                    if not spec.required and spec.name in pools}
        if len(optional) < 2:
            return []
        alone = [(None, OMIT)] + [(arg, value) for arg, default in optional.items() for value in pools[arg]
                                  if value is not OMIT and not same_value(value.value, default)]
        combos = []
        for arg, value in alone:
            combo = {a: value if a == arg else OMIT if a in optional else pool[0] for a, pool in pools.items()}
            if _distinct_texts(combo):
                combos.append(_cohere(combo, pools))
        return combos

    def plan(self, tool: ExploredTool, allowance: int) -> list[tuple[dict[str, Any], dict[str, str], list[dict[str, Any]]]]:
        """Up to `allowance` new calls: first every candidate value not tried yet, then random ones."""
        if self.timeouts[tool.name] >= MAX_TIMEOUTS:
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
            pools[spec.name] = pool if spec.required else [OMIT, *pool]
        self.blocked.pop(tool.name, None)
        combos: list[dict[str, Value]] = []
        unused = {a: [v for v in pool if v is OMIT or value_key(v.value) not in self.used[(tool.name, a)]]
                  for a, pool in pools.items()}
        unused = {a: u for a, u in unused.items() if any(v is not OMIT for v in u)}
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
        combos += self._each_option_alone(tool, pools)
        for _ in range(20 * allowance):
            combo = _cohere({a: self.rng.choice(pool) for a, pool in pools.items()}, pools)
            if _distinct_texts(combo):
                combos.append(combo)
        planned, keys = [], set()
        for combo in combos:
            arguments = {a: v.value for a, v in combo.items() if v is not OMIT}
            key = value_key([tool.name, arguments])
            if key in self.tried or key in keys or _inverted(arguments):
                continue
            keys.add(key)
            origin = {a: v.origin for a, v in combo.items() if v is not OMIT}
            inputs = [{"argument": a, **v.source} for a, v in combo.items() if v is not OMIT and v.source]
            planned.append((arguments, origin, inputs))
            if len(planned) >= allowance:
                break
        return planned


def _distinct_texts(combo: dict[str, Value]) -> bool:
    """No text given to two arguments: comparing Dallas with Dallas is a call, but not a question."""
    texts = [v.value for v in combo.values() if isinstance(v.value, str)]
    return len(set(texts)) == len(texts)


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
