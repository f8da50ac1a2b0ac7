"""What the tracker records: each LLM call as a timeline of authored token segments."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

Author = Literal["prompt", "llm"]
_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


@dataclass
class Segment:
    """A run of tokens with one author. `logprobs` is set for policy-generated tokens."""

    author: Author
    token_ids: list[int]
    logprobs: list[float] | None = None
    call_index: int | None = None  # which LLM call of the episode generated it


@dataclass
class LLMCall:
    """One request through the gateway: the prompt as sent to the engine and what came back."""

    index: int
    agent: str
    trained: bool
    prompt_segments: list[Segment]
    completion_ids: list[int]
    completion_logprobs: list[float]
    finish_reason: str
    tools_key: str  # identifies the tool set offered, to explain forks
    messages: list[dict[str, Any]] = field(default_factory=list)
    think_stripped: int = 0
    unmatched_assistant: int = 0
    tool_call_parse_failed: bool = False
    parse_error: str | None = None
    started: float = field(default_factory=time.time)
    seconds: float = 0.0
    superseded_by: int | None = None  # the call that asked the same prompt again: this one is not trained

    @property
    def prompt_ids(self) -> list[int]:
        return [t for seg in self.prompt_segments for t in seg.token_ids]

    @property
    def tokens(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def timeline(self, train_context: bool = True) -> tuple[list[int], list[int], list[float]]:
        """(tokens, loss_mask, logprobs). Generated tokens are masked in; with `train_context`,
        so are the earlier generations spliced into the prompt (a merged multi-turn sample)."""
        tokens: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        for seg in self.prompt_segments:
            trained = train_context and seg.author == "llm"
            tokens.extend(seg.token_ids)
            mask.extend([1 if trained else 0] * len(seg.token_ids))
            if trained and seg.logprobs is not None:
                logprobs.extend(seg.logprobs)
            else:
                logprobs.extend([0.0] * len(seg.token_ids))
        tokens.extend(self.completion_ids)
        mask.extend([1] * len(self.completion_ids))
        logprobs.extend(self.completion_logprobs)
        return tokens, mask, logprobs

    def to_dict(self) -> dict[str, Any]:
        """The episodes.jsonl form; also what the replay engine reads back."""
        return {
            "index": self.index,
            "agent": self.agent,
            "trained": self.trained,
            "prompt_ids": self.prompt_ids,
            "completion_ids": self.completion_ids,
            "logprobs": self.completion_logprobs,
            "finish_reason": self.finish_reason,
            "spliced_turns": sum(1 for s in self.prompt_segments if s.author == "llm"),
            "tool_call_parse_failed": self.tool_call_parse_failed,
            "parse_error": self.parse_error,
            "seconds": round(self.seconds, 4),
            **({"superseded_by": self.superseded_by} if self.superseded_by is not None else {}),
        }


def strip_think(text: str) -> str:
    """Text with `<think>...</think>` blocks removed (what thinking models' templates do to history)."""
    return _THINK.sub("", text)


@dataclass
class GeneratedTurn:
    """What the splice lookup returns for an assistant message the policy produced."""

    token_ids: list[int]
    logprobs: list[float]
    ends_with_eos: bool
    call_index: int


def canonical_arguments(arguments: Any) -> Any:
    """Arguments as a comparable value: JSON strings are parsed, dicts kept, anything else as text."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments.strip()
    return arguments


def message_fingerprint(message: dict[str, Any]) -> str:
    """A key identifying an assistant message by what the client can see: text and calls."""
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        calls.append([fn.get("name"), canonical_arguments(fn.get("arguments"))])
    return json.dumps([content.strip(), calls], sort_keys=True, ensure_ascii=False, default=str)
