"""The passthrough gateway: the same `/v1/chat/completions` front (episode keys, request checks,
streaming) over a chat-API engine instead of a token engine.

Nothing is rendered or tokenized: the request's messages, tools, tool_choice, response_format and
sampling fields are forwarded to the endpoint (`ajet.engine.chat_api`), with the episode's
defaults (temperature, top_p, seed) filled in and `max_tokens` capped by rollout.max_tokens_per_turn,
and its reply comes back as the endpoint wrote it. Each call is recorded in the episode as
messages with no tokens and `trained=False`, so reports count turns and tool calls while no sample
can ever be built from it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ajet.engine.chat_api import ChatAPIEngine
from ajet.errors import GatewayError
from ajet.gateway.episodes import EpisodeSession
from ajet.gateway.server import ChatRequest, Gateway
from ajet.tracker.timeline import LLMCall

# Request fields the gateway owns or answers itself; everything else goes to the endpoint as sent.
_NOT_FORWARDED = {"model", "stream", "stream_options", "n", "max_tokens", "max_completion_tokens"}


class PassthroughGateway(Gateway):
    """A Gateway whose completions come from a chat endpoint; only `_complete` differs."""

    def __init__(self, engine: ChatAPIEngine, *, max_request_bytes: int = 4_000_000, require_key: bool = True) -> None:
        super().__init__(engine, None, model_name=engine.model_name, max_request_bytes=max_request_bytes,
                         require_key=require_key)
        self.chat_engine = engine

    async def _complete(self, session: EpisodeSession, agent: str, chat: ChatRequest) -> dict[str, Any]:
        if session.max_turns is not None and session.calls_of(agent) >= session.max_turns:
            raise GatewayError(f"agent {agent!r} reached max_turns={session.max_turns} in this episode",
                               code="max_turns_exceeded")
        body = {k: v for k, v in chat.model_dump(exclude_none=True).items() if k not in _NOT_FORWARDED}
        if chat.temperature is None:
            body["temperature"] = session.temperature
        if chat.top_p is None and session.top_p < 1.0:
            body["top_p"] = session.top_p
        if chat.seed is None and session.seed is not None:
            body["seed"] = session.seed
        requested = chat.max_completion_tokens or chat.max_tokens or session.max_tokens
        body["max_tokens"] = min(requested, session.max_tokens)
        started = time.perf_counter()
        reply = await self.chat_engine.chat(body)
        choice = reply["choices"][0]
        message = {k: v for k, v in choice["message"].items() if v is not None}
        message.setdefault("role", "assistant")
        message.setdefault("content", None)
        finish = choice.get("finish_reason") or "stop"
        calls = message.get("tool_calls") or []
        session.tool_calls_parsed += len(calls)
        if finish == "length":
            session.truncated += 1
        if session.record:
            call = LLMCall(index=0, agent=agent, trained=False, prompt_segments=[], completion_ids=[],
                           completion_logprobs=[], finish_reason=finish, tools_key="", messages=chat.messages,
                           seconds=time.perf_counter() - started)
            session.tracker.record(call, message, ends_with_eos=finish != "length")
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        return {
            "id": reply.get("id") or f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(reply.get("created") or time.time()),
            "model": reply.get("model") or self.model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                      "completion_tokens": int(usage.get("completion_tokens") or 0),
                      "total_tokens": int(usage.get("total_tokens") or 0)},
        }
