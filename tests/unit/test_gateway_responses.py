"""`POST /v1/responses` over real HTTP with the official openai SDK, and a retried request: the call
path is the chat one (the engine's tokens, the episode key), a history sent back as Responses items
merges into one sample, the stream is the Responses API's events, and a retry trains one sample."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.unit.gw_helpers import open_episode, running_gateway, scripted_engine
from tests.unit.test_tracker import CALL, samples_of

TOOLS = [{"type": "function", "name": "get_price", "description": "Gas price of a city", "strict": True,
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                         "additionalProperties": False}}]


async def test_a_tool_round_trip_in_responses_items_merges_into_one_sample(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": CALL}, {"text": "Houston pays 2.85."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"), max_retries=0)
        history: list = [{"role": "user", "content": "Houston?"}]
        first = await client.responses.create(model="m", instructions="Be brief.", input=history, tools=TOOLS)
        call = first.output[0]
        assert (call.type, call.name, json.loads(call.arguments)) == ("function_call", "get_price", {"city": "Houston"})
        assert first.status == "completed" and first.usage.output_tokens == len(session.tracker.calls[0].completion_ids)
        history += [item.model_dump(exclude_none=True) for item in first.output]  # what the Agents SDK sends back
        history.append({"type": "function_call_output", "call_id": call.call_id, "output": '{"price": 2.85}'})
        second = await client.responses.create(model="m", instructions="Be brief.", input=history, tools=TOOLS)
        assert second.output_text == "Houston pays 2.85."
    calls = session.tracker.calls
    assert calls[0].messages[0] == {"role": "system", "content": "Be brief."}
    assert sum(s.author == "llm" for s in calls[1].prompt_segments) == 1  # the call's own tokens spliced back
    samples, _ = samples_of(session, tiny_tokenizer)
    assert len(samples) == 1
    trained = [t for t, m in zip(samples[0].input_ids, samples[0].loss_mask) if m]
    assert trained == calls[0].completion_ids + calls[1].completion_ids


async def test_the_stream_is_the_responses_event_sequence(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "Sure " + CALL}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        _, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"), max_retries=0)
        stream = await client.responses.create(model="m", input="Houston?", tools=TOOLS, stream=True)
        events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Sure"
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert json.loads(done[0].arguments) == {"city": "Houston"}
    final = events[-1].response
    assert [o.type for o in final.output] == ["message", "function_call"] and final.usage.total_tokens > 0


async def test_a_cut_reply_is_an_incomplete_response(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "a long answer that will not fit in three tokens"}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        _, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"), max_retries=0)
        r = await client.responses.create(model="m", input="x", max_output_tokens=3)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3


@pytest.mark.parametrize("body, message", [
    ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id is not supported"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "'web_search' tool; the gateway runs no hosted tool"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]},
     "'input_image' part; only text parts"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "'item_reference' item"),
    ({"input": 3}, "input must be a string or a list of input items"),
    ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input.0.call_id must be a string"),
])
async def test_what_the_gateway_cannot_do_is_refused_by_name(tiny_tokenizer, body, message):
    async with running_gateway(scripted_engine(tiny_tokenizer, []), tiny_tokenizer) as (gateway, url):
        _, issue = open_episode(gateway)
        async with httpx.AsyncClient(base_url=url) as http:
            r = await http.post("/responses", json=body, headers={"Authorization": f"Bearer {issue('assistant')}"})
            assert r.status_code == 400 and message in r.json()["error"]["message"], r.text


async def test_a_forged_key_is_refused(tiny_tokenizer):
    async with running_gateway(scripted_engine(tiny_tokenizer, []), tiny_tokenizer) as (gateway, url):
        open_episode(gateway)  # an episode is open: a key that is not one of its own is still refused
        async with httpx.AsyncClient(base_url=url) as http:
            r = await http.post("/responses", json={"input": "x"}, headers={"Authorization": "Bearer ajet-forged"})
    assert r.status_code == 401


async def test_a_retried_request_trains_one_sample(tiny_tokenizer):
    # A client that never got (or gave up on) the first answer sends the same request again: the first
    # answer reached no later prompt, so it is kept in the record but trains nothing.
    engine = scripted_engine(tiny_tokenizer, [{"text": CALL}, {"text": CALL}, {"text": "2.85."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"), max_retries=0)
        messages: list = [{"role": "user", "content": "Houston?"}]
        tools = [{"type": "function", "function": {k: v for k, v in TOOLS[0].items() if k != "type"}}]
        await client.chat.completions.create(model="m", messages=messages, tools=tools)
        again = await client.chat.completions.create(model="m", messages=messages, tools=tools)
        message = again.choices[0].message
        messages += [message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "2.85"}]
        await client.chat.completions.create(model="m", messages=messages, tools=tools)
    calls = session.tracker.calls
    assert calls[0].superseded_by == 1 and not calls[0].trained and calls[0].to_dict()["superseded_by"] == 1
    assert calls[1].superseded_by is None and calls[2].superseded_by is None
    samples, _ = samples_of(session, tiny_tokenizer)
    assert len(samples) == 1 and samples[0].meta["calls"] == [1, 2]
