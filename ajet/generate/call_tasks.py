"""`ajet generate tasks --from-calls calls.jsonl`: tasks written after the calls that answer them.

Every call in the bank (`ajet generate explore`) really ran, so a question written for it has a known
right answer. A task is one call, or a chain of 2-3 calls where an earlier result fed a later
argument (the bank's `inputs_from`), and one value of the last result (`target`): the gold calls
and that value become the task's reference, `answer: {calls, final}`, the shape the `function_call`,
`exact_match` and `tool_reference` judges read.

The candidates come from ajet.generate.candidates, in the order ajet.generate.schedule gives. The
question writer (`generate.question_writer`, or the teacher) phrases the user question with the
concrete values (ajet.generate.phrasing checks it: every value the user gives, no value the user
cannot know, no tool name); a template in one of the forms users write (ajet.generate.natural)
stands in when it fails, or always with `phrasing: template`. Then the round trip (on by
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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ajet.config.schema import AjetConfig
from ajet.errors import AjetError, GenerateError
from ajet.generate import glosses, natural, phrasing
from ajet.generate.candidates import Candidate, candidates, refusals
from ajet.generate.endpoint import endpoint_of, open_endpoint
from ajet.generate.explore_values import arg_specs
from ajet.generate.placement import MAX_DESCRIPTION
from ajet.jsonl import JsonlAppender, dropped_path, read_rows
from ajet.generate.schedule import schedule, with_refusals
from ajet.judge.function_call import Call, parameters_by_name, values_match, without_defaults

console = Console()
_MAX_IN_FLIGHT = 8


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


async def generate_call_tasks(cfg: AjetConfig, calls_path: Path, n: int, out: Path, *, fresh: bool = False,
                              seed: int = 0) -> CallTaskReport:
    """Write up to `n` call-first tasks from the bank at `calls_path` to `out` (resuming)."""
    from ajet.generate.server import server_of
    from ajet.mcp_client import server_tools

    bank = read_rows(calls_path)
    if not bank:
        raise GenerateError(f"{calls_path} holds no calls; run `ajet generate explore --conf ... --out {calls_path}` first")
    missing = [i for i, row in enumerate(bank, 1) if not {"id", "tool", "arguments"} <= set(row)]
    if missing:
        raise GenerateError(f"{calls_path}: line(s) {missing[:5]} lack id/tool/arguments; is it a call bank "
                            "written by `ajet generate explore`?")
    tools = await server_tools(server_of(cfg), cfg.base_dir)
    # the first sentences say what a tool does; a megabyte of description must not cost minutes
    descriptions = {t["function"]["name"]: str(t["function"].get("description") or "")[:MAX_DESCRIPTION]
                    for t in tools}
    specs = {t["function"]["name"]: arg_specs(t["function"].get("parameters")) for t in tools}
    prompt = str(cfg.workflow_args.get("system_prompt") or "")
    for row in bank:
        tool_specs = specs.get(row["tool"]) or []
        row["description"] = descriptions.get(row["tool"])
        row["defaults"] = {s.name: s.schema["default"] for s in tool_specs if s.schema.get("default") is not None}
        row["optional"] = [s.name for s in tool_specs if not s.required]
        # arguments that pick what a tool computes of a record, not which record (ajet.generate.twins.mode_blind)
        row["modes"] = [s.name for s in tool_specs if s.schema.get("enum") or s.type == "boolean"]
        # units an enum's description glosses its values with ("imperial (°F, in, mph)"): what users say instead
        row["glosses"] = {s.name: found for s in tool_specs
                          if (found := glosses.enum_glosses(s.description, list(s.schema.get("enum") or [])))}
        # what the deployment's system prompt names (the repository, the account) the user never repeats
        row["prompted"] = [k for k, v in row["arguments"].items() if isinstance(v, str) and len(v) >= 3 and v in prompt]
    # how the server spells its words (USD, MMBtu): result keys are lowercase, questions are not
    lex = natural.lexicon(list(descriptions.values()) + [
        str(spec.get("description") or "")[:MAX_DESCRIPTION] for t in tools
        for spec in ((t["function"].get("parameters") or {}).get("properties") or {}).values() if isinstance(spec, dict)])
    opts = cfg.generate.tasks
    report = CallTaskReport()
    rng = random.Random(seed)
    found = candidates(bank, opts.max_chain)
    refused = refusals(bank, [r for r in read_rows(dropped_path(calls_path)) if r.get("reason") == "refused_variant"])
    report.candidates = len(found) + len(refused)
    with JsonlAppender(out, fresh) as kept, JsonlAppender(dropped_path(out), fresh) as dropped:
        done = {(r.get("metadata") or {}).get("candidate") for r in kept.existing} | {
            r.get("candidate") for r in dropped.existing}
        report.resumed = len(kept.existing)
        needed = n - report.resumed
        if needed <= 0:
            console.print(f"{out} already has {report.resumed} tasks (asked for {n}); nothing to do")
            return report
        # the whole plan, then what is left of it: the schedule is seeded, so a rerun resumes the same order
        plan = [c for c in with_refusals(schedule(found, n + n // 2, opts.chain_share, rng, opts.phrasings_per_call),
                                         refused, opts.refused_share, rng)
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
    the checks, else the plain form (phrasing.plain_question), which always does."""
    mention, hidden = cand.mention(), cand.hidden()
    found = natural.families(cand.steps, cand.path, cand.value, mention, cand.field, lex, rng)
    question = natural.pick(found, lambda q: phrasing.question_problem(q, mention, hidden, tool_names) is None, rng)
    if question is not None:
        return question
    return phrasing.plain_question(cand.field, mention, rng)


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
    if function.get("name") != gold["tool"] or not isinstance(arguments, dict):
        return False
    # a default sent or left out is the same call, as the judges count it
    got, want = without_defaults([Call(gold["tool"], arguments), Call(gold["tool"], gold["arguments"])],
                                 parameters_by_name(tools))
    return values_match(got.arguments, want.arguments, 1e-6)


def task_row(cand: Candidate, question: str, how: str, writer: str | None) -> dict[str, Any]:
    digest = hashlib.sha1(f"{cand.key}|{question}".encode("utf-8")).hexdigest()[:12]
    gold = [{"name": s["tool"], "arguments": s["arguments"]} for s in cand.steps]
    row = {"task_id": f"call-{digest}", "query": question, "answer": {"calls": gold, "final": cand.final},
           "metadata": {"tools": cand.tools, "num_calls": len(cand.steps), "source": "call_first", "phrasing": how,
                        "writer": writer, "candidate": cand.key, "target": cand.path,
                        "gold": [{**g, "content": s.get("content", "")} for g, s in zip(gold, cand.steps)]}}
    if cand.refused is not None:  # the server refused the id: the answer says so (constructed.final_sentence)
        row["metadata"]["refused"] = cand.refused
    return row
