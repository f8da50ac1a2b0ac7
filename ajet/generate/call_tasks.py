"""`ajet generate tasks --from-calls calls.jsonl`: tasks written after the calls that answer them.

Every call in the bank (`ajet generate explore`) really ran, so a question written for it has a known
right answer. A task is one call, or a chain of 2-3 calls where an earlier result fed a later
argument (the bank's `inputs_from`), and one value of the last result (`target`): the gold calls
and that value become the task's reference, `answer: {calls, final}`, the shape the `function_call`,
`exact_match` and `tool_reference` judges read.

The question writer (`generate.question_writer`, or the teacher) phrases the user question with
the concrete values (ajet.generate.phrasing checks it: every value the user gives, no value the
user cannot know, no tool name); a template stands in when it fails. Then the round trip (on by
default): the teacher, its tool call constrained to the schemas, answers the question, and the task
is kept only when that first call is the gold one (APIGen's semantic check). A writer's question
that fails the round trip gets one more try as the template question. Rows are written as they
are decided, dropped ones with their reason; a rerun resumes.

    {"task_id": "call-1f0c...", "query": "...", "answer": {"calls": [...], "final": 4.15},
     "metadata": {"tools": [...], "num_calls": 1, "source": "call_first", "phrasing": "writer",
                  "target": ["price_usd_per_mmbtu"], "gold": [{"name", "arguments", "content"}]}}
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ajet.config.schema import AjetConfig
from ajet.errors import AjetError, GenerateError
from ajet.generate import natural, phrasing
from ajet.generate.endpoint import endpoint_of, open_endpoint
from ajet.generate.files import JsonlAppender, dropped_path, read_rows
from ajet.generate.schedule import schedule
from ajet.judge.function_call import values_match

console = Console()
_MAX_IN_FLIGHT = 8


@dataclass
class Candidate:
    """Calls in order, and the path of the answer in the last call's result."""

    steps: list[dict[str, Any]]
    path: list[Any]
    value: Any
    variant: int = 0  # the same calls phrased again (ajet.generate.schedule): a task of its own

    @property
    def key(self) -> str:
        ids = [s["id"] for s in self.steps]
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
                if name in passed or (i and _read_off(value, self.steps[:i])):
                    continue
                # a later call's argument of the same name is said again ("then to unit GJ"), never dropped
                given[name if name not in given else f"then {name}"] = value
        # which record of a list the question is about: the loan a chain renews, the loan whose fine it
        # asks ("renew Dune", not "renew a loan" when the member has three)
        picks = [(step, (self.steps[i + 1].get("inputs_from") or [{}])[0].get("path"))
                 for i, step in enumerate(self.steps[:-1])] + [(self.steps[-1], self.path)]
        for step, path in picks:
            label = item_label(parsed_result(step), path or [])
            if label and not any(values_match(label[1], v) for v in given.values()):
                given[label[0] if label[0] not in given else f"then {label[0]}"] = label[1]
        return given

    def hidden(self) -> list[Any]:
        """Values the user cannot know: the answer, and what a chain passes from one call to the next."""
        values = [self.value]
        for step in self.steps[1:]:
            for link in step.get("inputs_from") or []:
                values.append(step["arguments"].get(link["argument"]))
        return [v for v in values if v is not None]


@dataclass
class CallTaskReport:
    """What `ajet generate tasks --from-calls` did."""

    kept: int = 0
    resumed: int = 0
    candidates: int = 0
    phrasing: Counter = field(default_factory=Counter)
    writer_fallback: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    per_tool: Counter = field(default_factory=Counter)
    chains: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"kept": self.kept, "resumed": self.resumed, "candidates": self.candidates, "chains": self.chains,
                "phrasing": dict(self.phrasing), "writer_fallback": dict(self.writer_fallback),
                "dropped": dict(self.dropped), "per_tool": dict(self.per_tool)}


def parsed_result(step: dict[str, Any]) -> Any:
    result = step.get("result")
    if isinstance(result, str):
        try:
            return json.loads(result)
        except ValueError:
            return result
    return result


