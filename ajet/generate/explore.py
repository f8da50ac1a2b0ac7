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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ajet.config.schema import AjetConfig
from ajet.errors import GenerateError
from ajet.generate.explore_plan import MAX_TIMEOUTS, CallPlanner, ExploredTool, error_pattern
from ajet.generate.explore_values import Value, arg_specs, generic_values, probe_value, schema_values, value_key
from ajet.generate.explore_variants import VariedCalls
from ajet.generate.result_data import changed_paths, says_nothing, structured, volatile_paths
from ajet.generate.server import server_of
from ajet.generate.text_values import description_values
from ajet.jsonl import JsonlAppender, dropped_path
from ajet.tool_results import DEFAULT_MAX_RESULT_CHARS

console = Console()

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


class Explorer(CallPlanner, VariedCalls):
    """The state of one exploration: candidate values per argument, the calls tried, the results."""

    def __init__(self, tools: list[dict[str, Any]], cfg: AjetConfig, kept: JsonlAppender, dropped: JsonlAppender,
                 writes: frozenset[str] = frozenset()):
        self.opts = cfg.generate.explore
        self.tools = [ExploredTool(t["function"]["name"], t["function"].get("description") or "",
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
        self.reorder_ids = bool(wargs.get("ids_after_names"))
        prompt = str(wargs.get("system_prompt") or "")
        self.starved: set[tuple[str, str]] = set()  # string arguments nothing but a last resort gives a value
        self.guessed: dict[tuple[str, str], set[str]] = defaultdict(set)  # values a starved one got by its key
        for tool in self.tools:
            for spec in tool.specs:
                found = schema_values(spec) + description_values(spec, tool.description, tool.specs, prompt)
                if not found and spec.type in ("string", None):
                    self.starved.add((tool.name, spec.name))
                self.add(tool.name, spec.name, found + generic_values(spec))

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

    async def run(self, client: Any, tool: ExploredTool, arguments: dict[str, Any], origin: dict[str, str],
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
        outcome = await call_tool(client, tool.name, arguments, timeout_s=self.timeout_s, max_chars=self.max_chars,
                                  reorder_ids=self.reorder_ids)
        if outcome.error is None and not probed and says_nothing(outcome.result, arguments) \
                and (seeking or not self._validated(tool, arguments, origin, outcome.result)):
            outcome.error = _SAYS_NOTHING  # ran, but no reference: an empty list, the arguments echoed back
        if outcome.error is None and not probed:
            # the same call again: what changed between the two is never an answer nor passed on; read
            # until something changes or `_READINGS` agree (a random tip of six repeats one time in six)
            for _ in range(_READINGS - 1):
                again = await call_tool(client, tool.name, arguments, timeout_s=self.timeout_s,
                                        max_chars=self.max_chars, reorder_ids=self.reorder_ids)
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

    def _validated(self, tool: ExploredTool, arguments: dict[str, Any], origin: dict[str, str], result: Any) -> bool:
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
                if self.timeouts[tool.name] >= MAX_TIMEOUTS:
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

    def _owed(self) -> int:
        """Tools that have had no real call yet (probes aside) and may still get one: each is owed one
        call of the budget before any tool gets a second."""
        return sum(1 for t in self.turn if self.count[t.name] == self.probes[t.name]
                   and self.timeouts[t.name] < MAX_TIMEOUTS)

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
                    if self.timeouts[tool.name] >= MAX_TIMEOUTS:
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
