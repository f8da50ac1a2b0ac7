"""The `chat_api` engine: any OpenAI-compatible `/v1/chat/completions` endpoint as the model.

A hosted model (or vLLM's chat server, or `ajet serve`) answers chat requests but hands out no
token ids, so this engine can generate data (`ajet generate`), act as a teacher or judge, and be
evaluated (`ajet eval engine.type=chat_api ...`), but never be trained: `generate()` (token ids in,
token ids out) raises a ConfigError, and so does `ajet` training with `engine.type=chat_api`.

The rollout stack puts a passthrough gateway in front of it (`ajet.gateway.passthrough`): each
episode's chat requests are forwarded with their messages, tools, tool_choice and response_format,
and the reply is returned as the endpoint sent it (episodes are recorded as messages, without tokens).

Transient failures (connection errors, timeouts, HTTP 429 and 5xx) are retried `max_retries`
times with a short backoff; a 4xx is the request's fault and is raised at once as a GatewayError
carrying the endpoint's status and message; a reply that is not a chat completion is an EngineError
quoting what came back.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.errors import ConfigError, EngineError, GatewayError

TRAIN_REFUSAL = (
    "engine.type=chat_api talks to a chat endpoint that returns text, not token ids, so it cannot be "
    "trained (ajet trains exactly the tokens the engine generated). Use it for `ajet eval` and "
    "`ajet generate`; to train, set engine.type=hf (in-process) or engine.type=remote (a vLLM-style "
    "completions server)"
)


class ChatAPIEngine(Engine):
    """Chat completions over HTTP. `await engine.chat(body)` returns the endpoint's JSON reply."""

    #: The rollout stack serves this engine through the passthrough gateway (no tokenizer, no tokens).
    chat_api = True

    def __init__(self, base_url: str, *, model: str | None = None, api_key: str = "EMPTY",
                 timeout_s: float = 300.0, max_retries: int = 2) -> None:
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"engine.base_url = {base_url!r}: the chat_api engine needs an http(s):// URL "
                              "of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_name = model or "chat-api"
        self.api_key = api_key or "EMPTY"
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Open the HTTP client, and ask the endpoint for its model name when none was configured."""
        self._http()
        if self.model is None:
            self.model = await self._first_model()
            self.model_name = self.model

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        raise ConfigError(TRAIN_REFUSAL)

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to /chat/completions (its `model` set to this engine's) and return the reply."""
        if self.model is None:
            await self.start()
        payload = {**body, "model": self.model, "stream": False}
        reply = await self._post("/chat/completions", payload)
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)
                and isinstance(choices[0].get("message"), dict)):
            raise EngineError(f"{self.base_url}/chat/completions did not return a chat completion "
                              f"(no choices[0].message): {json.dumps(reply)[:300]}")
        return reply

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:  # a client is bound to its event loop
            self._client = httpx.AsyncClient(timeout=self.timeout_s,
                                             headers={"Authorization": f"Bearer {self.api_key}"})
            self._client_loop = loop
        return self._client

    async def _first_model(self) -> str:
        reply = await self._get("/models")
        data = reply.get("data") if isinstance(reply, dict) else None
        if not (isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("id")):
            raise EngineError(f"{self.base_url}/models lists no model; set engine.model (or the teacher's model)")
        return str(data[0]["id"])

    async def _get(self, path: str) -> Any:
        return await self._request("GET", path, None)

    async def _post(self, path: str, payload: dict[str, Any]) -> Any:
        return await self._request("POST", path, payload)

    async def _request(self, method: str, path: str, payload: dict[str, Any] | None) -> Any:
        url = self.base_url + path
        problems: list[str] = []
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(min(4.0, 0.5 * 2 ** (attempt - 1)))
            try:
                response = await self._http().request(method, url, json=payload)
            except httpx.TimeoutException:
                problems.append(f"no answer within {self.timeout_s:g} s")
                continue
            except httpx.HTTPError as exc:
                problems.append(f"{type(exc).__name__}: {exc}")
                continue
            if response.status_code == 429 or response.status_code >= 500:
                problems.append(f"HTTP {response.status_code}: {response.text[:200]}")
                continue
            if response.status_code >= 400:
                raise GatewayError(f"{url} refused the request (HTTP {response.status_code}): "
                                   f"{_error_text(response)}", status=response.status_code,
                                   code="upstream_error")
            try:
                return response.json()
            except ValueError:
                raise EngineError(f"{url} answered HTTP {response.status_code} with a body that is not JSON: "
                                  f"{response.text[:300]!r}") from None
        raise EngineError(f"{url} failed after {self.max_retries + 1} attempt(s): {'; '.join(problems)}")


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:300]
    return json.dumps(body)[:300]
