"""`ajet generate tasks`: realistic user questions written from an MCP server's tool list.

Each request to the question writer targets one tool (or, for a `multi_tool_share` of requests,
two tools used in sequence), always the least covered ones first, so questions spread over every
tool; the whole tool list is shown for context. Replies are asked for as JSON (`response_format`
json_schema, which `--teacher self` enforces by constrained decoding) and parsed leniently when an
endpoint ignores it. Every question is checked (length, tool names leaking into the text, exact and
near duplicates of kept ones); kept rows go to `--out` as tasks

    {"task_id": "gen-3f9c...", "query": "...", "metadata": {"tools": ["get_gas_price"],
     "num_calls": 1, "source": "generated", "writer": "<model>"}}

(the jsonl task reader's format; no reference answer), dropped ones with their reason to
`<out>.dropped.jsonl`, both as they arrive. A run with an existing `--out` resumes: it counts and
deduplicates against the rows already there.
"""

from __future__ import annotations

import asyncio
import difflib
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
from ajet.generate.endpoint import endpoint_of, open_endpoint
from ajet.jsonl import JsonlAppender, dropped_path
from ajet.generate.server import server_of

console = Console()

WRITER_SYSTEM = "You write realistic questions that users ask an assistant which can use tools."
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_WORD = re.compile(r"[A-Za-z\u00c0-\uffff]+")
_MAX_IN_FLIGHT = 8  # question-writer requests at once (a local model batches them)


@dataclass
class TaskReport:
    """What `ajet generate tasks` did: kept, dropped by reason, requests made, per-tool coverage."""

    kept: int = 0
    resumed: int = 0
    requests: int = 0
    dropped: Counter = field(default_factory=Counter)
    per_tool: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {"kept": self.kept, "resumed": self.resumed, "requests": self.requests,
                "dropped": dict(self.dropped), "per_tool": dict(self.per_tool)}


def tool_lines(tools: list[dict[str, Any]]) -> str:
    """The tool list as the question writer sees it: name(arguments): description."""
    lines = []
    for tool in tools:
        fn = tool["function"]
        props = (fn.get("parameters") or {}).get("properties") or {}
        args = ", ".join(f"{k}: {v.get('type', 'any')}" + (f" ({v['description']})" if v.get("description") else "")
                         for k, v in props.items())
        lines.append(f"- {fn['name']}({args}): {fn.get('description', '')}".rstrip())
    return "\n".join(lines)


def writer_prompt(tools: list[dict[str, Any]], target: list[str], k: int, guidance: str | None) -> str:
    """The request for `k` questions that need the tools in `target`."""
    if len(target) == 1:
        need = f"the tool `{target[0]}`"
    else:
        need = f"the tool `{target[0]}` and then the tool `{target[1]}` (the second one uses the first one's result)"
    text = (f"The assistant has these tools:\n{tool_lines(tools)}\n\n"
            f"Write {k} different questions a user might ask that need {need} to answer. Each question gives "
            "every value the tool needs (concrete, varied values, not placeholders), does not name the tool, "
            "and sounds like a real user.")
    if guidance:
        text += f" {guidance.strip()}"
    return text + ' Reply with only a JSON object: {"questions": ["...", "..."]}'


def questions_schema(k: int) -> dict[str, Any]:
    return {"type": "object", "required": ["questions"], "properties": {"questions": {
        "type": "array", "minItems": 1, "maxItems": k,
        "items": {"type": "string", "minLength": 8, "maxLength": 300}}}}


def numbered_questions_regex(k: int) -> str:
    """1 to k lines "N. <a question of 20-200 characters ending in '?'>" (no JSON, no markup)."""
    return rf"(\d{{1,2}}\. [A-Z][^\n{{}}\[\]<>]{{18,200}}\?\n){{1,{k}}}"


