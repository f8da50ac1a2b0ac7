"""`ajet serve`: an engine behind an OpenAI-compatible HTTP server that speaks vLLM's protocol.

`create_serve_app(engine, tokenizer, model_name)` serves `GET /v1/models`, `POST /v1/completions`
(ajet/serving/completions.py: token-id or text prompts, answered like vLLM's OpenAI server, so the
`remote` engine works against it exactly as against vLLM) and `GET /health`. Bad input gets an
OpenAI-style error body with status 400 (404 for an unknown model or route, 405 for a wrong method,
408 for a body that does not arrive, 413 for an oversized body), never a 500. A client that
disconnects cancels its generation.

With `enable_lora=True` (`ajet serve --enable-lora`) it also serves vLLM's runtime LoRA endpoints,
`/v1/load_lora_adapter` and `/v1/unload_lora_adapter` (ajet/serving/lora.py); a request whose `model`
names a loaded adapter runs with it. With `api_key` every route but /health and /metrics needs
`Authorization: Bearer KEY` (ajet/serving/auth.py).

`main(model, ...)` loads the `hf` engine and runs uvicorn; `ajet serve` (ajet/cli.py) is its command
line. The chat endpoint (`/v1/chat/completions`, ajet/serving/chat.py) is the gateway's, mounted
with `chat=`; a chat request without `max_tokens` generates at most `default_max_tokens`.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import Any, Sequence

from fastapi import APIRouter, FastAPI
from fastapi.responses import Response

from ajet.engine.base import Engine
from ajet.gateway.request import BODY_TIMEOUT_S, SERVE_MAX_TOKENS, install_error_handlers
from ajet.loopback import is_loopback
from ajet.serving.auth import ApiKeyMiddleware, check_exposure
from ajet.serving.chat import ServeChat
from ajet.serving.completions import Completions
from ajet.serving.lora import LoraAdapters
from ajet.serving.metrics import mount_metrics

log = logging.getLogger(__name__)


def create_serve_app(
    engine: Engine,
    tokenizer: Any,
    model_name: str,
    *,
    chat: ServeChat | None = None,
    extra_routers: Sequence[APIRouter] = (),
    aliases: Sequence[str] = (),
    max_request_bytes: int = 4_000_000,
    tokens_as_ids: bool = True,
    body_timeout_s: float = BODY_TIMEOUT_S,
    enable_lora: bool = False,
    api_key: str | None = None,
) -> FastAPI:
    """The FastAPI app of `ajet serve`. chat: the chat endpoint, mounted and given this app's adapters,
    so completions, chat and /v1/models route and list the same names. `extra_routers` are included as
    they are.

    aliases: other names accepted in the request's `model` field. tokens_as_ids: write logprob tokens
    as "token_id:N" unless a request sets `return_tokens_as_token_ids: false`. body_timeout_s: a request
    body that has not fully arrived by then gets 408 and its connection is closed. enable_lora: serve
    /v1/load_lora_adapter and /v1/unload_lora_adapter (the engine needs `load_adapter`; off: they answer 404).
    api_key: required as `Authorization: Bearer KEY` on every route but /health and /metrics.
    """
    lora = LoraAdapters(engine, model_name, {model_name, *aliases}, enabled=enable_lora,
                        max_request_bytes=max_request_bytes, body_timeout_s=body_timeout_s)
    completions = Completions(engine, tokenizer, model_name, lora, max_request_bytes=max_request_bytes,
                              tokens_as_ids=tokens_as_ids, body_timeout_s=body_timeout_s)
    max_positions = getattr(engine, "max_positions", None)

    async def models() -> dict[str, Any]:
        card: dict[str, Any] = {"id": model_name, "object": "model", "created": 0, "owned_by": "ajet",
                                "root": model_name, "parent": None}
        if max_positions:
            card["max_model_len"] = max_positions
        return {"object": "list", "data": [card, *lora.cards()]}

    async def health() -> Response:
        return Response(status_code=200)  # vLLM's liveness probe: 200, empty body

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await engine.start()
        try:
            yield
        finally:
            await engine.close()

    app = FastAPI(title="ajet serve", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.engine, app.state.tokenizer, app.state.model_name = engine, tokenizer, model_name
    app.state.lora = lora
    if chat is not None:
        chat.lora = lora
    router = APIRouter()
    router.add_api_route("/v1/models", models, methods=["GET"])
    router.add_api_route("/v1/completions", completions.handle, methods=["POST"])
    router.add_api_route("/health", health, methods=["GET"])
    lora.mount(router)
    app.include_router(router)  # first: its /v1/models (with the adapters) answers, not the chat router's
    for extra in [*([chat.router] if chat is not None else []), *extra_routers]:
        app.include_router(extra)
    if api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=api_key)  # inside the metrics middleware: 401s are counted
    mount_metrics(app, engine, model_name)  # GET /metrics: Prometheus, vLLM's metric names
    install_error_handlers(app)
    return app


def main(
    model: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    chat_template: str | None = None,
    max_batch_size: int = 16,
    *,
    device: str = "auto",
    dtype: str = "auto",
    served_model_name: str | None = None,
    default_max_tokens: int = SERVE_MAX_TOKENS,
    max_request_bytes: int = 4_000_000,
    body_timeout_s: float = BODY_TIMEOUT_S,
    seed: int = 0,
    log_level: str = "info",
    enable_lora: bool = False,
    api_key: str | None = None,
) -> None:
    """Serve `model` ('smollm2-135m-instruct', 'tiny-random', a folder or a hub id) with the hf engine.
    `ajet serve --help` (ajet/cli.py) describes every argument."""
    check_exposure(host, enable_lora, api_key)  # before minutes of model loading
    import uvicorn

    from ajet.engine.hf import HFEngine
    from ajet.models import read_chat_template, resolve_model_path

    path = resolve_model_path(model)
    name = served_model_name or model
    engine = HFEngine.from_pretrained(path, device=device, dtype=dtype, max_batch_size=max_batch_size,
                                      model_name=name, seed=seed)
    # The same chat rendering, tool-call parsing and OpenAI errors as the training gateway; no episode keys.
    chat = ServeChat(engine, engine.tokenizer, model_name=name, chat_template=read_chat_template(chat_template),
                     default_max_tokens=default_max_tokens, max_request_bytes=max_request_bytes,
                     body_timeout_s=body_timeout_s)
    app = create_serve_app(engine, engine.tokenizer, name, chat=chat, aliases=[path],
                           max_request_bytes=max_request_bytes, body_timeout_s=body_timeout_s, enable_lora=enable_lora,
                           api_key=api_key)
    app.state.chat_template = chat_template
    _log_to_stderr(log_level)  # adapter loads and engine failures show next to uvicorn's lines
    if not api_key and not is_loopback(host):
        log.warning("serving on %s without an API key: anyone who can reach port %d can use the model "
                    "(set --api-key or VLLM_API_KEY)", host, port)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def _log_to_stderr(level: str) -> None:
    ajet_log = logging.getLogger("ajet")
    if not ajet_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        ajet_log.addHandler(handler)
    ajet_log.setLevel(level.upper())
