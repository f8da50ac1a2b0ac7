"""The calls `ajet generate explore` adds once the passes are done: days that hold data for a dated
tool whose every kept call came back empty, other values of the same shape for an argument whose kept
calls know few (an id, a quantity in free text), a digest said short, and a span of days around one
day a result names.
A mixin of `ajet.generate.explore.Explorer`: it calls the explorer's `run`, `budget_left`, `tried`,
`turn`, `kept_rows` and `opts`."""

from __future__ import annotations

import random
import re
from datetime import date, timedelta
from itertools import count
from typing import Any

from ajet.generate.explore_values import value_key
from ajet.generate.phrasing import time_bound
from ajet.generate.result_data import says_nothing, scalar_leaves, structured
from ajet.generate.text_values import ID_SHAPE, ISO_DAY, carries_quantity, day_of, id_variants, is_id_argument

_FEW = 2  # an id argument whose kept calls know this many values or fewer gets same-shape variants (vary)
_VARIANTS = 6  # distinct values such an argument should show in the data, known ones and variants together
_FEW_QUANTITIES = 6  # free text with quantities known in this many values or fewer gets variants (vary)
_QUANTITY_VARIANTS = 4  # variants of each such value
_DIGEST = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a SHA-1 or SHA-256 in hex: a commit, an image, a blob
_ABBREVIATED = 7  # characters of a digest said short (git's default abbreviation)
_SPANS = 4  # days (spread over those results name) a span of days is called around
_SPAN_MARGIN = (1, 3)  # days a span reaches either side of its day: at least one (a bound's time of day
# may be the clock's), at most three, and never onto a neighbouring day a result names when it can help it
_SEEK_STRIDE = 3  # days between two tries of a day search: any run of three days or more with data is met
_SEEK_CALLS = 240  # most calls one day search spends (four anchors: ~2.5 months either side of each), and
# never more than two thirds of the budget left: a miss costs one quick call, the rest is for the finds
_SEEK_SPREAD = 3  # days either side of a day found with data that are tried too: its week is found whole
_ON_FOUND = 16  # kept calls of each dated tool made again on the days found (cycling through them)