def parse_questions(text: str) -> list[str]:
    """Questions from a reply: {"questions": [...]}, a JSON list (of strings or {"question": ...}),
    possibly inside ```json fences or prose; else lines ending in '?'. Raises ValueError on none."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for blob in candidates:
        for start, end in (("{", "}"), ("[", "]")):
            i, j = blob.find(start), blob.rfind(end)
            if i < 0 or j <= i:
                continue
            try:
                value = json.loads(blob[i:j + 1])
            except ValueError:
                continue
            if isinstance(value, dict):
                value = value.get("questions")
            if isinstance(value, list):
                found = [q.get("question") if isinstance(q, dict) else q for q in value]
                found = [q.strip() for q in found if isinstance(q, str) and q.strip()]
                if found:
                    return found
    lines = [re.sub(r"^\s*(?:[-*]|\d+[.)])\s*", "", line).strip() for line in text.splitlines()]
    found = [line for line in lines if line.endswith("?") and len(line) > 8]
    if not found:
        raise ValueError(f"no questions in the reply: {text[:200]!r}")
    return found


def normalise(question: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", question.casefold()).split())


class QuestionFilter:
    """Keeps a question unless it is too short, names a tool, or duplicates a kept one."""

    def __init__(self, tool_names: list[str], min_words: int, similarity: float) -> None:
        self.tool_names = [n for n in tool_names if "_" in n or len(n) > 12]  # names no user would type
        self.min_words = min_words
        self.similarity = similarity
        self.kept: list[str] = []
        self._exact: set[str] = set()

    def reason_to_drop(self, question: str) -> str | None:
        norm = normalise(question)
        if len(_WORD.findall(question)) < self.min_words:
            return "too_short"
        if any(name.casefold() in question.casefold() for name in self.tool_names):
            return "names_a_tool"
        if norm in self._exact:
            return "duplicate"
        if self.similarity < 1 and any(difflib.SequenceMatcher(None, norm, k).ratio() >= self.similarity
                                       for k in self.kept):
            return "near_duplicate"
        return None

    def keep(self, question: str) -> None:
        norm = normalise(question)
        self.kept.append(norm)
        self._exact.add(norm)


def plan_targets(tool_names: list[str], coverage: Counter, multi_share: float, rng: random.Random) -> list[str]:
    """The tools the next request is about: the least covered one, and with probability
    `multi_share` a second, different one to use after it."""
    least = min(coverage[n] for n in tool_names)
    first = rng.choice([n for n in tool_names if coverage[n] == least])
    if len(tool_names) > 1 and rng.random() < multi_share:
        return [first, rng.choice([n for n in tool_names if n != first])]
    return [first]


async def generate_tasks(cfg: AjetConfig, n: int, out: Path, *, fresh: bool = False, seed: int = 0) -> TaskReport:
    """Write up to `n` tasks to `out` (resuming from what is there); raises GenerateError on none."""
    from ajet.mcp_client import server_tools

    server = server_of(cfg)
    tools = await server_tools(server, cfg.base_dir)
    names = [t["function"]["name"] for t in tools]
    opts = cfg.generate.tasks
    report = TaskReport()
    with JsonlAppender(out, fresh) as kept, JsonlAppender(dropped_path(out), fresh) as dropped:
        checker = QuestionFilter(names, opts.min_words, opts.similarity)
        for row in kept.existing:
            checker.keep(row["query"])
            report.per_tool.update((row.get("metadata") or {}).get("tools", []))
        report.resumed = len(kept.existing)
        needed = n - report.resumed
        if needed <= 0:
            console.print(f"{out} already has {report.resumed} tasks (asked for {n}); nothing to do")
            return report
        max_requests = opts.max_requests or 4 * -(-needed // opts.per_request) + 8
        console.print(f"{len(tools)} tools on {server}; asking for {needed} questions "
                      f"({report.resumed} already in {out})")
        coverage = Counter({name: report.per_tool[name] for name in names})
        rng = random.Random(seed + report.resumed)
        writer = endpoint_of(cfg, "question_writer")
        async with open_endpoint(cfg, writer) as engine:

            in_flight = [0]

            async def worker() -> None:
                while report.kept < needed and report.requests < max_requests:
                    if report.kept + in_flight[0] * opts.per_request >= needed:
                        await asyncio.sleep(0.05)  # the requests out there may be enough: wait for them
                        continue
                    target = plan_targets(names, coverage, opts.multi_tool_share, rng)
                    coverage.update(target)  # count the attempt, so a tool the writer fails on does not block others
                    report.requests += 1
                    in_flight[0] += 1
                    try:
                        questions = await _ask(cfg, engine, tools, target, writer == "self")
                    except (AjetError, ValueError) as exc:
                        reason = "request_failed" if isinstance(exc, AjetError) else "unparseable_reply"
                        report.dropped[reason] += 1
                        dropped.write({"tools": target, "reason": reason, "error": str(exc)[:500]})
                        continue
                    finally:
                        in_flight[0] -= 1
                    _file(questions, target, engine.model_name)

            def _file(questions: list[str], target: list[str], model: str) -> None:
                # No await in here: concurrent workers never interleave between check and write.
                for question in questions:
                    if report.kept >= needed:
                        return
                    reason = checker.reason_to_drop(question)
                    if reason:
                        report.dropped[reason] += 1
                        dropped.write({"query": question, "tools": target, "reason": reason})
                        continue
                    checker.keep(question)
                    kept.write(_task_row(question, target, model))
                    report.kept += 1
                    report.per_tool.update(target)
                console.print(f"request {report.requests}: {report.kept + report.resumed}/{n} tasks kept, "
                              f"dropped {sum(report.dropped.values())}")

            await asyncio.gather(*(worker() for _ in range(min(cfg.rollout.concurrency, _MAX_IN_FLIGHT))))
    if report.kept + report.resumed == 0:
        raise GenerateError(f"no task was kept after {report.requests} request(s); dropped: "
                            f"{_reasons(report.dropped)}. See {dropped_path(out)} for each question and reason")
    return report


async def _ask(cfg: AjetConfig, engine: Any, tools: list[dict], target: list[str], self_served: bool) -> list[str]:
    opts = cfg.generate.tasks
    body: dict[str, Any] = {
        "messages": [{"role": "system", "content": WRITER_SYSTEM},
                     {"role": "user", "content": writer_prompt(tools, target, opts.per_request, opts.guidance)}],
        "temperature": opts.temperature, "max_tokens": opts.max_tokens,
    }
    if cfg.generate.structured_output and self_served:
        # A small local model writes better questions as a plain numbered list than inside JSON strings.
        body["messages"][-1]["content"] = body["messages"][-1]["content"].replace(
            ' Reply with only a JSON object: {"questions": ["...", "..."]}', " Reply with a numbered list, one question per line.")
        body["guided_regex"] = numbered_questions_regex(opts.per_request)
    elif cfg.generate.structured_output:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "questions", "schema": questions_schema(opts.per_request)}}
    reply = await engine.chat(body)
    return parse_questions(reply["choices"][0]["message"].get("content") or "")


def _task_row(question: str, target: list[str], writer: str) -> dict[str, Any]:
    digest = hashlib.sha1(normalise(question).encode("utf-8")).hexdigest()[:12]
    return {"task_id": f"gen-{digest}", "query": question,
            "metadata": {"tools": target, "num_calls": len(target), "source": "generated", "writer": writer}}


def _reasons(counts: Counter) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.most_common()) or "nothing (no request succeeded)"
