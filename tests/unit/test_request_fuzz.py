"""Fuzzing the request schema: valid OpenAI requests, mutated by hypothesis (a field replaced by a value
of another type, a huge or non-finite number, a lone surrogate, a nested structure; a field dropped; an
unknown field added), sent over real HTTP on 127.0.0.1 to the gateway and to `ajet serve` with the
tiny-random model. Whatever comes in, the answer is never a 500, and every error has an OpenAI body.

The engine is the real tiny model with completions capped at 4 tokens (`_Capped`): what is fuzzed is
the request layer, and a mutated `max_tokens` must not turn the test into minutes of decoding.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.engine.hf import HFEngine
from ajet.gateway.server import Gateway, GatewayServer, create_app
from ajet.serving.app import create_serve_app
from tests.unit.gw_helpers import open_episode

TOOLS = [{"type": "function", "function": {"name": "get_price", "description": "price of gas",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
CHAT_BASES = [
    {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0.7, "seed": 3},
    {"messages": [{"role": "system", "content": "be brief"},
                  {"role": "user", "content": [{"type": "text", "text": "price in Houston?"}]},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "c1", "type": "function", "function": {"name": "get_price", "arguments": '{"city": "Houston"}'}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "3.1"}],
     "tools": TOOLS, "tool_choice": "auto", "top_p": 0.9, "stop": ["\n\n"]},
    {"messages": [{"role": "user", "content": "stream it"}], "stream": True, "stream_options": {"include_usage": True},
     "max_completion_tokens": 2, "n": 1},
]
COMPLETION_BASES = [
    {"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 3, "temperature": 1.0, "seed": 5, "logprobs": 1},
    {"prompt": "The capital of France is", "max_tokens": 2, "n": 2, "stop": ["."], "stop_token_ids": [2]},
    {"prompt": [[1, 2], [3, 4, 5]], "max_tokens": 2, "top_p": 0.5, "return_token_ids": True, "echo": False},
]

SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.sampled_from([0, 1, -1, 2, 3, 129, 2**31, 2**63, 2**64, -(2**64), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e-300, 1e300, -0.0, 0.5, 2.5]),
    st.text(max_size=12),
    st.sampled_from(["\ud800", "a\udfffb", "", "user", "assistant", "tool", "function", "none", "auto", "text",
                     "get_price", '{"city": 1}', "token_id:5"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["type", "text", "function", "name", "role",
                                                                   "content", "arguments", "x"]), inner, max_size=4)),
    max_leaves=8)
MUTATION = st.tuples(st.sampled_from(["replace", "delete", "insert"]), st.integers(0, 10**6), VALUES)


def _slots(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) inside a JSON value, depth first."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        out.append((value, key))
        _slots(child, out)
    return out


def mutate(base: dict[str, Any], mutations: list[tuple[str, int, Any]]) -> dict[str, Any]:
    request = copy.deepcopy(base)
    for kind, pick, value in mutations:
        slots = _slots(request, [])
        if not slots:
            break
        container, key = slots[pick % len(slots)]
        if kind == "replace":
            container[key] = value
        elif kind == "delete":
            del container[key]
        elif isinstance(container, dict):
            container[f"x{pick % 7}"] = value
        else:
            container.insert(key, value)
    return request


class _Capped(Engine):
    """The real engine; completions cut at `cap` tokens."""

    def __init__(self, inner: HFEngine, cap: int = 4) -> None:
        self.inner, self.cap, self.tokenizer = inner, cap, inner.tokenizer
        self.vocab_size, self.max_positions, self.eos_ids = inner.vocab_size, inner.max_positions, inner.eos_ids

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        sampling.max_tokens = min(sampling.max_tokens, self.cap)
        return await self.inner.generate(prompt_ids, sampling)

    async def close(self) -> None:
        await self.inner.close()


class _ThreadedServer:
    """An app served by uvicorn in a thread with its own event loop, for synchronous (hypothesis) tests."""

    def __init__(self, app, engine: Engine) -> None:
        self.engine = engine
        self.loop = asyncio.new_event_loop()
        self.server = GatewayServer(app)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(60)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(60)
        asyncio.run_coroutine_threadsafe(self.engine.close(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def servers(tiny_model_path) -> Iterator[dict[str, Any]]:
    engines = [_Capped(HFEngine.from_pretrained(tiny_model_path, device="cpu")) for _ in range(2)]
    gateway = Gateway(engines[0], engines[0].tokenizer)
    gateway_server = _ThreadedServer(create_app(gateway), engines[0])
    session, issue = open_episode(gateway, "fuzz", max_tokens=4, max_turns=None)
    engine = engines[1]
    chat = Gateway(engine, engine.tokenizer, require_key=False, default_max_tokens=4)
    serve_server = _ThreadedServer(create_serve_app(engine, engine.tokenizer, "tiny", extra_routers=[chat.router]),
                                   engine)
    seen: dict[str, list[int]] = {"gateway": [], "serve": []}
    yield {"gateway": gateway_server.url, "key": issue("assistant"), "serve": serve_server.url, "seen": seen}
    gateway_server.stop()
    serve_server.stop()


def _check(response: httpx.Response, request: Any) -> None:
    assert response.status_code != 500, (request, response.text[:400])
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["message"], str) and error["message"], request
        assert error["type"] in ("invalid_request_error", "server_error")
        if response.status_code >= 500:  # only the engine may fail, and it says so
            assert error["code"] == "engine_error", (request, error)


FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(base=st.sampled_from(CHAT_BASES), mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_gateway_never_answers_500(servers, base, mutations):
    request = mutate(base, mutations)
    body = json.dumps(request)  # NaN and Infinity go out as such: not JSON, the gateway must refuse them
    response = httpx.post(f"{servers['gateway']}/chat/completions", content=body, timeout=120,
                          headers={"Authorization": f"Bearer {servers['key']}", "Content-Type": "application/json"})
    _check(response, request)
    servers["seen"]["gateway"].append(response.status_code)


@FUZZ
@given(base=st.sampled_from(COMPLETION_BASES + CHAT_BASES), mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_serve_never_answers_500(servers, base, mutations):
    request = mutate(base, mutations)
    path = "/chat/completions" if "messages" in base else "/completions"
    response = httpx.post(f"{servers['serve']}{path}", content=json.dumps(request), timeout=120,
                          headers={"Content-Type": "application/json"})
    _check(response, request)
    servers["seen"]["serve"].append(response.status_code)


def test_the_fuzz_reached_both_success_and_refusal(servers):
    """The mutations are not all refused at the door, nor all harmless: both paths were exercised."""
    for name in ("gateway", "serve"):
        codes = servers["seen"][name]
        assert len(codes) >= 60, name
        print(name, {c: codes.count(c) for c in sorted(set(codes))})
        assert codes.count(200) >= 10 and codes.count(400) >= 10, (name, sorted(set(codes)))
