"""Requests a hostile or broken client sends, against the gateway and `ajet serve` over real HTTP on
127.0.0.1 with the tiny-random model: malformed shapes, poisonous sampling parameters, stalled bodies,
clients that leave. None may cause a 500, hold a connection forever, or fail someone else's request.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.engine.hf import HFEngine
from ajet.gateway.server import Gateway, GatewayServer
from ajet.serving.app import create_serve_app
from tests.unit.gw_helpers import open_episode, running_gateway, scripted_engine

USER = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}

# The eight shapes that crashed the gateway with a plain-text 500 (issue 7, item 5), and the field named.
EIGHT_SHAPES = [
    ("deeply nested JSON", None, "nested deeper than 64"),
    ("user content part text not a string",
     {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "messages.0.content.0.text"),
    ("assistant content part text not a string",
     {"messages": USER + [{"role": "assistant", "content": [{"type": "text", "text": {"a": 1}}]}] + USER},
     "messages.1.content.0.text"),
    ("tool_calls is a number", {"messages": USER + [{"role": "assistant", "tool_calls": 5}]},
     "messages.1.tool_calls must be a list"),
    ("tool_calls[].function is a string",
     {"messages": USER + [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": "f"}]}]},
     "messages.1.tool_calls.0 must be an object with a 'function' object"),
    ("tools[].function is null", {"messages": USER, "tools": [{"type": "function", "function": None}]},
     "tools.0.function must be an object"),
    ("tools[].function is a string", {"messages": USER, "tools": [{"type": "function", "function": "f"}]},
     "tools.0.function must be an object"),
    ("tool_calls[].function.name is a number",
     {"messages": USER + [{"role": "assistant", "tool_calls": [{"function": {"name": 3, "arguments": "{}"}}]}]},
     "messages.1.tool_calls.0.function.name must be a string"),
]


def _body(shape: dict | None) -> bytes:
    if shape is None:  # 100 000 levels: json.loads alone raises RecursionError
        return b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return json.dumps(shape).encode()


def assert_openai_error(response: httpx.Response, status: int, needle: str = "", param: str | None = None) -> dict:
    assert response.status_code == status, response.text[:300]
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == ("invalid_request_error" if status < 500 else "server_error")
    assert needle in error["message"], error["message"]
    if param is not None:
        assert error["param"] == param
    return error


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_path) -> HFEngine:
    return HFEngine.from_pretrained(tiny_model_path, device="cpu", max_batch_size=16)


async def test_the_eight_shapes_get_400_from_the_gateway(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "ok"}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        _, issue = open_episode(gateway)
        headers = {"Authorization": f"Bearer {issue('assistant')}", "Content-Type": "application/json"}
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            for name, shape, needle in EIGHT_SHAPES:
                r = await http.post("/chat/completions", content=_body(shape), headers=headers)
                assert_openai_error(r, 400, needle)
            for path, method, status in (("/nothing", "GET", 404), ("/chat/completions", "GET", 405),
                                         ("/models", "DELETE", 405)):
                r = await http.request(method, path, headers=headers)
                assert_openai_error(r, status, path)
            assert (await http.post("/chat/completions", json={"messages": USER}, headers=headers)).status_code == 200
    assert engine.played == 1  # nothing malformed reached the engine


async def test_the_eight_shapes_get_400_from_serve_before_any_generation(tiny_engine):
    chat = Gateway(tiny_engine, tiny_engine.tokenizer, require_key=False)
    server = GatewayServer(create_serve_app(tiny_engine, tiny_engine.tokenizer, "tiny", extra_routers=[chat.router]))
    url = await server.start()
    before = tiny_engine.stats.requests
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            for name, shape, needle in EIGHT_SHAPES:
                started = time.perf_counter()
                r = await http.post("/chat/completions", content=_body(shape), headers={"content-type": "application/json"})
                assert_openai_error(r, 400, needle)
                assert time.perf_counter() - started < 5, name  # refused at the door, not after generating
            assert_openai_error(await http.get("/nothing"), 404, "/nothing")
            assert_openai_error(await http.put("/completions", json={}), 405)
    finally:
        await server.stop()
    assert tiny_engine.stats.requests == before


@pytest.mark.parametrize(
    ("field", "value", "param", "needle"),
    [
        ("seed", 2**64, "seed", "64-bit range"),
        ("seed", -(2**63) - 1, "seed", "64-bit range"),
        ("temperature", 1e-300, "temperature", "too small to sample with"),
        ("temperature", 1e999, "temperature", "finite"),  # json.loads reads 1e999 as inf
        ("top_p", 1e999, "top_p", None),
        ("stop", ["x"] * 17, "stop", "at most 16"),
        ("n", 3, "n", "only n=1"),
    ],
)
async def test_poisonous_sampling_parameters_get_400_naming_them(tiny_tokenizer, field, value, param, needle):
    engine = scripted_engine(tiny_tokenizer, [])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        _, issue = open_episode(gateway)
        body = json.dumps({"messages": USER, field: value}).replace("Infinity", "1e999")
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(f"{url}/chat/completions", content=body,
                                headers={"Authorization": f"Bearer {issue('assistant')}"})
    error = assert_openai_error(r, 400, needle or "", param)
    assert param in error["message"] or param in (error["param"] or "")


async def test_one_bad_request_does_not_fail_45_innocent_ones(tiny_engine):
    """seed 2**64 or temperature 1e-300 in one request failed its whole engine batch (40 of 45 innocent
    requests got 503). Checked at the door, the bad ones get 400 and every innocent one 200."""
    async with running_gateway(tiny_engine, tiny_engine.tokenizer) as (gateway, url):
        sessions = [open_episode(gateway, f"ep{i}", max_tokens=4) for i in range(48)]
        bad = [{"seed": 2**64}, {"temperature": 1e-300}, {"seed": -(2**70)}]

        async def call(i: int, http: httpx.AsyncClient) -> int:
            extra = bad[i % 16] if i % 16 < len(bad) and i < 3 * 16 else {}
            body = {"messages": [{"role": "user", "content": f"question {i}"}], "temperature": 1.0, **extra}
            r = await http.post("/chat/completions", json=body,
                                headers={"Authorization": f"Bearer {sessions[i][1]('assistant')}"})
            return r.status_code

        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            codes = await asyncio.gather(*(call(i, http) for i in range(48)))
    bad_ones = [i for i in range(48) if i % 16 < len(bad)]
    assert [codes[i] for i in bad_ones] == [400] * 9
    assert [c for i, c in enumerate(codes) if i not in bad_ones] == [200] * 39

    server = GatewayServer(create_serve_app(tiny_engine, tiny_engine.tokenizer, "tiny"))
    url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            bodies = [{"prompt": [1, 2, 3 + i], "max_tokens": 3, "temperature": 1.0, "seed": 2**64 if i == 7 else i}
                      for i in range(46)]
            codes = await asyncio.gather(*(http.post("/completions", json=b) for b in bodies))
    finally:
        await server.stop()
    assert codes[7].json()["error"]["param"] == "seed"
    assert [r.status_code for i, r in enumerate(codes) if i != 7] == [200] * 45


async def _stalled_body(url: str, path: str, headers: dict[str, str]) -> tuple[float, bytes]:
    """Declare 1 000 body bytes, send 10, wait: (seconds until the server answered and closed, answer)."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(f"POST /v1{path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: 1000\r\n{head}\r\n".encode() + b'{"messages')
    await writer.drain()
    started = time.perf_counter()
    answer = await asyncio.wait_for(reader.read(), 20)  # read() returns at EOF: the server closed
    writer.close()
    return time.perf_counter() - started, answer


async def test_a_stalled_body_is_dropped_after_the_read_timeout(tiny_engine):
    engine_free = scripted_engine(tiny_engine.tokenizer, [])
    async with running_gateway(engine_free, tiny_engine.tokenizer, body_timeout_s=1.0) as (gateway, url):
        _, issue = open_episode(gateway)
        seconds, answer = await _stalled_body(url, "/chat/completions", {"Authorization": f"Bearer {issue('a')}"})
    assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer
    assert 0.9 < seconds < 5

    server = GatewayServer(create_serve_app(tiny_engine, tiny_engine.tokenizer, "tiny", body_timeout_s=1.0))
    url = await server.start()
    try:
        seconds, answer = await _stalled_body(url, "/completions", {})
    finally:
        await server.stop()
    assert answer.startswith(b"HTTP/1.1 408") and 0.9 < seconds < 5


class _Watched(Engine):
    """The real tiny engine, recording which generations were cancelled by their caller."""

    def __init__(self, inner: HFEngine) -> None:
        self.inner, self.tokenizer = inner, inner.tokenizer
        self.max_positions = inner.max_positions
        self.vocab_size, self.eos_ids = inner.vocab_size, inner.eos_ids
        self.cancelled = 0
        self.max_tokens_seen: list[int] = []

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        self.max_tokens_seen.append(sampling.max_tokens)
        try:
            return await self.inner.generate(prompt_ids, sampling)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


async def test_serve_chat_default_max_tokens_is_bounded(tiny_engine):
    engine = _Watched(tiny_engine)
    async with running_gateway(engine, tiny_engine.tokenizer, require_key=False, default_max_tokens=7) as (_, url):
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            plain = await http.post("/chat/completions", json={"messages": USER})
            more = await http.post("/chat/completions", json={"messages": USER, "max_tokens": 20})
    assert plain.status_code == more.status_code == 200
    assert engine.max_tokens_seen == [7, 20]  # the default, and what a request asks beyond it
    assert plain.json()["usage"]["completion_tokens"] <= 7


async def test_serve_cancels_the_generation_of_a_client_that_left(tiny_model_path):
    # An engine of its own: the abandoned generation must not hold up other tests' engine.
    engine = _Watched(HFEngine.from_pretrained(tiny_model_path, device="cpu", max_batch_size=1))
    server = GatewayServer(create_serve_app(engine, engine.tokenizer, "tiny"))
    url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=url) as http:
            with pytest.raises(httpx.ReadTimeout):  # the client gives up and closes its connection
                await http.post("/completions", json={"prompt": [1, 2, 3], "max_tokens": 2000, "temperature": 1.0},
                                timeout=0.5)
        deadline = time.monotonic() + 10
        while engine.cancelled == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        await server.stop()
        await engine.inner.close()
    assert engine.cancelled == 1
