"""RemoteEngine against `ajet serve` running in a real subprocess, on the tiny model.

The server speaks vLLM's completions protocol; the remote engine must give, token for token, what
the in-process HFEngine gives, and bad requests must get OpenAI-style error bodies.
"""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from ajet.engine.base import SamplingParams
from ajet.engine.hf import HFEngine
from ajet.engine.remote import RemoteEngine, parse_completion
from ajet.errors import EngineError
from tests.e2e.serve_process import ajet_serve, free_port

TEXTS = ["Hi", "The capital of France is", "Count: one two three four five six seven eight nine ten"]


@pytest.fixture(scope="module")
def server(tiny_model_path, tmp_path_factory):
    """`ajet serve` on the tiny model in a subprocess; yields its /v1 URL and stops it at the end."""
    with ajet_serve(tiny_model_path, tmp_path_factory.mktemp("serve") / "serve.log", "--log-level", "warning") as url:
        yield url


@pytest.fixture(scope="module")
def local(tiny_model_path) -> HFEngine:
    return HFEngine.from_pretrained(tiny_model_path, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def prompts(local) -> list[list[int]]:
    return [local.tokenizer.encode(t) for t in TEXTS]


async def test_remote_greedy_and_seeded_results_equal_the_local_engine(server, local, prompts):
    remote = RemoteEngine(server)
    async with remote:
        assert remote.model_name == "tiny"  # taken from GET /v1/models
        for sampling in (SamplingParams(max_tokens=12, temperature=0.0),
                         SamplingParams(max_tokens=12, temperature=1.0, top_p=0.9, seed=17)):
            for prompt in prompts:
                got = await remote.generate(prompt, sampling)
                want = await local.generate(prompt, sampling)
                assert got.token_ids == want.token_ids
                assert got.finish_reason == want.finish_reason == "length"
                assert got.logprobs == pytest.approx(want.logprobs, abs=1e-4)


async def test_stops_travel_through_the_protocol(server, local, prompts):
    free = await local.generate(prompts[2], SamplingParams(max_tokens=12, temperature=1.0, seed=5))
    text = local.tokenizer.decode(free.token_ids)
    stop_string = text[len(local.tokenizer.decode(free.token_ids[:6])):][:3]
    async with RemoteEngine(server) as remote:
        for sampling in (SamplingParams(max_tokens=12, temperature=1.0, seed=5, stop_token_ids=[free.token_ids[3]]),
                         SamplingParams(max_tokens=12, temperature=1.0, seed=5, stop=[stop_string])):
            got = await remote.generate(prompts[2], sampling)
            want = await local.generate(prompts[2], sampling)
            assert got.token_ids == want.token_ids and len(got.token_ids) < 12
            assert got.finish_reason == "stop"


async def test_eight_concurrent_requests(server, local):
    prompts = [local.tokenizer.encode(f"Question {i}: what is {i} plus {i}?") for i in range(8)]
    sampling = SamplingParams(max_tokens=8, temperature=0.0)
    async with RemoteEngine(server, model="tiny") as remote:
        results = await asyncio.gather(*(remote.generate(p, sampling) for p in prompts))
    for prompt, got in zip(prompts, results):
        assert got.token_ids == (await local.generate(prompt, sampling)).token_ids


async def test_official_openai_sdk_text_and_token_prompts(server, local, prompts):
    client = openai.AsyncOpenAI(base_url=server, api_key="EMPTY")
    want = await local.generate(prompts[1], SamplingParams(max_tokens=6, temperature=0.0))
    by_text = await client.completions.create(model="tiny", prompt=TEXTS[1], max_tokens=6, temperature=0, logprobs=1)
    by_ids = await client.completions.create(model="tiny", prompt=prompts[1], max_tokens=6, temperature=0)
    assert by_text.choices[0].text == by_ids.choices[0].text == local.tokenizer.decode(want.token_ids)
    assert by_text.choices[0].logprobs.tokens == [f"token_id:{t}" for t in want.token_ids]
    assert by_text.usage.prompt_tokens == len(prompts[1]) and by_text.usage.completion_tokens == 6
    two = await client.completions.create(model="tiny", prompt=[prompts[0], prompts[1]], max_tokens=3,
                                          temperature=1.0, n=2, seed=1)
    assert [c.index for c in two.choices] == [0, 1, 2, 3]
    await client.close()


@pytest.mark.parametrize(
    ("body", "status", "code", "needle"),
    [
        (b"{not json", 400, "invalid_json", "not valid JSON"),
        (b"[1, 2]", 400, "invalid_request_error", "must be a JSON object"),
        (b'{"prompt": [1, 2], "max_tokens": "many"}', 400, "invalid_request_error", "max_tokens"),
        (b'{"max_tokens": 3}', 400, "invalid_request_error", "prompt: Field required"),
        (b'{"prompt": []}', 400, "invalid_request_error", "prompt is empty"),
        (b'{"prompt": [1, 2.5]}', 400, "invalid_request_error", "prompt must be a string, a list of token ids"),
        (b'{"prompt": [1, 99999999]}', 400, "invalid_request_error", "outside the vocabulary [0, 49152)"),
        (b'{"prompt": [1, 2], "stream": true}', 400, "invalid_request_error", "stream=True is not supported"),
        (b'{"prompt": [1, 2], "temperature": -1}', 400, "invalid_request_error", "temperature"),
        (b'{"prompt": [1, 2], "max_tokens": 9000}', 400, "context_length_exceeded", "maximum context length is 8192"),
        (b'{"prompt": [1, 2], "model": "gpt-4"}', 404, "model_not_found", "`gpt-4` does not exist"),
    ],
)
def test_bad_requests_get_openai_error_bodies(server, body, status, code, needle):
    response = httpx.post(f"{server}/completions", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and needle in error["message"]
    assert error["type"] == "invalid_request_error"


def test_oversized_bodies_and_unknown_routes(server):
    big = b'{"prompt": [' + b"1, " * 1_500_000 + b"1]}"  # ~4.5 MB > the 4 MB limit
    response = httpx.post(f"{server}/completions", content=big)
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"
    missing = httpx.get(f"{server}/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert httpx.get(f"{server}/models").json()["data"][0]["max_model_len"] == 8192


async def test_remote_engine_raises_engine_error_with_the_server_message(server):
    async with RemoteEngine(server, model="tiny") as remote:
        with pytest.raises(EngineError, match=r"HTTP 400: prompt has token ids outside the vocabulary"):
            await remote.generate([1, 10**6], SamplingParams(max_tokens=2))
    dead = RemoteEngine(f"http://127.0.0.1:{free_port()}/v1", model="x", retries=1, retry_backoff_s=0.01)
    with pytest.raises(EngineError, match="cannot reach .* after 2 attempts"):
        await dead.generate([1], SamplingParams(max_tokens=2))
    await dead.close()


def test_parse_completion_reads_vllm_answers_with_and_without_token_ids():
    flag_only = {"choices": [{"text": "ab", "finish_reason": "stop", "logprobs": {
        "tokens": ["token_id:7", "token_id:2"], "token_logprobs": [-0.5, -1.5]}}]}
    gen = parse_completion(flag_only)
    assert (gen.token_ids, gen.logprobs, gen.finish_reason) == ([7, 2], [-0.5, -1.5], "stop")
    with_ids = {"choices": [{"text": "a", "finish_reason": "length", "token_ids": [9],
                             "logprobs": {"tokens": ["a"], "token_logprobs": [-2.0]}}]}
    assert parse_completion(with_ids).token_ids == [9]
    text_tokens = {"choices": [{"text": "a", "finish_reason": "stop", "logprobs": {"tokens": ["a"],
                                                                                  "token_logprobs": [-1.0]}}]}
    with pytest.raises(EngineError, match="--return-tokens-as-token-ids"):
        parse_completion(text_tokens)
    with pytest.raises(EngineError, match="finished a completion with 'abort'"):
        parse_completion({"choices": [{"finish_reason": "abort", "token_ids": [], "logprobs": {"token_logprobs": []}}]})
    with pytest.raises(EngineError, match="returned no logprobs"):
        parse_completion({"choices": [{"finish_reason": "stop", "token_ids": [1], "logprobs": None}]})


async def test_ajet_serve_answers_chat_completions_with_tools(server, local):
    """`ajet serve` also speaks /v1/chat/completions through the gateway's renderer (no episode key)."""
    client = openai.AsyncOpenAI(base_url=server, api_key="anything", max_retries=0)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "user", "content": "hello"}]
    r = await client.chat.completions.create(model="tiny", messages=messages, tools=tools, max_tokens=5,
                                             temperature=0)
    from ajet.render import ChatRenderer

    prompt = ChatRenderer(local.tokenizer).encode(messages, tools).token_ids
    expected = await local.generate(prompt, SamplingParams(max_tokens=5, temperature=0))
    assert r.usage.prompt_tokens == len(prompt)
    assert r.usage.completion_tokens == len(expected.token_ids)
    assert r.choices[0].message.content == local.tokenizer.decode(
        [t for t in expected.token_ids if t not in local.eos_ids])
