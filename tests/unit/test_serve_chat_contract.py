"""`/v1/chat/completions` of `ajet serve` keeps the contract `/v1/completions` keeps (issue 16, items 8
and 9): a max_tokens beyond the context is 400 `context_length_exceeded`, an unknown model or an
unloaded adapter is 404, `logprobs` is honoured, and what the engines cannot apply (top_logprobs
alternatives, penalties, logit_bias) or what is malformed is 400 naming the parameter, never silently
ignored. Over real HTTP on 127.0.0.1 with the tiny model."""

from __future__ import annotations

import math

import httpx
import pytest

from ajet.engine.hf import HFEngine
from ajet.gateway.server import GatewayServer
from ajet.serving.app import create_serve_app
from ajet.serving.chat import ServeChat

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def engine(tiny_model_path) -> HFEngine:
    return HFEngine.from_pretrained(tiny_model_path, device="cpu", dtype="float32", max_batch_size=4)


@pytest.fixture
async def http(engine):
    chat = ServeChat(engine, engine.tokenizer, model_name="tiny")
    app = create_serve_app(engine, engine.tokenizer, "tiny", chat=chat, aliases=["tiny-path"],
                           enable_lora=True)
    server = GatewayServer(app)
    url = await server.start()
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        yield client
    await server.stop()


def _error(answer: httpx.Response, status: int, param: str | None = None, code: str | None = None) -> str:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if param is not None:
        assert error["param"] == param, error
    if code is not None:
        assert error["code"] == code, error
    return error["message"]


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
@pytest.mark.parametrize("value", ["1e12", str(2**70), "8192"])
async def test_a_max_tokens_beyond_the_context_is_refused_like_completions(http, field, value):
    body = '{"messages": [{"role": "user", "content": "hi"}], "%s": %s}' % (field, value)
    answer = await http.post("/chat/completions", content=body, headers={"content-type": "application/json"})
    message = _error(answer, 400, code="context_length_exceeded")
    assert "maximum context length is 8192 tokens" in message and "in the messages" in message
    completions = await http.post("/completions", content='{"prompt": [1, 2], "max_tokens": %s}' % value,
                                  headers={"content-type": "application/json"})
    _error(completions, 400, code="context_length_exceeded")


async def test_the_model_field_is_routed_like_completions(http):
    for model in (None, "tiny", "tiny-path"):  # no name, the served name, an alias: the base model
        body = {"messages": USER, "max_tokens": 2, **({"model": model} if model else {})}
        assert (await http.post("/chat/completions", json=body)).status_code == 200
    for model in ("gpt-4", "step-1"):  # unknown, and an adapter that is not loaded
        for route, body in (("/chat/completions", {"messages": USER}), ("/completions", {"prompt": [1]})):
            answer = await http.post(route, json={**body, "model": model, "max_tokens": 2})
            assert f"`{model}` does not exist" in _error(answer, 404, code="model_not_found")


async def test_logprobs_come_back_for_the_answers_tokens(http):
    body = {"messages": USER, "max_tokens": 5, "temperature": 0, "logprobs": True, "top_logprobs": 0}
    answer = await http.post("/chat/completions", json=body)
    assert answer.status_code == 200, answer.text
    choice = answer.json()["choices"][0]
    content = choice["logprobs"]["content"]
    assert 1 <= len(content) <= answer.json()["usage"]["completion_tokens"]
    assert "".join(t["token"] for t in content) == choice["message"]["content"]
    for token in content:
        assert math.isfinite(token["logprob"]) and token["logprob"] <= 0 and token["top_logprobs"] == []
        assert bytes(token["bytes"]).decode("utf-8", "replace") == token["token"]
    plain = await http.post("/chat/completions", json={"messages": USER, "max_tokens": 5, "temperature": 0})
    assert plain.json()["choices"][0]["logprobs"] is None
    assert plain.json()["choices"][0]["message"] == choice["message"]  # the same answer either way


@pytest.mark.parametrize(
    ("extra", "param", "needle"),
    [
        ({"logprobs": True, "top_logprobs": 1000}, "top_logprobs", "less than or equal to 20"),
        ({"logprobs": True, "top_logprobs": "yes"}, "top_logprobs", ""),
        ({"logprobs": "yes"}, "logprobs", ""),
        ({"logprobs": True, "top_logprobs": 5}, "top_logprobs", "sampled token only"),
        ({"top_logprobs": 0}, "top_logprobs", "needs logprobs: true"),
        ({"presence_penalty": 3}, "presence_penalty", "less than or equal to 2"),
        ({"frequency_penalty": -2.5}, "frequency_penalty", "greater than or equal to -2"),
        ({"presence_penalty": 0.5}, "presence_penalty", "not supported"),
        ({"logit_bias": [1, 2]}, "logit_bias", ""),
        ({"logit_bias": {"abc": 1}}, "logit_bias", "integer strings"),
        ({"logit_bias": {"5": 1000}}, "logit_bias", "[-100, 100]"),
        ({"logit_bias": {"5": "x"}}, "logit_bias.5", ""),
        ({"logit_bias": {"5": 10}}, "logit_bias", "not supported"),
        ({"chat_template": "{{ messages[0].content }}"}, "chat_template", "rendered with the template the server"),
        ({"chat_template": ""}, "chat_template", "not supported"),
        ({"chat_template_kwargs": {"enable_thinking": False}}, "chat_template_kwargs", "rendered with the messages"),
        ({"chat_template_kwargs": "x"}, "chat_template_kwargs", "not supported"),
    ],
)
async def test_what_chat_cannot_honour_is_refused_naming_it(http, engine, extra, param, needle):
    before = engine.stats.requests
    answer = await http.post("/chat/completions", json={"messages": USER, **extra})
    assert needle in _error(answer, 400, param=param)
    assert engine.stats.requests == before  # refused at the door


async def test_neutral_values_are_accepted(http):
    body = {"messages": USER, "max_tokens": 2, "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {},
            "logprobs": False, "chat_template_kwargs": {}}
    assert (await http.post("/chat/completions", json=body)).status_code == 200
