"""The `replay` engine: plays back recorded or scripted completions, token for token.

Two sources (see docs/engines.md for the formats):

- a recorded run: an `episodes.jsonl` whose episodes carry `llm_calls` with `prompt_ids`,
  `completion_ids`, `logprobs` and `finish_reason`. A prompt is matched by its exact token ids; when
  a prompt was recorded several times, its completions are played in the recorded order.
- a script: a JSON list (a `.json` file, a `.jsonl` file of items, or a Python list) of
  `{"text": "..."}` or `{"token_ids": [...]}` items, played in order whatever the prompt. Text is
  tokenized and the tokenizer's EOS id appended; logprobs are 0.0 unless given.

With either, a workflow and its judge run deterministically, without a model: a regression test.
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import Any

from ajet.engine.base import Engine, FinishReason, Generation, SamplingParams
from ajet.errors import EngineError

Script = list[Any]


class ReplayEngine(Engine):
    """Answer `generate` from a recording (matched by prompt ids) or a script (in order).

    repeat: when a prompt's recorded completions (or the script) are all played, start again from the
    first instead of raising EngineError.
    """

    def __init__(
        self,
        source: str | os.PathLike | Script,
        tokenizer: Any = None,
        *,
        model_name: str = "ajet-replay",
        repeat: bool = False,
    ):
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.repeat = repeat
        self.source_name = "the scripted list" if isinstance(source, list) else str(source)
        self.played = 0
        self._recorded: dict[tuple[int, ...], list[Generation]] | None = None
        self._queues: dict[tuple[int, ...], deque[Generation]] = {}
        self._script: list[Generation] = []
        self._next = 0
        if isinstance(source, list):
            self._script = [self._scripted(item, f"item {i}") for i, item in enumerate(source)]
        else:
            self._load(Path(source))

    @property
    def mode(self) -> str:
        """'recorded' (matched by prompt) or 'scripted' (played in order)."""
        return "recorded" if self._recorded is not None else "scripted"

    def unplayed(self) -> int:
        """Completions not played yet (without counting repeats)."""
        if self._recorded is None:
            return max(0, len(self._script) - self._next)
        return sum(len(q) for q in self._queues.values())

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        generation = self._scripted_next() if self._recorded is None else self._recorded_next(prompt_ids)
        self.played += 1
        if len(generation.token_ids) > sampling.max_tokens:  # an engine would have stopped here too
            cut = max(0, sampling.max_tokens)
            return Generation(generation.token_ids[:cut], generation.logprobs[:cut], "length")
        return Generation(list(generation.token_ids), list(generation.logprobs), generation.finish_reason)

    # ------------------------------------------------------------------ playback
    def _scripted_next(self) -> Generation:
        if self._next >= len(self._script):
            if not self.repeat or not self._script:
                raise EngineError(
                    f"replay: all {len(self._script)} scripted completions of {self.source_name} were "
                    "played and another was asked for; add completions to the script or pass repeat=True")
            self._next = 0
        generation = self._script[self._next]
        self._next += 1
        return generation

    def _recorded_next(self, prompt_ids: list[int]) -> Generation:
        key = tuple(prompt_ids)
        queue = self._queues.get(key)
        if queue is None:
            raise EngineError(self._no_match_message(key))
        if not queue:
            recorded = (self._recorded or {})[key]
            if not self.repeat:
                raise EngineError(
                    f"replay: all {len(recorded)} recorded completions of this prompt were played and another "
                    f"was asked for (prompt ends with {self._tail(key)!r}); pass repeat=True to play them again")
            queue.extend(recorded)
        return queue.popleft()

    def _no_match_message(self, key: tuple[int, ...]) -> str:
        recorded = self._recorded or {}
        message = (f"replay: no recorded completion for this prompt ({len(key)} tokens, ending with "
                   f"{self._tail(key)!r}); {len(recorded)} distinct prompts are recorded in {self.source_name}.")
        if recorded:
            closest = max(recorded, key=lambda other: _common_prefix(key, other))
            shared = _common_prefix(key, closest)
            message += (f" The closest shares its first {shared} tokens, then has "
                        f"{self._text(closest[shared:shared + 12])!r} where this prompt has "
                        f"{self._text(key[shared:shared + 12])!r}.")
        return message + (" The workflow, its tools or the chat template changed since the recording, or "
                          "the tasks differ: record again, or use a scripted list.")

    def _tail(self, ids: tuple[int, ...] | list[int]) -> str:
        text = self._text(ids[-40:])
        return text[-160:]

    def _text(self, ids: Any) -> str:
        if self.tokenizer is None:
            return str(list(ids))
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    # ------------------------------------------------------------------ loading
    def _load(self, path: Path) -> None:
        if not path.is_file():
            raise EngineError(f"replay file {str(path)!r} does not exist; set engine.replay_file to an "
                              "episodes.jsonl of an earlier run or a JSON list of scripted completions")
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            rows = []
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    rows.append((f"{path}:{number}", _parse_json(line, f"{path}:{number}")))
        else:
            data = _parse_json(text, str(path))
            items = data if isinstance(data, list) else [data]
            rows = [(f"{path} item {i}", item) for i, item in enumerate(items)]
        if not rows:
            raise EngineError(f"replay file {str(path)!r} holds no completions")
        if any(isinstance(item, dict) and "llm_calls" in item for _, item in rows):
            self._load_episodes(rows)
        else:
            self._script = [self._scripted(item, where) for where, item in rows]

    def _load_episodes(self, rows: list[tuple[str, Any]]) -> None:
        recorded: dict[tuple[int, ...], list[Generation]] = {}
        for where, episode in rows:
            # An episode that failed before its first LLM call may have no 'llm_calls': nothing to play.
            calls = episode.get("llm_calls", []) if isinstance(episode, dict) else None
            if not isinstance(calls, list):
                raise EngineError(f"{where}: an episode is an object whose 'llm_calls' is a list (every line "
                                  "of a recorded episodes.jsonl is one episode)")
            for i, call in enumerate(calls):
                prompt, generation = _recorded_call(call, f"{where} llm_calls[{i}]")
                recorded.setdefault(prompt, []).append(generation)
        if not recorded:
            raise EngineError(f"replay file {self.source_name!r} has episodes but no llm_calls to play back")
        self._recorded = recorded
        self._queues = {key: deque(gens) for key, gens in recorded.items()}

    def _scripted(self, item: Any, where: str) -> Generation:
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict) or ("text" in item) == ("token_ids" in item):
            raise EngineError(f"{where}: a scripted completion is {{\"text\": \"...\"}} or "
                              f"{{\"token_ids\": [...]}}; got {str(item)[:120]}")
        finish = _finish(item.get("finish_reason", "stop"))
        if "text" in item:
            if self.tokenizer is None:
                raise EngineError(f"{where}: a text completion needs a tokenizer; pass tokenizer= to ReplayEngine")
            ids = list(self.tokenizer.encode(str(item["text"]), add_special_tokens=False))
            if item.get("eos", True):
                if self.tokenizer.eos_token_id is None:
                    raise EngineError(f"{where}: the tokenizer has no EOS token to end the text with; "
                                      "give token_ids instead")
                ids.append(int(self.tokenizer.eos_token_id))
        else:
            ids = _int_list(item["token_ids"], f"{where} token_ids")
        logprobs = _logprobs(item.get("logprobs"), len(ids), where)
        return Generation(token_ids=ids, logprobs=logprobs, finish_reason=finish)


def _recorded_call(call: Any, where: str) -> tuple[tuple[int, ...], Generation]:
    if not isinstance(call, dict) or "prompt_ids" not in call or "completion_ids" not in call:
        raise EngineError(f"{where}: a recorded call needs 'prompt_ids' and 'completion_ids'")
    prompt = tuple(_int_list(call["prompt_ids"], f"{where} prompt_ids"))
    completion = _int_list(call["completion_ids"], f"{where} completion_ids")
    logprobs = _logprobs(call.get("logprobs"), len(completion), where)
    return prompt, Generation(completion, logprobs, _finish(call.get("finish_reason") or "stop"))


def _finish(value: Any) -> FinishReason:
    # Recordings may hold the gateway's 'tool_calls'; for the engine that is a natural stop.
    return "length" if value == "length" else "stop"


def _int_list(value: Any, where: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise EngineError(f"{where} must be a list of token ids (integers); got {str(value)[:80]}")
    return list(value)


def _logprobs(value: Any, length: int, where: str) -> list[float]:
    if value is None:
        return [0.0] * length
    if not isinstance(value, list) or len(value) != length:
        raise EngineError(f"{where}: logprobs must be a list of {length} numbers (one per token); "
                          f"got {str(value)[:80]}")
    return [0.0 if v is None else float(v) for v in value]


def _parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise EngineError(f"{where}: not valid JSON ({exc})") from exc


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
