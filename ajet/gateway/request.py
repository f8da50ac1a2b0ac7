"""The one request reader of the gateway and `ajet serve`: body size and read-time limits, JSON with a
nesting limit, sampling parameters checked at the door, OpenAI-style error bodies, and generation
cancelled when the client goes away.

    read_json(request, max_bytes, timeout_s)   413 over max_bytes, 408 when the body does not arrive
                                               within timeout_s, 400 for bad JSON / too deep / bad Unicode
    validate(Model, body)                      400 naming the first field the request model refuses
    check_sampling(...)                        400 naming the parameter (seed, temperature, top_p, stop)
    check_context_length(prompt, max_tokens)   400 context_length_exceeded when they outgrow the model
    refuse_unsupported(req, neutral)           400 naming an option the engines cannot apply, set off neutral
    until_disconnected(request, work)          awaits work; cancels it when the client disconnects
    failure_response(exc)                      the answer for a refused request, a client gone, an engine failure
    install_error_handlers(app)                404 / 405 / 500 as {"error": {...}} like OpenAI's
    crash_response(path, exc)                  that 500, for a route answered outside FastAPI's handlers
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ajet import safejson
from ajet.config.schema import MAX_TEMPERATURE, MIN_TEMPERATURE
from ajet.errors import AjetError, GatewayError

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

BODY_TIMEOUT_S = 30.0  # a local client sends a 4 MB body in milliseconds; a stalled one is dropped
SERVE_MAX_TOKENS = 512  # `ajet serve`: max_tokens of a chat request that names none (not the context limit)
SEED_RANGE = (-(2**63), 2**63 - 1)  # a 64-bit integer; torch.Generator.manual_seed takes no more
MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 256


def openai_error(status: int, message: str, code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None) -> JSONResponse:
    """An OpenAI-style error body: {"error": {"message", "type", "param", "code"}}."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code or kind}}
    return JSONResponse(body, status_code=status, headers=headers)


def error_response(exc: GatewayError) -> JSONResponse:
    """The response for a refused request; a 408 also closes the connection (its body never came)."""
    headers = {"connection": "close"} if exc.status == 408 else None
    return openai_error(exc.status, str(exc), exc.code, exc.param, headers)


async def read_json(request: Request, *, max_bytes: int, timeout_s: float = BODY_TIMEOUT_S,
                    max_depth: int = safejson.MAX_DEPTH) -> Any:
    """The request body as parsed JSON; raises GatewayError (413, 408, 400) for what cannot be used."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise GatewayError(f"request body is {declared} bytes; the limit is {max_bytes}", status=413,
                           code="request_too_large")

    async def receive_all() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise GatewayError(f"request body exceeds the limit of {max_bytes} bytes", status=413,
                                   code="request_too_large")
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        body = await _within(receive_all(), timeout_s)
    except asyncio.TimeoutError:
        raise GatewayError(f"the request body did not arrive within {timeout_s:g} s "
                           f"(content-length {declared or 'not given'}); send the whole body at once",
                           status=408, code="request_timeout") from None
    try:
        return safejson.loads(body, max_depth=max_depth)
    except safejson.JSONProblem as exc:
        raise GatewayError(f"request body is not usable JSON: {exc}", code="invalid_json") from None


def validate(model: type[M], body: Any, unions: dict[str, str] | None = None) -> M:
    """`model.model_validate(body)`, or GatewayError(400) naming the first field at fault. unions:
    {field: message} for union-typed fields, where pydantic's error about one branch would mislead."""
    if not isinstance(body, dict):
        raise bad_request(f"request body must be a JSON object, got {type(body).__name__}", None)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        field = where.split(".")[0]
        if where != field and field in (unions or {}):
            raise bad_request(f"invalid request: {unions[field]}", field) from None  # type: ignore[index]
        raise bad_request(f"invalid request: {where}: {first['msg']} (got {str(first.get('input'))[:80]})",
                          where) from None


def check_sampling(*, temperature: float | None = None, top_p: float | None = None, seed: int | None = None,
                   stop: str | list[str] | None = None) -> None:
    """Refuse sampling parameters an engine cannot honour (400, naming the parameter). Types and
    simple bounds are the request model's job; these are the values that pass a type check but
    would fail, or poison, a batch inside the engine."""
    if temperature is not None:
        if not math.isfinite(temperature) or temperature < 0:
            raise bad_request(f"temperature={temperature!r} must be a finite number >= 0", "temperature")
        if 0 < temperature < MIN_TEMPERATURE:
            raise bad_request(f"temperature={temperature!r} is too small to sample with; use 0 for greedy decoding or "
                       f"a value >= {MIN_TEMPERATURE:g}", "temperature")
        if temperature > MAX_TEMPERATURE:
            raise bad_request(f"temperature={temperature!r} is above the limit of {MAX_TEMPERATURE:g}", "temperature")
    if top_p is not None and not (math.isfinite(top_p) and 0 < top_p <= 1):
        raise bad_request(f"top_p={top_p!r} must be in (0, 1]", "top_p")
    if seed is not None and not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise bad_request(f"seed={seed} is outside the 64-bit range [-2**63, 2**63 - 1] a random generator takes",
                   "seed")
    stops = stop_list(stop)
    if len(stops) > MAX_STOP_STRINGS:
        raise bad_request(f"stop has {len(stops)} strings; at most {MAX_STOP_STRINGS} are allowed", "stop")
    long = [s for s in stops if len(s) > MAX_STOP_CHARS]
    if long:
        raise bad_request(f"a stop string is {len(long[0])} characters; at most {MAX_STOP_CHARS} are allowed", "stop")


