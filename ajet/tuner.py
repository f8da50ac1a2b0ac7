"""`Tuner`: the one object a workflow uses to reach the model being tuned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai


class Tuner:
    """Hands out OpenAI-compatible clients bound to this episode.

    Each agent name gets its own API key from the gateway; the key tells the gateway which episode
    and agent a call belongs to. Use `openai_client(agent=...)`, or `base_url` + `api_key_for(agent)`
    with any other HTTP client or agent framework.

    `transport`: where the rollout runs in the gateway's own process, the runner passes an
    `ajet.gateway.inprocess.InProcessTransport`, and `openai_client()` calls the gateway's app through
    it instead of over a socket (the same requests and answers, ~0.7 ms less a call).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        issue_key: Callable[[str], str],
        *,
        default_agent: str = "assistant",
        max_turns: int | None = None,
        external: dict[str, tuple[str, str, str]] | None = None,
        timeout_s: float = 600.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._base_url = base_url
        self._model = model
        self._issue_key = issue_key
        self._default_agent = default_agent
        self._external = external or {}  # agent -> (base_url, model, api_key) for untrained agents
        self._timeout_s = timeout_s
        self._transport = transport
        self._clients: list[openai.AsyncOpenAI | openai.OpenAI] = []
        self.max_turns = max_turns

    @property
    def base_url(self) -> str:
        """The gateway's OpenAI base URL (ends in /v1)."""
        return self._base_url

    @property
    def model(self) -> str:
        """The model name to pass in requests."""
        return self._model

    @property
    def api_key(self) -> str:
        """The API key of the default agent."""
        return self.api_key_for(self._default_agent)

    def api_key_for(self, agent: str) -> str:
        """The API key that marks calls as `agent`'s in this episode."""
        return self._issue_key(agent)

    def model_for(self, agent: str) -> str:
        """The model name to send for `agent` (differs for agents served by an external model)."""
        return self._external[agent][1] if agent in self._external else self._model

    def openai_client(self, agent: str | None = None, **kwargs: Any) -> openai.AsyncOpenAI:
        """An `openai.AsyncOpenAI` whose calls are recorded as `agent`'s (default 'assistant')."""
        agent = agent or self._default_agent
        base_url, api_key = self._endpoint(agent)
        kwargs.setdefault("timeout", self._timeout_s)
        kwargs.setdefault("max_retries", 0)
        if self._transport is not None and agent not in self._external and "http_client" not in kwargs:
            kwargs["http_client"] = httpx.AsyncClient(transport=self._transport, timeout=kwargs["timeout"])
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, **kwargs)
        self._clients.append(client)
        return client

    def sync_openai_client(self, agent: str | None = None, **kwargs: Any) -> openai.OpenAI:
        """A blocking `openai.OpenAI`, for agent code that is not async (run it in a thread)."""
        base_url, api_key = self._endpoint(agent or self._default_agent)
        kwargs.setdefault("timeout", self._timeout_s)
        kwargs.setdefault("max_retries", 0)
        client = openai.OpenAI(base_url=base_url, api_key=api_key, **kwargs)
        self._clients.append(client)
        return client

    async def aclose(self) -> None:
        """Close the clients handed out (the rollout calls this when the episode ends)."""
        for client in self._clients:
            try:
                result = client.close()
                if hasattr(result, "__await__"):
                    await result
            except Exception:  # a client the workflow already closed, or broke: nothing to release
                pass
        self._clients.clear()

    def _endpoint(self, agent: str) -> tuple[str, str]:
        if agent in self._external:
            base_url, _model, api_key = self._external[agent]
            return base_url, api_key
        return self._base_url, self.api_key_for(agent)
