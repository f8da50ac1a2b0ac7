"""`POST /v1/chat/completions` is answered straight from ASGI (ajet.gateway.server.GatewayApp), not
through FastAPI's stack: the answers (status, headers, body) equal those of the same gateway mounted
as a plain FastAPI app, for a success, each kind of refusal and an engine that crashes; a client that
leaves still cancels its generation; the body read timeout works without asyncio.timeout (3.10)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from fastapi import FastAPI

from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.engine.replay import ReplayEngine
from ajet.gateway import request as gateway_request
from ajet.gateway.server import Gateway, GatewayApp, GatewayServer, create_app
from ajet.gateway.request import install_error_handlers
from tests.unit.gw_helpers import open_episode
from tests.unit.test_tracker import CALL, TOOLS

USER = [{"role": "user", "content": "Houston?"}]


class _Crashing(Engine):
    """An engine failing as no engine should: not with an AjetError."""

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        raise RuntimeError("boom")


class _Slow(Engine):
    """Never finishes a generation; counts the ones its callers cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = 0

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")


def _fastapi_app(gateway: Gateway) -> FastAPI:
    """The gateway as create_app built it before the fast path: every route through FastAPI."""
    app = FastAPI(title="ajet gateway", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(gateway.router)
    install_error_handlers(app)
    return app


def _comparable(response: httpx.Response) -> tuple:
    """Status, the headers a client reads, and the body with its random ids and clock blanked."""
    text = response.text
    if response.headers.get("content-type", "").startswith("application/json") and "chatcmpl-" in text:
        body = response.json()
        if "id" in body:
            body["id"], body["created"] = "chatcmpl-x", 0
            for call in body["choices"][0]["message"].get("tool_calls") or []:
                call["id"] = "call_x"
        text = json.dumps(body)
    elif "chatcmpl-" in text:  # server-sent events: blank the ids the same way
        lines = []
        for line in text.split("\n"):
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                chunk["id"], chunk["created"] = "chatcmpl-x", 0
                for choice in chunk.get("choices", []):
                    for call in choice["delta"].get("tool_calls") or []:
                        call["id"] = "call_x"
                line = "data: " + json.dumps(chunk)
            lines.append(line)
        text = "\n".join(lines)
    headers = {k: v for k, v in response.headers.items() if k in ("content-type", "content-length", "connection")}
    if "content-length" in headers and text != response.text:
        del headers["content-length"]  # the blanked ids change the length
    return response.status_code, headers, text


async def _answers(app_of, engine, tokenizer) -> list[tuple]:
    gateway = Gateway(engine, tokenizer, max_request_bytes=4096)
    server = GatewayServer(app_of(gateway))
    url = await server.start()
    _, issue = open_episode(gateway)
    key = {"Authorization": f"Bearer {issue('assistant')}"}
    requests = [
        ("POST", "/chat/completions", key, {"model": "m", "messages": USER, "tools": TOOLS}),
        ("POST", "/chat/completions", key, {"model": "m", "messages": USER, "tools": TOOLS, "stream": True}),
        ("POST", "/chat/completions", key, {"messages": USER, "logprobs": True}),
        ("POST", "/chat/completions", key, b"{not json"),
        ("POST", "/chat/completions", key, {"messages": USER, "temperature": -1}),
        ("POST", "/chat/completions", key, {"messages": [{"role": "user", "content": "x" * 10000}]}),
        ("POST", "/chat/completions", {"Authorization": "Bearer ajet-forged"}, {"messages": USER}),
        ("POST", "/chat/completions", {}, {"messages": USER}),
        ("GET", "/chat/completions", key, None),
        ("POST", "/chat/completions/", key, {"messages": USER}),
        ("POST", "/nowhere", key, {"messages": USER}),
        ("GET", "/models", key, None),
    ]
    out = []
    try:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            for method, path, headers, body in requests:
                content = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
                out.append(_comparable(await http.request(method, path, headers=headers, content=content)))
    finally:
        await server.stop()
    return out


async def test_the_fast_path_answers_as_fastapi_does(tiny_tokenizer):
    def engine():
        return ReplayEngine([{"text": CALL}, {"text": "It is 3.1 USD."}], tiny_tokenizer, repeat=True)

    fast = await _answers(create_app, engine(), tiny_tokenizer)
    slow = await _answers(_fastapi_app, engine(), tiny_tokenizer)
    assert [a[0] for a in fast] == [200, 200, 200, 400, 400, 413, 401, 401, 405, 307, 404, 200]
    assert fast == slow


async def test_an_engine_crash_is_a_logged_500_with_an_openai_body(tiny_tokenizer, caplog):
    fast = await _answers(create_app, _Crashing(), tiny_tokenizer)
    slow = await _answers(_fastapi_app, _Crashing(), tiny_tokenizer)
    status, _, body = fast[0]
    assert status == 500
    assert json.loads(body)["error"] == {"message": "internal error: RuntimeError: boom", "type": "server_error",
                                         "param": None, "code": "internal_error"}
    assert fast[:3] == slow[:3]
    assert "unexpected error on /v1/chat/completions" in caplog.text


async def test_a_client_that_leaves_cancels_its_generation(tiny_tokenizer):
    engine = _Slow()
    gateway = Gateway(engine, tiny_tokenizer)
    app = create_app(gateway)
    assert isinstance(app, GatewayApp)
    server = GatewayServer(app)
    url = await server.start()
    try:
        session, issue = open_episode(gateway)
        async with httpx.AsyncClient(base_url=url) as http:
            call = asyncio.ensure_future(http.post("/chat/completions", json={"messages": USER},
                                                   headers={"Authorization": f"Bearer {issue('assistant')}"}))
            await asyncio.wait_for(engine.started.wait(), 10)
            assert gateway.busy._holders == 1
            call.cancel()  # the client gives up: its connection closes
            with pytest.raises(asyncio.CancelledError):
                await call
        for _ in range(200):
            if engine.cancelled:
                break
            await asyncio.sleep(0.05)
        assert engine.cancelled == 1
        assert gateway.busy._holders == 0 and session.model_clock._holders == 0  # the clocks run again
        assert session.tracker.calls == []  # nothing recorded for the call that was never answered
    finally:
        await server.stop()


async def test_the_body_timeout_without_asyncio_timeout(monkeypatch):
    """Python 3.10 has no asyncio.timeout: the read falls back to asyncio.wait_for."""
    monkeypatch.delattr(asyncio, "timeout")
    assert await gateway_request._within(asyncio.sleep(0, "body"), 1.0) == "body"
    with pytest.raises(asyncio.TimeoutError):
        await gateway_request._within(asyncio.sleep(5), 0.05)


def test_the_text_decoder_gives_what_tokenizer_decode_gives(tiny_tokenizer):
    """The gateway decodes replies with the Rust tokenizer directly when the transformers wrapper would
    add nothing; the text is the wrapper's, special tokens and all. A tokenizer that cleans up spaces
    keeps the wrapper."""
    import random

    from ajet.gateway.server import _text_decoder

    decode = _text_decoder(tiny_tokenizer)
    assert decode.__code__.co_freevars == ("backend",)  # the direct path is taken for this tokenizer
    rng = random.Random(0)
    specials = sorted(tiny_tokenizer.all_special_ids)
    for _ in range(500):
        ids = [rng.choice(specials) if rng.random() < 0.1 else rng.randrange(len(tiny_tokenizer))
               for _ in range(rng.randrange(0, 40))]
        assert decode(ids) == tiny_tokenizer.decode(ids, skip_special_tokens=False), ids

    class Cleaning(type(tiny_tokenizer)):
        pass

    cleaning = Cleaning.__new__(Cleaning)
    cleaning.__dict__.update(tiny_tokenizer.__dict__)
    cleaning.clean_up_tokenization_spaces = True
    assert _text_decoder(cleaning).__code__.co_freevars == ("tokenizer",)
