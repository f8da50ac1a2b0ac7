"""Which call-first candidates become tasks, and in what order (ajet.generate.call_tasks).

What a small model learns first from SFT data is its priors: which tool a question of a kind goes
to, and whether a call is followed by another. On the energy server, 40 of the 55 tasks that
started with the price tool went on to a conversion; the SFT model then converted after every
price ("How much does gas cost in Boston per MMBtu?" got a second call to Mcf). So the schedule
keeps two rules in every prefix of its order:

- tools evenly: one task per single tool in turn, and within a tool its answer fields in turn (a
  tool whose result has five numbers gets no more tasks than one with a single number), numbers
  before strings (a judge checks numbers exactly); but where a tool's only number is the length of
  a list (how many bookings), that length is one field in turn with the strings: first, it took
  every task of a booking tool (67 of 67 on the zoo's rooms server), and no question asked who
  booked the room or when; and within a field the argument values take turns, so that a call whose
  result lists five records is not asked five times as often as one that lists one (`_least_asked`);
- a call goes on no more often than it stops: the chains that start with tool T (or with a
  shorter chain P that is itself a task) never outnumber the tasks that end there, so the question,
  not a prior, has to say whether a second call is needed; and chains stay within `chain_share`.
  A lookup (a tool whose every answer is a string, an id or a name, and whose results feed another
  tool) is the exception: users ask through it far more than for its ids, so up to LOOKUP_RATIO
  chains go through it per task that stops there.

A tool with few working calls (ten cities) would cap its chains low; each candidate can come back
as up to `phrasings` tasks, each phrased anew, so it still gets its share.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from dataclasses import replace
from typing import Any

from ajet.generate import phrasing
from ajet.generate.result_data import COUNT


LOOKUP_RATIO = 3  # chains through a lookup per task that stops at it


def _queue(cands: list[Any], rng: random.Random, phrasings: int) -> list[Any]:
    """One tool sequence's candidates, fields in turn, numbers before strings (unless its only numbers
    are lists' lengths), then again as the next phrasing variant."""
    fields: dict[str, list[Any]] = defaultdict(list)
    for cand in cands:
        fields[phrasing.field_name(cand.path)].append(cand)
    for members in fields.values():
        rng.shuffle(members)
    names = list(fields)
    rng.shuffle(names)
    ordered: list[Any] = []
    # a list's length as the only number: asked first, it would take every task of the tool before
    # one field of its records is asked once, so then all fields take their turn in one tier
    counts_only = all(cand.path[-1:] == [COUNT] for cand in cands if not isinstance(cand.value, str))
    numbers = [fields[f] for f in names if not isinstance(fields[f][0].value, str)]
    strings = [fields[f] for f in names if isinstance(fields[f][0].value, str)]
    tiers = [[fields[f] for f in names]] if counts_only else [numbers, strings]
    asked: Counter = Counter()  # how often each argument value was asked about so far
    for lanes in tiers:  # numbers (every phrasing of them), then strings; or all fields together
        once: list[Any] = []
        pending = [[(cand, _asked_values(cand)) for cand in lane] for lane in lanes]
        while any(pending):
            for lane in pending:
                if lane:
                    once.append(_least_asked(lane, asked))
        ordered += [replace(cand, variant=v) if v else cand for v in range(phrasings) for cand in once]
    return ordered


def _least_asked(lane: list[tuple[Any, list[tuple[str, str]]]], asked: Counter) -> Any:
    """Take from a field's lane (candidates with their argument values) the one whose values were asked
    about least so far (the first such in its shuffled order), and count its values. Taken in shuffled
    order, a call whose result lists five bookings came up five times as often as a call with one: the
    room with most bookings was passed on in 14 of the rooms server's 45 chains, and the SFT model sent
    it to every second call (19 of 19)."""
    best = min(range(len(lane)), key=lambda j: (sum(asked[v] for v in lane[j][1]), j))
    cand, values = lane.pop(best)
    asked.update(values)
    return cand