def item_label(result: Any, path: list[Any]) -> tuple[str, str] | None:
    """The (key, text) naming the list record `path` runs through, when the list holds several: its
    `title` or `name` ({"loans": [{"loan_id", "title": "Dune", ...}, ...]} -> ("title", "Dune"))."""
    node = result
    for i, step in enumerate(path):
        if isinstance(node, list) and isinstance(step, int) and step < len(node):
            item = node[step]
            if len(node) > 1 and isinstance(item, dict) and (path[i + 1:i + 2] or [None])[0] not in ("title", "name"):
                for key in ("title", "name"):
                    text = item.get(key)
                    if isinstance(text, str) and 0 < len(text) <= 60:
                        return key, text
            node = item
        elif isinstance(node, dict) and step in node:
            node = node[step]
        else:
            return None
    return None


def answer_paths(step: dict[str, Any], max_items: int = 3) -> list[tuple[list[Any], Any]]:
    """The values of a result a question can ask for: scalar leaves that are not an argument echoed
    back, numbers first (they are what a judge can check exactly)."""
    found: list[tuple[list[Any], Any]] = []

    def walk(node: Any, path: list[Any], depth: int) -> None:
        if isinstance(node, dict) and depth < 4:
            for key, child in node.items():
                walk(child, [*path, key], depth + 1)
        elif isinstance(node, list) and depth < 4:
            for i, child in enumerate(node[:max_items]):
                walk(child, [*path, i], depth + 1)
        elif isinstance(node, (int, float, str)) and not isinstance(node, bool):
            if isinstance(node, str) and not (0 < len(node.strip()) <= 60):
                return
            if any(values_match(node, arg) for arg in step["arguments"].values()):
                return  # the call's own input: asking for it is no question
            found.append((path, node))

    walk(parsed_result(step), [], 0)
    return sorted(found, key=lambda pv: isinstance(pv[1], str))


def _read_off(value: Any, earlier: list[dict[str, Any]]) -> bool:
    """Whether a text argument can be read off earlier calls: a key of the result names it (mmbtu in
    price_usd_per_mmbtu), a value is it ("unit": "MMBtu"), or the tool's description says it
    ("difference in USD per MMBtu")."""
    if not isinstance(value, str) or len(value.strip()) < 2:
        return False
    word = value.strip().casefold()

    def holds(node: Any) -> bool:
        if isinstance(node, dict):
            return any(word in _words(key) or holds(child) for key, child in node.items())
        if isinstance(node, list):
            return any(holds(child) for child in node)
        return isinstance(node, str) and node.strip().casefold() == word

    return any(holds(parsed_result(step)) or word in _words(step.get("description") or "") for step in earlier)


def _words(key: Any) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", str(key).casefold()) if len(w) > 2}


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
            found.append((other, max(paths, key=lambda p: len(_words(p[-1])))))
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


def _fitting(leaves: list[tuple[list[Any], Any]], argument: str) -> list[tuple[list[Any], Any]]:
    """The (path, value) leaves of a result whose key shares a word with `argument`."""
    return [(path, v) for path, v in leaves if isinstance(path[-1], str) and _words(argument) & _words(path[-1])]


def candidates(bank: list[dict[str, Any]], max_chain: int = 3) -> list[Candidate]:
    """Every (calls, answer path) a task can be built from: single calls and chains along inputs_from
    (the recorded source of a passed value, or another tool's call that returned it: `other_sources`).
    A chain uses each tool once, and its answer must be new: a value the user gave or an earlier call
    already returned makes the last call needless ("the member id of M-1648's loans")."""
    bank = rebased(bank)
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
    found = []
    for chain in chains:
        if any(_is_wildcard(step) for step in chain):
            continue  # a one-letter search made to discover ids: no question a user asks
        # an id the user gave, or the same field an earlier call returned; a number equal to another
        # field's (holds 0, days overdue 0) is a coincidence, not a needless call
        given = [v for v in chain[0]["arguments"].values() if isinstance(v, str)]
        returned = [(path[-1], leaf) for step in chain[:-1] for path, leaf in answer_paths(step)]
        for path, value in answer_paths(chain[-1]):
            if len(chain) > 1 and (any(values_match(value, v) for v in given)
                                   or any(key == path[-1] and values_match(value, v) for key, v in returned)):
                continue
            found.append(Candidate(chain, path, value))
    return found


