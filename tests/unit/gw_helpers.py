"""Helpers for driving the real gateway in tests: scripted completions through the replay engine."""

from __future__ import annotations

import contextlib
from typing import Any

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
