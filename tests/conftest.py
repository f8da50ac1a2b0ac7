"""Shared fixtures: the tiny random model (fast) and the real SmolLM2 (slow tests)."""

from __future__ import annotations

import pytest

from ajet.models import resolve_model_path


@pytest.fixture(scope="session")
def tiny_model_path() -> str:
    """2 layers, hidden 64, SmolLM2's tokenizer: for everything that needs a model but not its skill."""
    return resolve_model_path("tiny-random")


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    """The real SmolLM2-135M-Instruct, for tests that need real generation or learning."""
    return resolve_model_path("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)
