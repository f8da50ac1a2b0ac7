"""Demonstrations by construction: a call-first task's episode written out, not sampled.

A task from `ajet generate tasks --from-calls` already holds everything its demonstration needs: the
gold calls and the text each returned (`metadata.gold`). The demonstration is the conversation the
mcp_agent workflow would have, turn for turn — system prompt, question, one assistant turn per gold
call with the tool message that call really produced, and a final sentence stating the gold value.
The teacher writes that sentence (checked to state the value; a template otherwise). No episode is
sampled, so thousands of verified rows take minutes, not hours.

With `workflow_args.ids_after_names` (the layout these lines were measured with; off by default), a
chained call whose argument comes out of an earlier result is preceded by one line that names the
record it came from as the question names it: the result's own words when the name and the id stand
side by side there (`"name":"Dock","room_id":"rm-104"`, as `workflow_args.ids_after_names` lays
results out), else "Dock has room_id rm-104.". A small model copies an id from a list far better
when the name it matched sits right before the id it must write. A value longer than
`LINKED_VALUE_CHARS` (a commit hash) gets no line: written twice it would cost more tokens than a
turn may have. With `generate.demos.plan_line` (off by default), the first turn opens with the tools
the episode calls, in order (`plan_note`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from ajet.config.schema import AjetConfig
from ajet.errors import AjetError
from ajet.generate import phrasing
from ajet.generate.result_data import structured, value_at
from ajet.judge.numbers import numbers_in
from ajet.judge.tool_reference import states_value
from ajet.workflow import Task

def is_constructible(task: Task) -> bool:
    """Whether `task` carries gold calls with their results (a call-first task)."""
    gold = task.metadata.get("gold")
    answer = task.answer if isinstance(task.answer, dict) else {}
    return (isinstance(gold, list) and bool(gold) and "final" in answer
            and all(isinstance(g, dict) and "name" in g and "content" in g for g in gold))


def demo_messages(task: Task, system_prompt: str, final_sentence: str, link_lines: bool = False,
                  plan_line: bool = False) -> list[dict[str, Any]]:
    """The episode's messages, shaped as the mcp_agent workflow records them; with `link_lines`, a
    chained call's turn opens with its `link_note`; with `plan_line`, the first turn with `plan_note`."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt},
                                      {"role": "user", "content": task.query}]
    golds = task.metadata["gold"]
    for i, gold in enumerate(golds):
        call_id = f"call_{i}"
        note = ""  # the first call has no earlier result to link from: only a plan opens it
        if plan_line and i == 0:
            note = plan_note([g["name"] for g in golds])
        elif link_lines:
            note = link_note(task.query, gold.get("arguments") or {}, [g["content"] for g in golds[:i]])
        messages.append({"role": "assistant", "content": note, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": gold["name"], "arguments": json.dumps(gold.get("arguments") or {}, ensure_ascii=False)}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": gold["content"]})
    messages.append({"role": "assistant", "content": final_sentence})
    return messages


def plan_note(tools: list[str]) -> str:
    """The episode's calls in order, said before the first: 'Plan: list_rooms, then get_bookings.'"""
    return f"Plan: {', then '.join(tools)}."


LINKED_VALUE_CHARS = 24


def link_note(query: str, arguments: dict[str, Any], earlier: list[str]) -> str:
    """For each argument the user could not have given (its value is not in `query`) that sits in one
    record of an `earlier` result (their texts) beside a text the question names: that text and the
    value, as the result writes them when they stand side by side, else "<text> has <key> <value>.";
    "" when no argument is passed on that way, or the record it came from is not named."""
    # each earlier result parsed, and each record's named text found, once for all the call's arguments
    named_records = [(content, record, mention) for content in earlier for record in _records(structured(content))
                     for mention in [_mention(query, record, arguments)] if mention]
    notes = []
    for value in arguments.values():
        if (isinstance(value, (dict, list, bool)) or value is None or len(str(value)) > LINKED_VALUE_CHARS
                or _names(query, str(value))):
            continue
        named = {(mention, key, content) for content, record, mention in named_records
                 for key, held in record.items() if held == value}
        if len({(mention, key) for mention, key, _ in named}) == 1:
            (name_key, name), key, content = named.pop()
            notes.append(_side_by_side(content, (name_key, name), (key, value)) or f"{name} has {key} {value}.")
    return " ".join(notes)


def _side_by_side(content: str, *pairs: tuple[str, Any]) -> str:
    """The JSON text of `pairs` as it stands in `content` (compact or spaced), or ""."""
    for comma, colon in ((",", ":"), (", ", ": ")):
        text = comma.join(json.dumps(k, ensure_ascii=False) + colon + json.dumps(v, ensure_ascii=False) for k, v in pairs)
        if text in content:
            return text
    return ""


