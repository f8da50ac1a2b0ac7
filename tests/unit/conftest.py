"""Fixtures of the unit tests: a scripted OpenAI chat server over real HTTP, shared by every test
that needs a model endpoint where a hosted model would be (tests/unit/fake_openai.py)."""

from __future__ import annotations

import pytest

from tests.unit.fake_openai import ScriptedOpenAI


@pytest.fixture(scope="session")
def openai_server():
    server = ScriptedOpenAI()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def llm(openai_server) -> ScriptedOpenAI:
    """The scripted server, with no script, responder or recorded request left from another test."""
    openai_server.reset()
    return openai_server
