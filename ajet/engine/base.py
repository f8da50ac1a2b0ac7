"""The engine contract: token ids in, token ids and their logprobs out."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Literal

FinishReason = Literal["stop", "length"]


@dataclass
class SamplingParams:
    """How to sample one completion. `temperature == 0` means greedy."""

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    stop_token_ids: list[int] = field(default_factory=list)  # generation ends after emitting one of these
    stop: list[str] = field(default_factory=list)  # stop strings; the matched text is cut off
    seed: int | None = None


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

    @abc.abstractmethod
    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        """Generate one completion of `prompt_ids`. Safe to call concurrently."""

    async def start(self) -> None:
        """Start background work (batching loops, HTTP clients). Idempotent."""

    async def close(self) -> None:
        """Release resources. Idempotent."""
