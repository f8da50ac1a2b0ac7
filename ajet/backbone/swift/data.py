"""ajet's data as ms-swift datasets (JSONL files swift's `--dataset` reads).

- SFT: the conversations the debug backbone accepts (OpenAI `messages` with `tool_calls`, or
  ShareGPT `conversations`, see `ajet.trainer.sft_data`) become swift agent rows:
  `{"messages": [..., {"role": "tool_call", "content": "{\\"name\\": ..., \\"arguments\\": {...}}"},
  {"role": "tool_response", "content": "..."}, ...], "tools": "<JSON list of function specs>"}`.
- DPO: preference rows (`prompt`, `chosen`, `rejected`) become `messages` = prompt + chosen and
  `rejected_messages` = prompt + rejected; assistant turns inside the prompt carry `"loss": false`,
  so only the response is compared (as on the debug backbone).
- GRPO: each train task becomes a row whose prompt is the task query and whose `ajet_task` column
  carries the whole task as JSON; ajet's plugin rebuilds the Task from it and runs the workflow.

`tools` and `ajet_task` are JSON strings: Arrow would otherwise merge the differing keys of rows into
one struct type and pad them with nulls. Rows ajet cannot read are skipped and reported with their
file and line, as the debug backbone does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ajet.config.schema import AjetConfig
from ajet.errors import TaskReaderError
from ajet.task_reader import read_tasks
from ajet.jsonl import write_jsonl
from ajet.trainer.sft_data import Conversation, PreferencePair, parse_conversation, parse_preference, read_jsonl

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


@dataclass
class Dataset:
    """A dataset written for swift: its file, its rows, and what was skipped on the way."""

    path: Path
    rows: list[dict[str, Any]]
    skipped: list[str] = field(default_factory=list)
    source_lines: list[int] = field(default_factory=list)  # line in the user's file of each row (1-based)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        raise ValueError(f"message content must be a string or a list of text parts, got {type(content).__name__}")
    return content


def swift_messages(messages: list[dict[str, Any]], untrained: int = 0) -> list[dict[str, Any]]:
    """OpenAI messages as swift agent messages; the first `untrained` assistant turns get `loss: false`."""
    out: list[dict[str, Any]] = []
    turn = 0
    for n, message in enumerate(messages):
        role = _ROLES.get(message.get("role"))
        if role is None:
            raise ValueError(f"messages[{n}].role is {message.get('role')!r}; expected one of {sorted(_ROLES)}")
        if role == "system" and n != 0:
            raise ValueError(f"messages[{n}] is a system message; only the first message may be one")
        if role == "tool":
            out.append({"role": "tool_response", "content": _text(message.get("content"))})
            continue
        if role != "assistant":
            out.append({"role": role, "content": _text(message.get("content"))})
            continue
        loss = {"loss": False} if turn < untrained else {}
        turn += 1
        text, calls = _text(message.get("content")), message.get("tool_calls") or []
        if text or not calls:
            out.append({"role": "assistant", "content": text, **loss})
        for k, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise ValueError(f"messages[{n}].tool_calls[{k}] has no function.name")
            arguments = fn.get("arguments", {})
            if isinstance(arguments, str):
                arguments = json.loads(arguments) if arguments.strip() else {}
            out.append({"role": "tool_call", **loss,
                        "content": json.dumps({"name": fn["name"], "arguments": arguments}, ensure_ascii=False)})
    return out


def _tools(tools: list[dict[str, Any]] | None) -> str | None:
    return json.dumps(tools, ensure_ascii=False) if tools else None


def sft_row(conv: Conversation) -> dict[str, Any]:
    row: dict[str, Any] = {"messages": swift_messages(conv.messages)}
    if conv.tools:
        row["tools"] = _tools(conv.tools)
    return row


def preference_row(pair: PreferencePair) -> dict[str, Any]:
    untrained = sum(1 for m in pair.prompt if m.get("role") == "assistant")
    row: dict[str, Any] = {
        "messages": swift_messages(pair.prompt + pair.chosen, untrained),
        "rejected_messages": swift_messages(pair.prompt + pair.rejected, untrained),
    }
    if pair.tools:
        row["tools"] = _tools(pair.tools)
    return row


def _convert(source: str | Path, parse, to_row, out: Path, what: str) -> Dataset:
    path = Path(source)
    rows, report = read_jsonl(path, lambda raw: to_row(parse(raw)))  # bad rows: skipped, "file:line: why"
    prefix = f"{path}:"
    bad = {int(problem[len(prefix):].split(":", 1)[0]) for problem in report.skipped}
    with path.open(encoding="utf-8") as handle:
        lines = [n for n, line in enumerate(handle, 1) if line.strip() and n not in bad]
    if not rows:
        raise TaskReaderError(f"{path} has no {what} row swift can train on; first problems: {report.skipped[:3]}")
    write_jsonl(out, rows)
    return Dataset(out, rows, list(report.skipped), lines)


def sft_dataset(source: str | Path, out: Path) -> Dataset:
    return _convert(source, parse_conversation, sft_row, out, "SFT")


def preference_dataset(source: str | Path, out: Path) -> Dataset:
    return _convert(source, parse_preference, preference_row, out, "preference")


def task_dataset(cfg: AjetConfig, out: Path) -> Dataset:
    """The train tasks as GRPO prompt rows."""
    tasks = read_tasks(cfg.task_reader, "train", cfg.base_dir).tasks
    if not tasks:
        raise TaskReaderError("the train split has no tasks: set task_reader.train")
    rows = [{"messages": [{"role": "user", "content": task.query}], "ajet_task": task.model_dump_json()}
            for task in tasks]
    write_jsonl(out, rows)
    return Dataset(out, rows)