async def generate_call_tasks(cfg: AjetConfig, calls_path: Path, n: int, out: Path, *, fresh: bool = False,
                              seed: int = 0) -> CallTaskReport:
    """Write up to `n` call-first tasks from the bank at `calls_path` to `out` (resuming)."""
    from ajet.generate.server import server_of
    from ajet.workflows.mcp_client import server_tools

    bank = read_rows(calls_path)
    if not bank:
        raise GenerateError(f"{calls_path} holds no calls; run `ajet generate explore --conf ... --out {calls_path}` first")
    missing = [i for i, row in enumerate(bank, 1) if not {"id", "tool", "arguments"} <= set(row)]
    if missing:
        raise GenerateError(f"{calls_path}: line(s) {missing[:5]} lack id/tool/arguments; is it a call bank "
                            "written by `ajet generate explore`?")
    tools = await server_tools(server_of(cfg), cfg.base_dir)
    descriptions = {t["function"]["name"]: t["function"].get("description") for t in tools}
    for row in bank:
        row["description"] = descriptions.get(row["tool"])
    # how the server spells its words (USD, MMBtu): result keys are lowercase, questions are not
    lex = natural.lexicon([str(t["function"].get("description") or "") for t in tools] + [
        str(spec.get("description") or "") for t in tools
        for spec in ((t["function"].get("parameters") or {}).get("properties") or {}).values() if isinstance(spec, dict)])
    opts = cfg.generate.tasks
    report = CallTaskReport()
    rng = random.Random(seed)
    found = candidates(bank, opts.max_chain)
    report.candidates = len(found)
    with JsonlAppender(out, fresh) as kept, JsonlAppender(dropped_path(out), fresh) as dropped:
        done = {(r.get("metadata") or {}).get("candidate") for r in kept.existing} | {
            r.get("candidate") for r in dropped.existing}
        report.resumed = len(kept.existing)
        needed = n - report.resumed
        if needed <= 0:
            console.print(f"{out} already has {report.resumed} tasks (asked for {n}); nothing to do")
            return report
        # the whole plan, then what is left of it: the schedule is seeded, so a rerun resumes the same order
        plan = [c for c in schedule(found, n + n // 2, opts.chain_share, rng, opts.phrasings_per_call)
                if c.key not in done]
        console.print(f"{len(bank)} calls, {len(found)} candidate tasks; phrasing {len(plan)} for {needed} tasks "
                      f"({report.resumed} already in {out})")
        writer_who, teacher_who = endpoint_of(cfg, "question_writer"), endpoint_of(cfg, "teacher")
        names = [t["function"]["name"] for t in tools]
        # a model is loaded (or an endpoint opened) only for what runs: the writer for writer phrasing,
        # the teacher for the round trip, and one model, not two, when the writer is the teacher
        uses_writer, uses_teacher = opts.phrasing == "writer", opts.round_trip
        async with open_endpoint(cfg, writer_who) if uses_writer else contextlib.nullcontext() as writer:
            same = uses_writer and writer_who == teacher_who
            async with (contextlib.nullcontext(writer) if same or not uses_teacher
                        else open_endpoint(cfg, teacher_who)) as teacher:
                queue = list(reversed(plan))

                async def worker() -> None:
                    while queue and report.kept < needed:
                        cand = queue.pop()
                        row, reason = await _decide(cfg, cand, tools, names, writer, teacher, writer_who == "self",
                                                    teacher_who == "self", report, rng, lex)
                        if report.kept >= needed:
                            return
                        if row is None:
                            report.dropped[reason] += 1
                            dropped.write({"candidate": cand.key, "tools": cand.tools, "reason": reason})
                            continue
                        kept.write(row)
                        report.kept += 1
                        report.phrasing[row["metadata"]["phrasing"]] += 1
                        report.chains += len(cand.steps) > 1
                        report.per_tool.update(cand.tools)
                        if report.kept % 10 == 0:
                            console.print(f"{report.kept + report.resumed}/{n} tasks kept, "
                                          f"dropped {sum(report.dropped.values())}")

                await asyncio.gather(*(worker() for _ in range(min(cfg.rollout.concurrency, _MAX_IN_FLIGHT))))
    if report.kept + report.resumed == 0:
        raise GenerateError(f"no task was kept from {len(plan)} candidate(s); dropped: "
                            f"{', '.join(f'{k} {v}' for k, v in report.dropped.most_common()) or 'none'}. "
                            f"See {dropped_path(out)}")
    return report


async def _decide(cfg: AjetConfig, cand: Candidate, tools: list[dict], names: list[str], writer: Any, teacher: Any,
                  writer_is_self: bool, teacher_is_self: bool, report: CallTaskReport,
                  rng: random.Random, lex: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, str]:
    """The task row for `cand`, or None and the reason it was dropped."""
    opts = cfg.generate.tasks
    mention, hidden = cand.mention(), cand.hidden()
    field_words = cand.field
    template = template_question(cand, names, rng, lex or {})
    tries: list[tuple[str, str]] = []
    if opts.phrasing == "writer":
        try:
            question = await _write_question(cfg, writer, cand, field_words, mention, writer_is_self)
            problem = phrasing.question_problem(question, mention, hidden, names)
        except (AjetError, ValueError, KeyError, IndexError, TypeError) as exc:
            question, problem = "", f"request_failed: {str(exc)[:200]}"
        if problem is None:
            tries.append(("writer", question))
        else:
            report.writer_fallback[problem.split(":")[0]] += 1
    tries.append(("template", template))
    last = "round_trip_mismatch"
    for how, question in tries:
        if opts.round_trip:
            try:
                ok = await round_trip(cfg, teacher, question, tools, cand.steps[0], teacher_is_self)
            except (AjetError, ValueError, KeyError, IndexError, TypeError):
                ok, last = False, "round_trip_failed"
            if not ok:
                continue
        return task_row(cand, question, how, getattr(writer, "model_name", None)), ""
    return None, last


def template_question(cand: Candidate, tool_names: list[str], rng: random.Random, lex: dict[str, str]) -> str:
    """A templated question for `cand`: one of the forms users write (ajet.generate.natural) that passes
    the checks, else the plain form (phrasing.template_question), which always does."""
    mention, hidden = cand.mention(), cand.hidden()
    found = natural.families(cand.steps, cand.path, cand.value, mention, cand.field, lex, rng)
    question = natural.pick(found, lambda q: phrasing.question_problem(q, mention, hidden, tool_names) is None, rng)
    if question is not None:
        return question
    return phrasing.template_question(phrasing.first_clause(cand.steps[-1].get("description")), cand.field,
                                      mention, rng, cand.steps[0].get("description"))


async def _write_question(cfg: AjetConfig, writer: Any, cand: Candidate, field_words: str, mention: dict[str, Any],
                          self_served: bool) -> str:
    body: dict[str, Any] = {
        "messages": [{"role": "system", "content": "You write the questions users ask."},
                     {"role": "user", "content": phrasing.question_prompt(cand.steps, field_words, mention)}],
        "temperature": cfg.generate.tasks.temperature, "max_tokens": 80,
    }
    if self_served:
        body["guided_regex"] = phrasing.QUESTION_REGEX  # one clean line; a small model rambles otherwise
    reply = await writer.chat(body)
    text = (reply["choices"][0]["message"].get("content") or "").strip()
    return text.splitlines()[0].strip().strip('"') if text else ""


async def round_trip(cfg: AjetConfig, teacher: Any, question: str, tools: list[dict], gold: dict[str, Any],
                     self_served: bool) -> bool:
    """Whether the teacher, asked `question` with the tools, first calls `gold` (name and arguments)."""
    body: dict[str, Any] = {
        "messages": [{"role": "system", "content": cfg.workflow_args.get("system_prompt") or "You are a helpful assistant."},
                     {"role": "user", "content": question}],
        "tools": tools, "tool_choice": "required", "temperature": 0.0, "max_tokens": 128,
    }
    if self_served:
        body["parallel_tool_calls"] = False
    reply = await teacher.chat(body)
    calls = reply["choices"][0]["message"].get("tool_calls") or []
    if not calls:
        return False
    function = calls[0]["function"]
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        return False
    return (function.get("name") == gold["tool"] and isinstance(arguments, dict)
            and values_match(arguments, gold["arguments"], 1e-6))


def task_row(cand: Candidate, question: str, how: str, writer: str | None) -> dict[str, Any]:
    digest = hashlib.sha1(f"{cand.key}|{question}".encode("utf-8")).hexdigest()[:12]
    gold = [{"name": s["tool"], "arguments": s["arguments"]} for s in cand.steps]
    return {"task_id": f"call-{digest}", "query": question, "answer": {"calls": gold, "final": cand.value},
            "metadata": {"tools": cand.tools, "num_calls": len(cand.steps), "source": "call_first", "phrasing": how,
                         "writer": writer, "candidate": cand.key, "target": cand.path,
                         "gold": [{**g, "content": s.get("content", "")} for g, s in zip(gold, cand.steps)]}}
