"""The question writer or teacher as a chat engine: a configured endpoint, or the run's own model.

`self` loads `model.path` with the hf engine and serves it in this process behind the gateway's
chat route (the one `ajet serve` mounts: Hermes tool rendering, tool-call parsing, and
`tool_choice` / `response_format` enforced by constrained decoding), on a free 127.0.0.1 port; the
generation code then talks to it over HTTP like to any hosted model.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Literal

from ajet.config.generate import TeacherConfig
from ajet.config.schema import AjetConfig
from ajet.engine.chat_api import ChatAPIEngine


def endpoint_of(cfg: AjetConfig, role: Literal["teacher", "question_writer"]) -> TeacherConfig | Literal["self"]:
    """Who plays `role`: the question writer falls back to the teacher."""
    chosen = getattr(cfg.generate, role)
    return cfg.generate.teacher if chosen is None else chosen


@contextlib.asynccontextmanager
async def open_endpoint(cfg: AjetConfig, who: TeacherConfig | Literal["self"]) -> AsyncIterator[ChatAPIEngine]:
    """A started ChatAPIEngine for `who`; for self, the model is served here until the block ends."""
    if who == "self":
        async with _serve_self(cfg) as base_url:
            # The model answers here when it is done (a busy CPU is slow, not down): no timeout, no retry.
            async with ChatAPIEngine(base_url, model="policy", timeout_s=None, max_retries=0) as engine:
                yield engine
        return
    assert isinstance(who, TeacherConfig)
    engine = ChatAPIEngine(who.base_url, model=who.model, api_key=who.api_key,
                           timeout_s=cfg.generate.request_timeout_s, max_retries=cfg.generate.max_retries)
    async with engine:
        yield engine


@contextlib.asynccontextmanager
async def _serve_self(cfg: AjetConfig) -> AsyncIterator[str]:
    from ajet.engine.factory import build_engine
    from ajet.gateway.server import Gateway, GatewayServer, create_app
    from ajet.models import read_chat_template

    engine: Any = build_engine(cfg.model_copy(update={"engine": cfg.engine.model_copy(update={"type": "hf"})}))
    gateway = Gateway(engine, engine.tokenizer, model_name="policy", chat_template=read_chat_template(
        cfg.model.chat_template), max_prompt_tokens=cfg.rollout.max_prompt_tokens, require_key=False)
    server = GatewayServer(create_app(gateway))
    await engine.start()
    try:
        yield await server.start()
    finally:
        await server.stop()
        await engine.close()