def _asked_values(cand: Any) -> list[tuple[str, str]]:
    """The (argument, value) pairs a candidate asks about: a chain's values passed on from the call
    before (which room), a single call's arguments."""
    last = cand.steps[-1]
    linked = {link["argument"] for link in last.get("inputs_from") or []} if len(cand.steps) > 1 else None
    return [(name, json.dumps(value, sort_keys=True, default=str)) for name, value in last["arguments"].items()
            if linked is None or name in linked]


def schedule(found: list[Any], n: int, chain_share: float, rng: random.Random, phrasings: int = 1) -> list[Any]:
    """Up to `n` candidates (`Candidate`s, each possibly repeated as another phrasing `variant`), in
    rounds: every single tool once, then every chain its stop/continue balance allows."""
    by_tools: dict[tuple, list[Any]] = defaultdict(list)
    for cand in found:
        by_tools[tuple(cand.tools)].append(cand)
    queues = {tools: _queue(cands, rng, phrasings) for tools, cands in by_tools.items()}
    singles = sorted((k for k in queues if len(k) == 1), key=lambda k: rng.random())
    multis = sorted((k for k in queues if len(k) > 1), key=lambda k: rng.random())
    # a tool whose results only name things (every answer a string: ids, names, labels) and feed another
    # tool is a lookup: users ask through it far more often than for its ids (library: find_member
    # answered 0 of 24 name questions first after SFT when its chains were held to its single tasks)
    # (a list's length is no answer that makes a tool more than a lookup)
    lookups = {k for k in singles if all(isinstance(c.value, str) for c in by_tools[k] if c.path[-1:] != [COUNT])
               and any(m[0] == k[0] for m in multis)}
    exact: Counter = Counter()      # tasks per tool sequence
    extending: Counter = Counter()  # tasks that go on past a tool sequence
    picked: list[Any] = []

    def take(key: tuple) -> None:
        picked.append(queues[key].pop(0))
        exact[key] += 1
        for i in range(1, len(key)):
            extending[key[:i]] += 1

    def may_continue(key: tuple) -> bool:
        if sum(exact[k] for k in multis) + 1 > chain_share * (len(picked) + 1):
            return False
        # every shorter sequence this chain passes through, when it is a task of its own, stops at
        # least as often as it goes on
        return all(extending[key[:i]] + 1 <= exact[key[:i]] * (LOOKUP_RATIO if key[:i] in lookups else 1)
                   for i in range(1, len(key)) if key[:i] in queues)

    while len(picked) < n:
        before = len(picked)
        for key in singles:
            if queues[key] and len(picked) < n:
                take(key)
        # chains that share a first tool compete for what its singles allow: the one with fewest tasks first
        for key in sorted(multis, key=lambda k: exact[k]):
            if queues[key] and len(picked) < n and may_continue(key):
                take(key)
        if len(picked) == before:  # the singles ran out: the chains left, as long as they last
            rest = [k for k in multis if queues[k]]
            if not rest:
                break
            for key in rest:
                if queues[key] and len(picked) < n:
                    take(key)
    return picked


MIN_REFUSED = 4  # refused-id tasks a plan gets at least, when explore filed that many


def with_refusals(plan: list[Any], refused: list[Any], share: float, rng: random.Random) -> list[Any]:
    """`plan` with refused candidates (ids the server does not know) spread evenly through it, about
    `share` of the whole: enough to teach that the user's id is the one to send, too few to teach that
    ids are refused. At least `MIN_REFUSED` when there are that many: refusals exist only where the
    bank knows one or two ids, and a plan made of those few calls alone (a couple of tasks) would
    still show the model one id."""
    if not refused or share <= 0 or not plan:
        return list(plan)
    refused = list(refused)
    rng.shuffle(refused)
    total = min(len(refused), max(MIN_REFUSED, round(share * len(plan) / (1 - share))))
    # plan positions, evenly; several after one position when there are more refusals than plan entries
    after = Counter(max(0, round((k + 0.5) * len(plan) / total) - 1) for k in range(total))
    out: list[Any] = []
    for i, cand in enumerate(plan):
        out.append(cand)
        out.extend(refused.pop() for _ in range(after[i]))
    return out
