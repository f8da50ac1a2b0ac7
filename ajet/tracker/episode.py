"""Per-episode recording: every LLM call, and the generated turns that later prompts splice in."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from ajet.tracker.timeline import GeneratedTurn, LLMCall, message_fingerprint, strip_think


@dataclass
class EpisodeTracker:
    """Collects the calls of one episode. Thread-safe, since sync agent code may call from threads."""

    episode_id: str
    calls: list[LLMCall] = field(default_factory=list)
    # (agent, fingerprint) -> the turns that returned that message, in order: an agent may get the
    # same reply twice (the same tool call retried), and each occurrence splices its own turn
    _turns: dict[tuple[str, str], list[GeneratedTurn]] = field(default_factory=dict)
    _stripped: set[tuple[str, str]] = field(default_factory=set)
    # indexes of the calls some recorded prompt splices in: kept as calls are recorded, since the retry
    # check asks it on every call
    _spliced: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_index(self) -> int:
        with self._lock:
            return len(self.calls)

    def lookup(self, agent: str):
        """The splice lookup for `agent` over one prompt's messages, asked in order: the n-th
        assistant message with a given text and calls → the n-th turn that returned it, if any."""
        seen: dict[str, int] = {}

        def find(message: dict[str, Any]) -> GeneratedTurn | None:
            key = message_fingerprint(message)
            n = seen[key] = seen.get(key, -1) + 1
            turns = self._turns.get((agent, key), [])
            return turns[n] if n < len(turns) else None

        return find

    def is_think_stripped(self, agent: str):
        def check(message: dict[str, Any]) -> bool:
            return (agent, message_fingerprint(message)) in self._stripped

        return check

    def record(self, call: LLMCall, returned_message: dict[str, Any], ends_with_eos: bool) -> None:
        """Keep the call; remember the message the client received so it can be spliced back."""
        turn = GeneratedTurn(call.completion_ids, call.completion_logprobs, ends_with_eos, call.index)
        with self._lock:
            self._untrain_out_of_context(call)
            self._supersede_retried(call)
            self._spliced.update(seg.call_index for seg in call.prompt_segments if seg.call_index is not None)
            call.index = len(self.calls)
            turn.call_index = call.index
            self.calls.append(call)
            self._turns.setdefault((call.agent, message_fingerprint(returned_message)), []).append(turn)
            content = returned_message.get("content") or ""
            if "<think>" in content:
                stripped = {**returned_message, "content": strip_think(content)}
                self._stripped.add((call.agent, message_fingerprint(stripped)))

    def _supersede_retried(self, call: LLMCall) -> None:
        """A call whose prompt is, token for token, an earlier call's of the same agent whose answer no
        call has sent back since, is that call asked again: a client's or a framework's retry after a
        timeout or a lost answer. The earlier answer reached no later prompt and no outcome, so it is
        kept in the record (`superseded_by`) but not trained, and not spliced: one sample, not two."""
        prompt = call.prompt_ids
        for earlier in self.calls:
            # the summed segment lengths first: they rule out nearly every call without building its prompt
            if (earlier.agent == call.agent and earlier.superseded_by is None and earlier.index not in self._spliced
                    and sum(len(seg.token_ids) for seg in earlier.prompt_segments) == len(prompt)
                    and earlier.prompt_ids == prompt):
                earlier.superseded_by, earlier.trained = len(self.calls), False
                for turns in self._turns.values():
                    turns[:] = [t for t in turns if t.call_index != earlier.index]

    def _untrain_out_of_context(self, call: LLMCall) -> None:
        """A spliced generation is trained only where it follows the very prompt it was sampled
        from; after an edited history its ids are kept (no drift) but not trained, since its
        sampling logprobs belong to another context."""
        seen: list[int] = []
        for seg in call.prompt_segments:
            if seg.author == "llm" and seg.call_index is not None:
                origin = self.calls[seg.call_index] if seg.call_index < len(self.calls) else None
                if origin is None or origin.prompt_ids != seen:
                    seg.author, seg.logprobs = "prompt", None
            seen.extend(seg.token_ids)

    @staticmethod
    def tools_key(tools: list[dict] | None) -> str:
        return json.dumps(tools or [], sort_keys=True)
