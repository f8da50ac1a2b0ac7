"""ajet's SFT and preference data as LLaMA-Factory ShareGPT datasets, with a report of every change.

LLaMA-Factory reads ShareGPT rows `{"conversations": [{"from", "value"}], "system", "tools"}` whose
turns strictly alternate: human/observation at even positions (0, 2, ...), gpt/function_call at odd
ones, ending on gpt/function_call (preference rows: ending on human/observation, followed by one
`chosen` and one `rejected` message). A row that breaks this is dropped by LLaMA-Factory with only a
log warning. So ajet converts what can be converted, and drops nothing silently:

- leading system messages become the `system` column (several are joined);
- an assistant message with `tool_calls` becomes one `function_call` turn whose value is one call
  `{"name", "arguments"}` or, for parallel calls, a list of them;
- assistant text before a call is kept: the value becomes `text\\n<tool_call>[calls]</tool_call>`,
  which LLaMA-Factory's function formatter renders as the text followed by the calls (templates
  whose tool-call words are `<tool_call>`/`</tool_call>`, the default);
- the tool results of parallel calls become one `observation` turn holding a JSON list;
- consecutive user (or assistant text) messages are merged; trailing turns after the last
  assistant turn are removed (nothing after them is trained);
- what cannot be represented (a system message after the first turn, a conversation that starts
  with the assistant, a tool result with no call before it, an assistant turn right after a call,
  arguments that are not JSON, a preference response of several messages) drops the row.

Every change and every drop is counted by reason in a `ConversionReport`, with file:line examples.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ajet.errors import TaskReaderError
from ajet.trainer.sft_data import Conversation, PreferencePair, parse_conversation, parse_preference

HUMAN, GPT, CALL, OBS = "human", "gpt", "function_call", "observation"
_EVEN, _ODD = (HUMAN, OBS), (GPT, CALL)  # positions 0, 2, ... and 1, 3, ...
EXAMPLES_PER_REASON = 5


class Unconvertible(ValueError):
    """A row LLaMA-Factory cannot represent; the message is the reason shown in the report."""


@dataclass
class ConversionReport:
    """What happened to each input row: written unchanged, written changed, or dropped (by reason)."""

    source: str
    rows: int = 0
    written: int = 0
    unchanged: int = 0
    changed: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, kind: Counter, reason: str, where: str) -> None:
        kind[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < EXAMPLES_PER_REASON:
            shown.append(where)

    @property
    def rows_changed(self) -> int:
        return self.written - self.unchanged

    @property
    def rows_dropped(self) -> int:
        return self.rows - self.written

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "rows": self.rows, "written": self.written, "unchanged": self.unchanged,
                "rows_changed": self.rows_changed, "rows_dropped": self.rows_dropped,
                "changed": dict(self.changed), "dropped": dict(self.dropped), "examples": self.examples}

    def lines(self) -> list[str]:
        """The report as text, one reason a line (what the console and the docs show)."""
        out = [f"{self.source}: {self.rows} rows -> {self.written} written ({self.unchanged} unchanged, "
               f"{self.rows_changed} changed, {self.rows_dropped} dropped)"]
        for label, counter in (("changed", self.changed), ("dropped", self.dropped)):
            for reason, count in counter.most_common():
                out.append(f"  {label} {count}x: {reason} (e.g. {', '.join(self.examples[reason][:3])})")
        return out


# ---------------------------------------------------------------------------------------- turns
def _call_value(message: dict[str, Any]) -> str:
    calls = []
    for call in message["tool_calls"]:
        fn = call.get("function") or call
        arguments = fn.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise Unconvertible(f"tool call arguments are not valid JSON ({fn.get('name')!r})") from exc
        calls.append({"name": fn.get("name"), "arguments": arguments})
    payload = json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)
    text = (message.get("content") or "").strip()
    # LLaMA-Factory keeps text outside its tool-call words and renders the calls after it.
    return f"{text}\n<tool_call>{payload}</tool_call>" if text else payload


def _turns(messages: list[dict[str, Any]], changes: set[str]) -> tuple[str, list[dict[str, str]]]:
    """OpenAI messages as (system, alternating ShareGPT turns); merges are recorded in `changes`."""
    systems: list[str] = []
    while messages and messages[0].get("role") == "system":
        systems.append(messages[0].get("content") or "")
        messages = messages[1:]
    if len(systems) > 1:
        changes.add("several leading system messages joined into one system prompt")
    turns: list[dict[str, str]] = []
    results: list[str] = []  # tool results waiting to become one observation
    for n, message in enumerate(messages):
        role = message.get("role")
        prev = turns[-1]["from"] if turns else None
        if role == "tool":
            if prev != CALL and not results:
                raise Unconvertible("a tool result with no tool call before it")
            results.append(message.get("content") or "")
            continue
        if results:
            turns.append(_observation(results, changes))
            results, prev = [], OBS
        if role == "system":
            raise Unconvertible("a system message after the first turn (LLaMA-Factory takes one system prompt, first)")
        if role == "user":
            if prev == HUMAN:
                turns[-1]["value"] += "\n\n" + (message.get("content") or "")
                changes.add("consecutive user messages merged into one turn")
            else:
                turns.append({"from": HUMAN, "value": message.get("content") or ""})
        elif role == "assistant":
            _add_assistant(turns, message, prev, changes)
        else:
            raise Unconvertible(f"a message with role {role!r}")
    if results:
        turns.append(_observation(results, changes))
    if turns and turns[0]["from"] in _ODD:
        raise Unconvertible("the conversation starts with an assistant turn (LLaMA-Factory needs a user turn first)")
    return "\n\n".join(systems), turns


def _observation(results: list[str], changes: set[str]) -> dict[str, str]:
    if len(results) == 1:
        return {"from": OBS, "value": results[0]}
    changes.add("tool results of parallel calls merged into one observation (a JSON list)")
    return {"from": OBS, "value": json.dumps([_maybe_json(r) for r in results], ensure_ascii=False)}


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text


def _add_assistant(turns: list[dict[str, str]], message: dict[str, Any], prev: str | None, changes: set[str]) -> None:
    has_calls = bool(message.get("tool_calls"))
    if prev == CALL:
        raise Unconvertible("an assistant turn right after a tool call, with no tool result between them")
    if prev == GPT:  # two assistant messages in a row: fold the earlier text into this turn
        earlier = turns.pop()["value"]
        message = {**message, "content": "\n".join(t for t in (earlier, message.get("content") or "") if t)}
        changes.add("consecutive assistant messages merged into one turn")
    if has_calls:
        turns.append({"from": CALL, "value": _call_value(message)})
    else:
        turns.append({"from": GPT, "value": message.get("content") or ""})


def _tools_column(tools: list[dict[str, Any]] | None) -> str:
    """LLaMA-Factory's tools column: a JSON string of function specs ({name, description, parameters})."""
    if not tools:
        return ""
    return json.dumps([t.get("function", t) for t in tools], ensure_ascii=False)


