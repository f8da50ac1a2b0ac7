"""Inference engines: `hf` (in-process transformers), `remote` (vLLM-style completions server), `replay`."""

from ajet.engine.base import Engine, Generation, SamplingParams

__all__ = ["Engine", "Generation", "SamplingParams"]