def _records(data: Any, depth: int = 6) -> list[dict[str, Any]]:
    """Every dict inside `data` (the result itself when it is one)."""
    if depth < 0:
        return []
    if isinstance(data, dict):
        return [data] + [r for v in data.values() for r in _records(v, depth - 1)]
    if isinstance(data, list):
        return [r for v in data[:200] for r in _records(v, depth - 1)]
    return []


def _mention(query: str, record: dict[str, Any], arguments: dict[str, Any]) -> tuple[str, str] | None:
    """The key and longest text of `record` that `query` names and the call does not send itself."""
    sent = {str(v).casefold() for v in arguments.values()}
    texts = [(k, v) for k, v in record.items() if isinstance(v, str) and re.search(r"[^\W\d_]", v)
             and v.casefold() not in sent and _names(query, v)]
    return max(texts, key=lambda kv: len(kv[1]), default=None)


def _names(query: str, text: str) -> bool:
    """Whether `query` holds `text` as whole words, in any case."""
    return len(text) >= 2 and re.search(rf"(?<!\w){re.escape(text)}(?!\w)", query, re.IGNORECASE) is not None


async def final_sentence(cfg: AjetConfig, engine: Any, task: Task, self_served: bool, counts: Counter) -> str:
    """The answer sentence of `task`: the teacher's when it states the gold value and no number the
    tools and question did not give, else the template's. `counts` gets `writer` / `template` and
    the reasons the teacher's sentence was not used."""
    value = task.answer["final"]
    field_words = phrasing.field_name(task.metadata.get("target") or [])
    if task.metadata.get("refused") is not None:  # the server refused the id: say so, in the server's words
        counts["refusal"] += 1
        return phrasing.refusal_sentence(field_words, value, str(task.metadata["refused"]))
    record = named_record(task) if cfg.generate.demos.name_record else None
    mention = dict([record]) if record else task.metadata["gold"][0].get("arguments") or {}
    fallback = phrasing.template_sentence(field_words, value, mention)
    if engine is None:
        counts["template"] += 1
        return fallback
    body: dict[str, Any] = {
        "messages": [{"role": "system", "content": cfg.workflow_args.get("system_prompt") or ""},
                     {"role": "user", "content": phrasing.sentence_prompt(
                         task.query, task.metadata["gold"][-1]["content"], field_words, value)}],
        "temperature": 0.3, "max_tokens": 60,
    }
    if self_served:
        body["guided_regex"] = phrasing.SENTENCE_REGEX
    try:
        reply = await engine.chat(body)
        lines = (reply["choices"][0]["message"].get("content") or "").strip().splitlines()
        sentence = lines[0].strip() if lines else ""
    except (AjetError, KeyError, IndexError, TypeError) as exc:
        counts[f"sentence_request_failed: {type(exc).__name__}"] += 1
        sentence = ""
    problem = None
    if sentence:
        problem = ("sentence_without_value" if not states_value(sentence, value, 1e-9)
                   else "sentence_invents_numbers" if _states_other_numbers(sentence, task) else None)
        if problem is None:
            counts["writer"] += 1
            return sentence
        counts[problem] += 1
    counts["template"] += 1
    return fallback


def named_record(task: Task) -> tuple[str, str] | None:
    """The key and text by which the question names the list record that `metadata.target` reads the
    answer from (in the last gold result), when the call did not send that text itself; None otherwise,
    or when the text is longer than `LINKED_VALUE_CHARS` (a commit hash costs more to write than it helps)."""
    target = task.metadata.get("target") or []
    if len(target) < 2 or type(target[-2]) is not int:  # a field of a record in a list, not of the result
        return None
    last = task.metadata["gold"][-1]
    record = value_at(structured(last["content"]), target[:-1])
    if not isinstance(record, dict):  # MISSING too: a path the result does not hold names nothing
        return None
    mention = _mention(task.query, record, last.get("arguments") or {})
    return mention if mention and len(mention[1]) <= LINKED_VALUE_CHARS else None


def _states_other_numbers(sentence: str, task: Task) -> bool:
    """Whether the sentence writes a number that is neither in the question nor in any tool result."""
    seen = numbers_in(task.query)
    for gold in task.metadata["gold"]:
        seen += numbers_in(gold["content"])
    return any(all(abs(n - s) > 1e-9 * max(1.0, abs(s)) for s in seen) for n in numbers_in(sentence))
