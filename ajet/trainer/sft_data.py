"""SFT and preference data: read JSONL conversations and render them into `Sample`s.

Accepted rows:
- OpenAI: `{"messages": [...], "tools": [...]}`; assistant messages may carry `tool_calls`, tool
  results are `{"role": "tool", "tool_call_id", "content"}`. `tools` may be a JSON string.
- ShareGPT (seed 000, LLaMA-Factory): `{"conversations": [{"from": "human"|"gpt"|"function_call"|
  "observation"|"system", "value": ...}], "tools": [...]}`; a function_call value is
  `{"name", "arguments"}` JSON (or a list of them for parallel calls).
- Preferences: `{"prompt": str | messages, "chosen": str | message(s), "rejected": ...}`, with
  optional `tools`.

Rendering goes through the gateway's `ChatRenderer.encode_conversation`, so the trained tokens and
mask are exactly what a live episode would record (see tests/unit/test_render.py, mask parity), and
text in a row that spells a special token (`<|im_end|>`) is trained as that text, never as the
control token: only the chat template makes control tokens.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ajet.errors import TaskReaderError
from ajet.render import ChatRenderer
from ajet.samples import Sample

log = logging.getLogger(__name__)

_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "system": "system", "observation": "tool", "function_call": "assistant", "tool": "tool"}


@dataclass
class Conversation:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None


@dataclass
class PreferencePair:
    prompt: list[dict[str, Any]]
    chosen: list[dict[str, Any]]
    rejected: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None


@dataclass
class LoadReport:
    rows: int = 0
    skipped: list[str] = field(default_factory=list)  # "file:line: reason"


def _openai_tools(tools: Any) -> list[dict[str, Any]] | None:
    if tools in (None, "", []):
        return None
    if isinstance(tools, str):
        tools = json.loads(tools)
    if not isinstance(tools, list):
        raise ValueError("'tools' must be a list of function specs")
    return [t if t.get("type") == "function" and "function" in t else {"type": "function", "function": t}
            for t in tools]


def _sharegpt_messages(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    pending: list[str] = []  # ids of calls awaiting their observation
    for n, turn in enumerate(turns):
        role = _SHAREGPT_ROLES.get(turn.get("from"))
        if role is None:
            raise ValueError(f"conversations[{n}].from is {turn.get('from')!r}")
        value = turn.get("value", "")
        if turn["from"] == "function_call":
            calls = json.loads(value) if isinstance(value, str) else value
            calls = calls if isinstance(calls, list) else [calls]
            tool_calls = []
            for k, call in enumerate(calls):
                call_id = f"call_{n}_{k}"
                arguments = call.get("arguments", {})
                tool_calls.append({"id": call_id, "type": "function", "function": {
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)}})
                pending.append(call_id)
            messages.append({"role": "assistant", "content": "", "tool_calls": tool_calls})
        elif role == "tool":  # an observation answers the oldest call still waiting
            messages.append({"role": "tool", "tool_call_id": pending.pop(0) if pending else f"call_{n}",
                             "content": value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)})
        else:
            messages.append({"role": role, "content": value})
    return messages


def parse_conversation(row: dict[str, Any]) -> Conversation:
    """One JSONL row (OpenAI or ShareGPT form) as OpenAI messages plus tools."""
    if "messages" in row:
        messages = row["messages"]
    elif "conversations" in row:
        messages = _sharegpt_messages(row["conversations"])
        system = row.get("system")  # LLaMA-Factory's ShareGPT keeps the system prompt beside the turns
        if isinstance(system, str) and system and not any(m.get("role") == "system" for m in messages):
            messages = [{"role": "system", "content": system}, *messages]
    else:
        raise ValueError("row has neither 'messages' nor 'conversations'")
    if not isinstance(messages, list) or not any(m.get("role") == "assistant" for m in messages):
        raise ValueError("conversation has no assistant turn to train on")
    return Conversation(messages=messages, tools=_openai_tools(row.get("tools")))


def _as_messages(value: Any, role: str) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return value
    raise ValueError(f"expected a string, a message or a list of messages, got {type(value).__name__}")


def parse_preference(row: dict[str, Any]) -> PreferencePair:
    for key in ("prompt", "chosen", "rejected"):
        if key not in row:
            raise ValueError(f"preference row has no {key!r}")
    return PreferencePair(
        prompt=_as_messages(row["prompt"], "user"),
        chosen=_as_messages(row["chosen"], "assistant"),
        rejected=_as_messages(row["rejected"], "assistant"),
        tools=_openai_tools(row.get("tools")),
    )


def read_jsonl(path: str | Path, parse) -> tuple[list[Any], LoadReport]:
    """Parse every row with `parse`; bad rows are reported (file:line: reason) and skipped."""
    path = Path(path)
    if not path.is_file():
        raise TaskReaderError(f"data file {str(path)!r} does not exist")
    report, items = LoadReport(), []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            report.rows += 1
            try:
                items.append(parse(json.loads(line)))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                report.skipped.append(f"{path}:{line_no}: {exc}")
    for problem in report.skipped[:5]:
        log.warning("skipped %s", problem)
    if not items:
        raise TaskReaderError(f"{path} has no usable rows; first problems: {report.skipped[:3]}")
    return items, report


def conversation_sample(renderer: ChatRenderer, conv: Conversation, index: int) -> Sample:
    rendered = renderer.encode_conversation(conv.messages, conv.tools)
    mask = [1 if seg.author == "llm" else 0 for seg in rendered.segments for _ in seg.token_ids]
    return Sample(input_ids=rendered.token_ids, loss_mask=mask, old_logprobs=[0.0] * len(mask), reward=0.0,
                  group_id=f"sft-{index}", agent="assistant", task_id=f"sft-{index}")


def load_sft_samples(path: str | Path, renderer: ChatRenderer) -> tuple[list[Sample], LoadReport]:
    conversations, report = read_jsonl(path, parse_conversation)
    samples = []
    for i, conv in enumerate(conversations):
        try:
            samples.append(conversation_sample(renderer, conv, i))
        except Exception as exc:  # a template that cannot render this row: skip it, say so
            report.skipped.append(f"{path}: conversation {i}: cannot render: {exc}")
    return samples, report


def preference_samples(renderer: ChatRenderer, pair: PreferencePair, index: int) -> tuple[Sample, Sample]:
    """(chosen, rejected) samples sharing the prompt; only the response turns are masked in."""
    chosen = renderer.encode_conversation(pair.prompt + pair.chosen, pair.tools)
    rejected = renderer.encode_conversation(pair.prompt + pair.rejected, pair.tools)
    out = []
    for rendered in (chosen, rejected):
        mask = [1 if seg.author == "llm" else 0 for seg in rendered.segments for _ in seg.token_ids]
        # only turns after the prompt are the response: unmask assistant turns inside the prompt
        prompt_turns = sum(1 for m in pair.prompt if m.get("role") == "assistant")
        llm_seen, pos = 0, 0
        for seg in rendered.segments:
            if seg.author == "llm":
                if llm_seen < prompt_turns:
                    mask[pos:pos + len(seg.token_ids)] = [0] * len(seg.token_ids)
                llm_seen += 1
            pos += len(seg.token_ids)
        out.append(Sample(input_ids=rendered.token_ids, loss_mask=mask, old_logprobs=[0.0] * len(mask),
                          reward=0.0, group_id=f"pref-{index}", agent="assistant", task_id=f"pref-{index}"))
    return out[0], out[1]
