"""Helpers for driving the real gateway in tests: scripted completions through the replay engine."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

from ajet.engine.base import GuidedDecoding
from ajet.errors import EngineError
from ajet.gateway.episodes import EpisodeSession
from ajet.gateway.server import Gateway, GatewayServer, create_app
from ajet.tracker.episode import EpisodeTracker


def scripted_engine(tokenizer, items: list[dict[str, Any]]):
    """Completions played in order: {'text': ...} (EOS appended) or {'token_ids': [...]} (as given)."""
    from ajet.engine.replay import ReplayEngine

    return ReplayEngine(list(items), tokenizer)


@contextlib.asynccontextmanager
async def running_gateway(engine, tokenizer, **kwargs):
    gateway = Gateway(engine, tokenizer, **kwargs)
    server = GatewayServer(create_app(gateway))
    url = await server.start()
    try:
        yield gateway, url
    finally:
        await server.stop()


def open_episode(gateway: Gateway, episode_id: str = "ep", **kwargs) -> tuple[EpisodeSession, Any]:
    session = EpisodeSession(episode_id=episode_id, tracker=EpisodeTracker(episode_id), **kwargs)
    return session, gateway.open_episode(session)


class GuidedScript:
    """An engine that writes scripted texts with a real model: each call's completion is sampled by
    `engine` (the tiny random model) under a regex that admits only the script's next text, so its
    token ids and logprobs are the model's own. Attempts numbered in `fail` raise EngineError (the
    gateway answers 503); those in `stall` wait until the client gives up and the gateway cancels them.
    Neither uses up its text. `generations` holds (prompt_ids, Generation) of each completed call."""

    def __init__(self, engine, script: list[str], fail: set[int] = frozenset(), stall: set[int] = frozenset()) -> None:
        self.engine, self.script, self.fail, self.stall = engine, list(script), set(fail), set(stall)
        self.tokenizer, self.eos_ids, self.max_positions = engine.tokenizer, engine.eos_ids, engine.max_positions
        self.attempts = 0
        self.generations: list[tuple[list[int], Any]] = []

    async def generate(self, prompt_ids, sampling):
        attempt, self.attempts = self.attempts, self.attempts + 1
        if attempt in self.fail:
            raise EngineError(f"scripted failure of attempt {attempt}")
        if attempt in self.stall:
            await asyncio.sleep(3600)
        text = self.script[len(self.generations)]
        pattern = "".join(c if c.isalnum() or c == " " else "\\x{%x}" % ord(c) for c in text)
        guided = dataclasses.replace(sampling, guided=GuidedDecoding("regex", pattern), max_tokens=256,
                                     temperature=1.0)
        generation = await self.engine.generate(prompt_ids, guided)
        self.generations.append((list(prompt_ids), generation))
        return generation
