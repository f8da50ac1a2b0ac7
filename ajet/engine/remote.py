"""The `remote` engine: an OpenAI-compatible completions server that takes token-id prompts.

It speaks the protocol of vLLM's OpenAI server (and of `ajet serve`): POST {base_url}/completions with
`"prompt": [token ids]` and vLLM's extras, and reads the generated ids from `choices[0].token_ids`
(vLLM >= 0.10.2, `return_token_ids`) or, failing that, from `"token_id:N"` strings in
`logprobs.tokens` (`return_tokens_as_token_ids`, or the server flag `--return-tokens-as-token-ids`).
Logprobs come from `logprobs.token_logprobs`. Nothing is ever re-tokenized: a server that returns
neither form of ids is an error, because training must see the exact tokens. See docs/engines.md
for the `vllm serve` command.

LoRA: `load_adapter(name, path)` / `unload_adapter(name)` call vLLM's runtime LoRA endpoints
(`/v1/load_lora_adapter`, `/v1/unload_lora_adapter`; `ajet serve --enable-lora` has them too). A
request names its adapter as the `model` of the completion (how vLLM routes to a LoRA):
`SamplingParams.adapter`, else `engine.adapter` (what the trainer sets after publishing new weights),
else the base model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from ajet.engine.base import Engine, FinishReason, Generation, SamplingParams
from ajet.errors import EngineError

_RETRY_STATUSES = {502, 503, 504}
_TOKEN_ID_PREFIX = "token_id:"


class RemoteEngine(Engine):
    """Generate through `{base_url}/completions`; `model=None` takes the first of `{base_url}/models`.

    Connection failures and 502/503/504 answers are retried `retries` times with exponential backoff;
    any other failure raises EngineError carrying the server's error message.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str = "EMPTY",
        timeout_s: float = 300,
        tokenizer: Any = None,
        *,
        max_connections: int = 256,
        retries: int = 3,
        retry_backoff_s: float = 0.5,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.tokenizer = tokenizer
        self.max_connections = max_connections
        self.retries = retries
        self.retry_backoff_s = retry_backoff_s
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._model_lock: asyncio.Lock | None = None
        self.adapter: str | None = None  # the LoRA adapter requests name when theirs names none; None: the base
        self.weights_version = 0  # the trainer bumps it after an update, as on HFEngine (new weights reach
        # the server as a new adapter: ajet/backbone/debug/publish.py)

    @property
    def model_name(self) -> str:  # type: ignore[override]
        return self.model or "remote"

    async def start(self) -> None:
        self._http()
        await self._resolve_model()

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        if sampling.max_tokens <= 0:
            return Generation(token_ids=[], logprobs=[], finish_reason="length")
        if not prompt_ids:
            raise EngineError("the prompt is empty; send at least one token id")
        model = sampling.adapter or self.adapter or await self._resolve_model()
        payload = self.payload(prompt_ids, sampling, model)
        body = await self._request("POST", "/completions", payload)
        return parse_completion(body, f"{self.base_url}/completions")

    @staticmethod
    def payload(prompt_ids: list[int], sampling: SamplingParams, model: str) -> dict[str, Any]:
        """The request body: OpenAI completions fields plus vLLM's sampling and token-id extras."""
        body: dict[str, Any] = {
            "model": model,
            "prompt": list(prompt_ids),
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "logprobs": 1,  # the sampled token's logprob (and at most one alternative)
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            "include_stop_str_in_output": False,
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.stop_token_ids:
            body["stop_token_ids"] = list(sampling.stop_token_ids)
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        return body

    # ------------------------------------------------------------------ LoRA
    async def load_adapter(self, name: str, path: str) -> None:
        """Have the server load the peft adapter in folder `path` (a path on the server's filesystem) as
        model `name`. Raises EngineError naming the path and what the server needs when it refuses."""
        try:
            await self._request("POST", "/load_lora_adapter", {"lora_name": name, "lora_path": path}, text=True)
        except EngineError as exc:
            raise EngineError(
                f"the server refused to load LoRA adapter {name!r} from {path!r}: {exc}. The server reads that "
                "folder itself, so it must run on this machine or see the same filesystem at the same path, "
                "with runtime LoRA loading on (vLLM: VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora, "
                "--max-lora-rank >= model.lora.rank; ajet serve: --enable-lora)") from exc

    async def unload_adapter(self, name: str) -> None:
        """Have the server drop adapter `name`; EngineError (HTTP 404) when it has no such adapter."""
        await self._request("POST", "/unload_lora_adapter", {"lora_name": name}, text=True)

    # ------------------------------------------------------------------ HTTP
    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        # An httpx pool belongs to one event loop; a new loop (a new asyncio.run) gets a new client.
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers={"Authorization": f"Bearer {self.api_key}"},
                timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
                limits=httpx.Limits(max_connections=self.max_connections,
                                    max_keepalive_connections=self.max_connections),
            )
            self._client_loop = loop
            self._model_lock = asyncio.Lock()
        return self._client

    async def _resolve_model(self) -> str:
        if self.model is not None:
            return self.model
        self._http()
        async with self._model_lock:  # type: ignore[union-attr]
            if self.model is None:
                body = await self._request("GET", "/models", None)
                models = body.get("data") if isinstance(body, dict) else None
                if not models or not isinstance(models[0], dict) or "id" not in models[0]:
                    raise EngineError(f"{self.base_url}/models lists no model; set engine.model explicitly")
                self.model = str(models[0]["id"])
        return self.model

    async def _request(self, method: str, path: str, payload: dict[str, Any] | None, text: bool = False) -> Any:
        """The JSON answer (text=True: the body as text, as vLLM's LoRA endpoints answer)."""
        client = self._http()
        url = f"{self.base_url}{path}"
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = await client.request(method, path, json=payload)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                if last:
                    raise EngineError(f"cannot reach {url} after {self.retries + 1} attempts ({exc!r}); is the "
                                      "server running and engine.base_url right (it ends with /v1)?") from exc
            except httpx.TimeoutException as exc:
                raise EngineError(f"{url} did not answer within {self.timeout_s} s "
                                  "(engine.request_timeout_s)") from exc
            else:
                if response.status_code in _RETRY_STATUSES and not last:
                    pass
                elif response.status_code >= 400:
                    raise EngineError(f"{url} answered HTTP {response.status_code}: {_error_message(response)}")
                elif text:
                    return response.text
                else:
                    try:
                        return response.json()
                    except ValueError as exc:
                        raise EngineError(f"{url} answered with a body that is not JSON: "
                                          f"{response.text[:200]!r}") from exc
            await asyncio.sleep(self.retry_backoff_s * 2**attempt)
        raise AssertionError("unreachable")  # the last attempt returns or raises


