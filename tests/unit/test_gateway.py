"""The gateway over real HTTP with the official openai SDK: tools, streaming, concurrency, bad input."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from tests.unit.gw_helpers import open_episode, running_gateway, scripted_engine
from tests.unit.test_tracker import CALL, TOOLS


async def test_tool_call_is_parsed_and_streamed(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": CALL}, {"text": "Sure " + CALL}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        r = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Houston?"}], tools=TOOLS)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        assert choice.message.tool_calls[0].function.name == "get_price"
        assert json.loads(choice.message.tool_calls[0].function.arguments) == {"city": "Houston"}
        assert r.usage.completion_tokens == len(session.tracker.calls[0].completion_ids)

        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Again"}], tools=TOOLS, stream=True,
            stream_options={"include_usage": True})
        content, calls, finish, usage = "", [], None, None
        async for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for c in chunk.choices:
                content += c.delta.content or ""
                calls += c.delta.tool_calls or []
                finish = c.finish_reason or finish
        assert content == "Sure" and finish == "tool_calls" and usage.total_tokens > 0
        assert calls[0].function.name == "get_price"


async def test_malformed_tool_call_is_returned_as_text_and_counted(tiny_tokenizer):
    bad = '<tool_call>\n{"name": "get_price", "arguments": {"city": }\n</tool_call>'
    engine = scripted_engine(tiny_tokenizer, [{"text": bad}, {"text": '<tool_call>{"name": "nope"}</tool_call>'}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        for _ in range(2):
            r = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS)
            assert r.choices[0].message.tool_calls is None and "<tool_call>" in r.choices[0].message.content
            assert r.choices[0].finish_reason == "stop"
    assert session.tool_call_parse_failures == 2 and session.tool_calls_parsed == 0
    assert "not valid JSON" in session.tracker.calls[0].parse_error
    assert "not offered" in session.tracker.calls[1].parse_error


async def test_calls_written_as_plain_json_are_parsed_and_counted_apart(tiny_tokenizer):
    bare = '{"name": "get_price", "arguments": {"city": "Houston"}}'
    fenced = 'Checking.\n```json\n{"name": "get_price", "arguments": {"city": "Austin"}}\n```'
    engine = scripted_engine(tiny_tokenizer, [{"text": bare}, {"text": fenced}, {"text": CALL}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        cities = []
        for _ in range(3):
            r = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS)
            assert r.choices[0].finish_reason == "tool_calls"
            cities.append(json.loads(r.choices[0].message.tool_calls[0].function.arguments)["city"])
    assert cities == ["Houston", "Austin", "Houston"] and r.choices[0].message.content is None
    assert session.tool_calls_parsed == 3 and session.tool_calls_json == 2 and session.tool_call_parse_failures == 0


async def test_sync_client_in_a_thread(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "Hello there."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        _, issue = open_episode(gateway)
        client = openai.OpenAI(base_url=url, api_key=issue("assistant"))
        r = await asyncio.to_thread(client.chat.completions.create, model="m",
                                    messages=[{"role": "user", "content": "hi"}], max_tokens=5, temperature=0)
        assert r.choices[0].message.content == "Hello there."
        models = await asyncio.to_thread(client.models.list)
        assert [m.id for m in models.data] == [gateway.model_name]


async def test_32_concurrent_clients_with_the_hf_engine(tiny_model_path):
    from ajet.engine.hf import HFEngine

    engine = HFEngine.from_pretrained(tiny_model_path, device="cpu", max_batch_size=32)
    async with running_gateway(engine, engine.tokenizer) as (gateway, url):
        pairs = [open_episode(gateway, f"ep{i}", max_tokens=6) for i in range(32)]

        async def one(i, issue):
            client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
            r = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"n{i}"}],
                                                     temperature=0)
            return r.usage.completion_tokens

        tokens = await asyncio.gather(*(one(i, issue) for i, (_, issue) in enumerate(pairs)))
    assert all(1 <= t <= 6 for t in tokens)
    assert all(len(s.tracker.calls) == 1 for s, _ in pairs)


async def test_bad_requests_get_openai_error_bodies(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "ok"}] * 4)
    async with running_gateway(engine, tiny_tokenizer, max_request_bytes=4096) as (gateway, url):
        session, issue = open_episode(gateway, max_turns=1)
        key = issue("assistant")
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        async with httpx.AsyncClient(base_url=url) as http:
            async def post(body, hdrs=headers):
                return await http.post("/chat/completions", content=body, headers=hdrs)

            cases = [
                (b"{not json", 400, "invalid_json"),
                (json.dumps({"messages": []}).encode(), 400, None),
                (json.dumps({"messages": [{"role": "wizard", "content": "x"}]}).encode(), 400, None),
                (json.dumps({"messages": [{"role": "user", "content": "x"}], "n": 2}).encode(), 400, None),
                (json.dumps({"messages": [{"role": "user", "content": "x"}], "temperature": -1}).encode(), 400, None),
                (json.dumps({"messages": [{"role": "user", "content": "x" * 10000}]}).encode(), 413,
                 "request_too_large"),
            ]
            for body, status, code in cases:
                r = await post(body)
                assert r.status_code == status, (body[:40], r.text)
                error = r.json()["error"]
                assert error["message"] and error["type"] == "invalid_request_error"
                if code:
                    assert error["code"] == code
            forged = {**headers, "Authorization": "Bearer ajet-forged"}
            r = await post(json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), forged)
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
            ok = json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode()
            assert (await post(ok)).status_code == 200
            r = await post(ok)  # max_turns=1 for this agent
            assert r.status_code == 400 and r.json()["error"]["code"] == "max_turns_exceeded"
            gateway.close_episode(session.episode_id)
            assert (await post(ok)).status_code == 401  # a finished episode's key is dead


async def test_openai_sdk_sees_auth_errors(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        client = openai.AsyncOpenAI(base_url=url, api_key="sk-made-up", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