def stop_list(stop: str | list[str] | None) -> list[str]:
    """A request's `stop` (one string, a list, or none) as a list."""
    return [stop] if isinstance(stop, str) else list(stop or [])


def check_context_length(prompt_tokens: int, max_tokens: int, limit: int | None, *, source: str = "prompt") -> None:
    """vLLM's rule for completions and chat alike: the prompt plus the requested max_tokens must fit the
    model's context (`limit`; None: unknown, nothing checked), else 400 `context_length_exceeded`. A
    huge max_tokens (1e12, 2**70) is refused here instead of generating to the context limit."""
    if limit is not None and prompt_tokens + max(max_tokens, 1) > limit:
        what = "the prompt" if source == "prompt" else "the messages"
        raise GatewayError(
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in {what}, {max_tokens} in the completion). "
            f"Reduce {what} or max_tokens.", code="context_length_exceeded")


def refuse_unsupported(req: BaseModel, neutral: dict[str, tuple[Any, ...]]) -> None:
    """Options the engines cannot apply (penalties, logit_bias, ...), for completions and chat alike:
    each field named in `neutral` is accepted only at one of its neutral values, else a 400 naming it,
    never silently not applied."""
    for name, values in neutral.items():
        value = getattr(req, name)
        if value not in values:
            raise bad_request(f"{name}={value!r} is not supported by ajet's engines; leave it out", name)


def bad_request(message: str, param: str | None) -> GatewayError:
    """A 400 with OpenAI's `invalid_request_error` code; `param` names the request field at fault."""
    return GatewayError(message, status=400, code="invalid_request_error", param=param)


class ClientGone(Exception):
    """The client disconnected before its answer was ready; its work was cancelled."""


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it if the client disconnects first (then raise ClientGone). Call only
    after the body was read: from then on the only message the server can receive is the disconnect.

    The work runs in the handler's own task, and one watcher task cancels that task when the
    disconnect comes: a second task for the work, and asyncio.wait over both, cost ~40 us a call."""
    handler = asyncio.current_task()
    state = {"running": True, "gone": False}

    def on_disconnect(watcher: asyncio.Future) -> None:
        # Scheduled by the loop, maybe after the work already returned: then nothing is cancelled.
        if state["running"] and not watcher.cancelled() and watcher.exception() is None:
            state["gone"] = True
            handler.cancel()  # type: ignore[union-attr]

    watcher = asyncio.ensure_future(_disconnect(request))
    watcher.add_done_callback(on_disconnect)
    try:
        return await work
    except asyncio.CancelledError:
        if not state["gone"]:
            raise  # cancelled from outside (server shutdown): the work went down with it
        if hasattr(handler, "uncancel"):
            handler.uncancel()  # type: ignore[union-attr]  # ours, answered here: not pending any more
        raise ClientGone() from None
    finally:
        state["running"] = False
        watcher.cancel()


async def _within(work: Awaitable[T], timeout_s: float) -> T:
    """`asyncio.wait_for(work, timeout_s)` without a task of its own on Python >= 3.11 (the body of a
    local request has nearly always arrived by now, so this is the common case to keep cheap)."""
    timeout = getattr(asyncio, "timeout", None)
    if timeout is None:  # Python 3.10
        return await asyncio.wait_for(work, timeout_s)
    async with timeout(timeout_s):
        return await work


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def gone_response() -> Response:
    """What a handler returns for a client that left (it is never read): 499, nginx's 'client closed'."""
    return Response(status_code=499)


def failure_response(exc: AjetError | ClientGone) -> Response:
    """What a handler answers when its request failed: the refusal (GatewayError), 499 for a client that
    left, 503 `engine_error` for any other ajet error (the engine failed; logged)."""
    if isinstance(exc, GatewayError):
        return error_response(exc)
    if isinstance(exc, ClientGone):
        return gone_response()
    log.warning("engine failed: %s", exc)
    return openai_error(503, f"the engine failed: {exc}", "engine_error")


def install_error_handlers(app: FastAPI) -> None:
    """OpenAI-style bodies for unknown routes (404), wrong methods (405) and anything unexpected (500)."""

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return openai_error(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", code)

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, exc: ClientDisconnect) -> Response:
        return gone_response()

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        return crash_response(request.url.path, exc)


def crash_response(path: str, exc: Exception) -> JSONResponse:
    """The 500 for an exception nothing else handled (logged with its traceback)."""
    log.exception("unexpected error on %s", path, exc_info=exc)
    return openai_error(500, f"internal error: {type(exc).__name__}: {exc}", "internal_error")