def parse_completion(body: Any, where: str = "the server") -> Generation:
    """Token ids, logprobs and finish reason of `choices[0]` of a completions response."""
    try:
        choice = body["choices"][0]
    except (KeyError, IndexError, TypeError) as exc:
        raise EngineError(f"{where} answered without choices: {str(body)[:200]}") from exc
    logprobs = choice.get("logprobs") or {}
    ids = choice.get("token_ids")
    if ids is None:
        ids = _ids_from_tokens(logprobs.get("tokens"), where)
    values = logprobs.get("token_logprobs")
    if values is None:
        raise EngineError(f"{where} returned no logprobs; ajet sends \"logprobs\": 1 - does the server "
                          "support logprobs on /completions?")
    if len(values) != len(ids):
        raise EngineError(f"{where} returned {len(ids)} token ids but {len(values)} logprobs")
    finish = choice.get("finish_reason")
    if finish not in ("stop", "length"):
        raise EngineError(f"{where} finished a completion with {finish!r} (expected 'stop' or 'length')")
    reason: FinishReason = finish
    return Generation(token_ids=[int(i) for i in ids],
                      logprobs=[float(v) if v is not None else 0.0 for v in values], finish_reason=reason)


def _ids_from_tokens(tokens: Any, where: str) -> list[int]:
    if isinstance(tokens, list) and all(isinstance(t, str) and t.startswith(_TOKEN_ID_PREFIX) for t in tokens):
        return [int(t[len(_TOKEN_ID_PREFIX):]) for t in tokens]
    raise EngineError(
        f"{where} returned neither choices[0].token_ids nor 'token_id:N' logprob tokens, so the generated "
        "token ids are unknown (re-tokenizing text would break token-exact training). Use vLLM >= 0.10.2, "
        "or start it with --return-tokens-as-token-ids.")


def _error_message(response: httpx.Response) -> str:
    """The message of an OpenAI-style error body ({"error": {...}}), vLLM's older flat form, or the text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for key in ("message", "detail", "error"):
            if body.get(key):
                return str(body[key])
    return str(body)[:500]