class VariedCalls:
    async def seek_days(self, client: Any) -> list[str]:
        """Days that hold data, for a tool taking one day (a room's bookings on a date) whose every kept
        call came back empty: the days tried came from a format or a description ('YYYY-MM-DD' gives
        2025-06-02) and a server's data lies on days of its own (one seeded week, last quarter's
        orders). Outward from each day tried and from today, every `_SEEK_STRIDE` days, the nearest
        first, the tool is called with the rest of its plainest kept call until a result says
        something; the days around that one are tried too (`_SEEK_SPREAD`). Then up to `_ON_FOUND`
        kept calls of every tool taking a day are made again on the days found, their links kept, so
        that the bank has records to ask about, alone and at a chain's end, and not only empty days.
        Misses are filed as `day_search`. ISO days only (`YYYY-MM-DD`, a date-time's first ten
        characters). Returns the days found."""
        dated = {tool.name: spec for tool in self.turn for spec in tool.specs if _takes_day(spec)}
        empty = [tool for tool in self.turn if tool.name in dated and self.kept_rows[tool.name] and all(
            says_nothing(row["result"], row["arguments"]) and _iso_day(row["arguments"].get(dated[tool.name].name))
            for row in self.kept_rows[tool.name])]
        if not empty:
            return []
        tool, spec = empty[0], dated[empty[0].name]
        rows = self.kept_rows[tool.name]
        base = _plainest(rows)
        anchors = sorted({date.fromisoformat(r["arguments"][spec.name][:10]) for r in rows} | {date.today()})
        limit, spent, found = min(_SEEK_CALLS, self.budget_left() * 2 // 3), 0, None

        async def data_on(day: date) -> bool:
            nonlocal spent
            arguments = {**base["arguments"], spec.name: _on_day(base["arguments"][spec.name], day)}
            if value_key([tool.name, arguments]) in self.tried or spent >= limit:
                return False
            spent += 1
            return await self.run(client, tool, arguments, {**base.get("origin", {}), spec.name: "day_search"},
                                  list(base.get("inputs_from") or []), seeking=True)

        for step in count(1):
            if spent >= limit or found is not None:
                break
            for day in (anchor + timedelta(days=sign * step * _SEEK_STRIDE) for anchor in anchors for sign in (-1, 1)):
                if await data_on(day):
                    found = day
                    break
        if found is None:
            return []
        days = [found] + [found + timedelta(days=d) for d in range(-_SEEK_SPREAD, _SEEK_SPREAD + 1)
                          if d and await data_on(found + timedelta(days=d))]
        found_days = {d.isoformat() for d in days}
        for other in self.turn:
            if other.name not in dated:
                continue
            name = dated[other.name].name
            known = [r for r in self.kept_rows[other.name] if _iso_day(r["arguments"].get(name))
                     and r["arguments"][name][:10] not in found_days]
            for i, row in enumerate(known[::max(1, len(known) // _ON_FOUND)][:_ON_FOUND]):
                arguments = {**row["arguments"], name: _on_day(row["arguments"][name], days[i % len(days)])}
                if self.budget_left() <= 0 or value_key([other.name, arguments]) in self.tried:
                    continue
                # its links kept: the shelter id it was given still came from list_shelters, so a chain
                # (list the shelters, then one's intake) reaches a day with records
                await self.run(client, other, arguments, {**row.get("origin", {}), name: "day_search"},
                               list(row.get("inputs_from") or []))
        return sorted(found_days)

    async def vary(self, client: Any) -> None:
        """Values of the same shape for an id argument whose kept calls know few values (`_FEW`): a
        bank with one customer id teaches a model that constant, whatever the user says. Each variant
        ('X-1234' -> 'X-5831') is called once, the rest of the arguments as a kept call had them: a
        real result is kept as any call; a refusal (the server's own error, or a result that says
        nothing) is filed as `refused_variant` with the text the agent sees, and becomes a task whose
        answer reports it (ajet.generate.call_tasks), so the model learns to copy the user's id."""
        for tool in self.turn:
            rows = self.kept_rows[tool.name]
            for spec in tool.specs:
                known = sorted({str(r["arguments"][spec.name]) for r in rows if isinstance(
                    r["arguments"].get(spec.name), str) and ID_SHAPE.fullmatch(r["arguments"][spec.name])})
                if not is_id_argument(spec) or not 1 <= len(known) <= _FEW:
                    continue
                base = next(r for r in rows if r["arguments"].get(spec.name) == known[0])
                # seeded by what they vary, not by the run's sampling: a resumed run draws the same ids
                rng = random.Random(value_key([self.opts.seed, tool.name, spec.name, known[0]]))
                for variant in id_variants(known[0], max(3, _VARIANTS - len(known)), rng, exclude=set(known)):
                    arguments = {**base["arguments"], spec.name: variant}
                    if self.budget_left() <= 0 or value_key([tool.name, arguments]) in self.tried:
                        continue
                    await self.run(client, tool, arguments, {**base.get("origin", {}), spec.name: "variant"}, [],
                                   variant_of=str(base["id"]))
            await self._vary_quantities(client, tool, rows)
            await self._abbreviate(client, tool, rows)
            await self._span_days(client, tool, rows)

    async def _vary_quantities(self, client: Any, tool: Any, rows: list[dict[str, Any]]) -> None:
        """Free text that carries quantities ('12 * 7', '55 mile/hour'), known in a few values only (the
        last-resort ones, say): the same text with other numbers, `_QUANTITY_VARIANTS` of each, so the
        model sees many values where it would otherwise learn a few by heart. A refused one is dropped."""
        for spec in tool.specs:
            if spec.type not in ("string", None) or spec.schema.get("enum") or is_id_argument(spec):
                continue
            known = sorted({r["arguments"][spec.name] for r in rows if isinstance(r["arguments"].get(spec.name), str)})
            if not known or len(known) > _FEW_QUANTITIES or not all(carries_quantity(v) for v in known):
                continue
            for value in known:
                base = next(r for r in rows if r["arguments"].get(spec.name) == value)
                rng = random.Random(value_key([self.opts.seed, tool.name, spec.name, value]))
                for variant in id_variants(value, _QUANTITY_VARIANTS, rng, exclude=set(known)):
                    arguments = {**base["arguments"], spec.name: variant}
                    if self.budget_left() <= 0 or value_key([tool.name, arguments]) in self.tried:
                        continue
                    await self.run(client, tool, arguments, {**base.get("origin", {}), spec.name: "variant"}, [])

    async def _abbreviate(self, client: Any, tool: Any, rows: list[dict[str, Any]]) -> None:
        """A hex digest (a git commit, an image id) is said abbreviated far more often than whole
        ("who wrote 5ec3757?"): every other known one is called once more with its first
        `_ABBREVIATED` characters, the rest of the arguments as a kept call had them; a server that
        refuses the short form gets nothing of it. Without these a model has seen only whole digests,
        and sends a short one to another tool."""
        for spec in tool.specs:
            if spec.type not in ("string", None):
                continue
            known = sorted({r["arguments"][spec.name] for r in rows
                            if isinstance(r["arguments"].get(spec.name), str) and _DIGEST.fullmatch(r["arguments"][spec.name])})
            for value in known[::2]:
                base = next(r for r in rows if r["arguments"].get(spec.name) == value)
                arguments = {**base["arguments"], spec.name: value[:_ABBREVIATED]}
                if self.budget_left() <= 0 or value_key([tool.name, arguments]) in self.tried:
                    continue
                await self.run(client, tool, arguments, {**base.get("origin", {}), spec.name: "abbreviated"}, [])

    async def _span_days(self, client: Any, tool: Any, rows: list[dict[str, Any]]) -> None:
        """A tool bounded by a start and an end day (git_log's start_timestamp/end_timestamp, a booking
        search's from/to) is asked by users with a span around what they look for ("who committed
        between March 2 and March 10?"); the bank's spans come from descriptions and are wide, so every
        record lies in them. Here each of up to `_SPANS` days that this tool's results name gets a call
        spanning a few days around it (`_SPAN_MARGIN`), the tool's required arguments as its plainest
        kept call had them; what the server answers is kept or dropped as any call."""
        bounds = {time_bound(spec.name): spec for spec in tool.specs if spec.type in ("string", None)}
        since, until = bounds.get("since"), bounds.get("until")
        if since is None or until is None or not rows or day_of(since, "2000-01-01") is None \
                or day_of(until, "2000-01-01") is None:
            return
        days = sorted({date.fromisoformat(day) for row in rows for _, leaf in scalar_leaves(structured(row.get("result")))
                       if (day := day_of(since, leaf))})
        if not days:
            return
        base = _plainest(rows)
        required = {spec.name for spec in tool.specs if spec.required} - {since.name, until.name}
        step = max(1, len(days) // _SPANS)
        near, far = _SPAN_MARGIN
        for i in range(0, len(days), step)[:_SPANS]:
            day = days[i]
            before = days[i - 1] if i else day - timedelta(days=far + 1)
            after = days[i + 1] if i + 1 < len(days) else day + timedelta(days=far + 1)
            start = min(day - timedelta(days=near), max(day - timedelta(days=far), before + timedelta(days=1)))
            end = max(day + timedelta(days=near), min(day + timedelta(days=far), after - timedelta(days=1)))
            arguments = {**{k: v for k, v in base["arguments"].items() if k in required},
                         since.name: start.isoformat(), until.name: end.isoformat()}
            if self.budget_left() <= 0 or value_key([tool.name, arguments]) in self.tried:
                continue
            origin = {**{k: v for k, v in (base.get("origin") or {}).items() if k in required},
                      since.name: "span", until.name: "span"}
            await self.run(client, tool, arguments, origin, [])


def _plainest(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The kept call with the fewest arguments (the first by its arguments among equals)."""
    return min(rows, key=lambda r: (len(r["arguments"]), value_key(r["arguments"])))


def _takes_day(spec: Any) -> bool:
    """Whether an argument takes one day (a date, not a span's bound: spans have `_span_days`)."""
    return time_bound(spec.name) is None and day_of(spec, "2000-01-01") is not None


def _iso_day(value: Any) -> bool:
    if not isinstance(value, str) or not ISO_DAY.match(value):
        return False
    try:
        date.fromisoformat(value[:10])
    except ValueError:  # 2025-02-30
        return False
    return True


def _on_day(value: str, day: date) -> str:
    """`value` (an ISO day or date-time) moved to `day`, its time of day kept."""
    return day.isoformat() + value[10:]
