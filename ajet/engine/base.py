"""The engine contract: token ids in, token ids and their logprobs out."""

from __future__ import annotations

import abc
import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class GuidedDecoding:
    """A constraint on what a completion may contain, enforced token by token by the engine.

    kind: 'json_schema' (value: a JSON schema dict; the completion is one JSON value that fits it),
    'ebnf' (value: a GBNF grammar, llama.cpp / xgrammar dialect, root rule `root`), 'regex' (value: a
    pattern), or 'structural_tag' (value: ajet's tool-call spec, tool calls inside
    `<tool_call>...</tool_call>` with a schema per tool; see `ajet.engine.guided`, which compiles every
    kind with llguidance, and `ajet.gateway.constraints`, which builds them). The engine masks tokens
    the grammar does not allow; `logprobs` stay those of the unconstrained model (what the trainer recomputes).
    """

    kind: Literal["json_schema", "ebnf", "regex", "structural_tag"]
    value: Any


@dataclass
class SamplingParams:
    """How to sample one completion. `temperature == 0` means greedy."""

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    stop_token_ids: list[int] = field(default_factory=list)  # generation ends after emitting one of these
    stop: list[str] = field(default_factory=list)  # stop strings; the matched text is cut off
    seed: int | None = None
    guided: GuidedDecoding | None = None  # constrained decoding (tool_choice, response_format)
    adapter: str | None = None  # a LoRA adapter the engine serves (HFEngine.load_adapter); None: the model as is


@dataclass
class Generation:
    """One completion. `logprobs[i]` is the log-probability of `token_ids[i]` under the sampling model
    (before temperature scaling, so the trainer can compare it with its own)."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason


class Engine(abc.ABC):
    """Generates completions for token-id prompts. Implementations: hf, remote, replay."""

    #: Name shown in /v1/models and reports.
    model_name: str = "ajet"
    #: The Hugging Face tokenizer of the policy when the engine has one (hf, replay); may be None (remote).
    tokenizer: Any = None

    @abc.abstractmethod
    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        """Generate one completion of `prompt_ids`. Safe to call concurrently."""

    async def start(self) -> None:
        """Start background work (batching loops, HTTP clients). Idempotent."""

    async def close(self) -> None:
        """Release resources. Idempotent."""

    def release_caches(self) -> None:
        """Free what the engine can make again (the hf engine's prefix KV cache, which the next weight
        update makes stale anyway, and its weight copies). The trainer calls it before an update, so
        that a training step's activations do not sit beside them; the next engine step rebuilds them."""

    async def generate_many(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Generation]:
        """Generate one completion per prompt, concurrently (engines that batch will batch them)."""
        return list(await asyncio.gather(*(self.generate(p, sampling) for p in prompts)))

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