# ---------------------------------------------------------------------------------------- rows
def sft_row(conv: Conversation) -> tuple[dict[str, Any], set[str]]:
    """One conversation as a ShareGPT row, and the set of changes made (empty: converted as is)."""
    changes: set[str] = set()
    system, turns = _turns(list(conv.messages), changes)
    while turns and turns[-1]["from"] in _EVEN:
        turns.pop()
        changes.add("trailing user/tool turns after the last assistant turn removed (nothing to train there)")
    if not turns:
        raise Unconvertible("no assistant turn to train on")
    return {"conversations": turns, "system": system, "tools": _tools_column(conv.tools)}, changes


def preference_row(pair: PreferencePair) -> tuple[dict[str, Any], set[str]]:
    """One preference pair as a ShareGPT ranking row (prompt turns, one chosen and one rejected message)."""
    changes: set[str] = set()
    chosen, rejected = list(pair.chosen), list(pair.rejected)
    shared = 0
    while shared < min(len(chosen), len(rejected)) - 1 and chosen[shared] == rejected[shared]:
        shared += 1
    if shared:
        changes.add("turns shared by chosen and rejected moved into the prompt")
    for name, response in (("chosen", chosen[shared:]), ("rejected", rejected[shared:])):
        if len(response) != 1 or response[0].get("role") != "assistant":
            raise Unconvertible(f"{name} is {len(response)} message(s) after the shared part; LLaMA-Factory's "
                                "preference rows take one assistant message")
    system, turns = _turns(list(pair.prompt) + chosen[:shared], changes)
    if not turns or turns[-1]["from"] not in _EVEN:
        raise Unconvertible("the prompt does not end with a user or tool turn")
    answers = []
    for response in (chosen[shared], rejected[shared]):
        one: list[dict[str, str]] = []
        _add_assistant(one, response, None, changes)
        answers.append(one[0])
    return {"conversations": turns, "chosen": answers[0], "rejected": answers[1], "system": system,
            "tools": _tools_column(pair.tools)}, changes


def _with_sharegpt_system(raw: Any) -> Any:
    """A ShareGPT row may carry its system prompt in a `system` column: make it the first turn."""
    turns = raw.get("conversations") if isinstance(raw, dict) else None
    if isinstance(turns, list) and isinstance(raw.get("system"), str) and raw["system"] \
            and not (turns and isinstance(turns[0], dict) and turns[0].get("from") == "system"):
        return {**raw, "conversations": [{"from": "system", "value": raw["system"]}, *turns]}
    return raw


def convert_file(path: str | Path, kind: str) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Convert every row of an ajet SFT (`kind='sft'`) or preference (`kind='dpo'`) JSONL file."""
    path = Path(path)
    if not path.is_file():
        raise TaskReaderError(f"{kind} data file {str(path)!r} does not exist")
    parse: Callable[[dict], Any] = parse_conversation if kind == "sft" else parse_preference
    build = sft_row if kind == "sft" else preference_row
    report, rows = ConversionReport(source=str(path)), []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            report.rows += 1
            where = f"{path.name}:{line_no}"
            try:
                row, changes = build(parse(_with_sharegpt_system(json.loads(line))))
            except Unconvertible as exc:
                report.note(report.dropped, str(exc), where)
                continue
            except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not an ajet row at all
                report.note(report.dropped, f"not a valid {kind} row: {exc}", where)
                continue
            rows.append(row)
            report.written += 1
            report.unchanged += not changes
            for reason in sorted(changes):
                report.note(report.changed, reason, where)
    if not rows:
        raise TaskReaderError(f"{path}: none of its {report.rows} rows can be trained by LLaMA-Factory; "
                              + "; ".join(report.lines()[1:4]))
    return rows, report
