"""The gateway's per-call caches change nothing but time: the render cache gives the exact token ids
of an uncached render (multi-turn, spliced turns, tools changed mid-episode), the constraint cache
gives the constraint `guided_decoding` builds, and the JSON reader's fast path refuses what the full
check refuses."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from ajet import safejson
from ajet.gateway.constraints import guided_decoding
from ajet.render import ChatRenderer
from tests.unit.gw_helpers import open_episode, running_gateway, scripted_engine
from tests.unit.test_tracker import CALL, TOOLS

OTHER_TOOLS = [{"type": "function", "function": {"name": "get_storage", "description": "Gas in storage",
                "parameters": {"type": "object", "properties": {"region": {"type": "string"}}}}}]


def uncached(tokenizer) -> ChatRenderer:
    renderer = ChatRenderer(tokenizer)
    renderer._cache_renders = False
    return renderer


async def test_cached_renders_give_the_uncached_token_ids(tiny_tokenizer):
    """A 4-call tool episode whose tools change before the last call; every prompt the gateway
    sent equals a fresh uncached render of the same messages, and later calls hit the cache."""
    other_call = '<tool_call>\n{"name": "get_storage", "arguments": {"region": "East"}}\n</tool_call>'
    engine = scripted_engine(tiny_tokenizer, [{"text": CALL}, {"text": "It is 3.1."}, {"text": other_call},
                                              {"text": "Storage is 80%."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"), max_retries=0)
        renders = []
        original = gateway.renderer._render
        gateway.renderer._render = lambda *a, **k: renders.append(1) or original(*a, **k)
        messages = [{"role": "system", "content": "You are a gas expert."}, {"role": "user", "content": "Houston?"}]
        sent = []
        for tools in (TOOLS, TOOLS, OTHER_TOOLS, OTHER_TOOLS):
            renders.clear()
            r = await client.chat.completions.create(model="m", messages=messages, tools=tools)
            sent.append((json.loads(json.dumps(messages)), tools, len(renders)))
            message = r.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls or []:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"value": 3.1}'})
            if not message.tool_calls:
                messages.append({"role": "user", "content": "And storage in the East?"})
    calls = session.tracker.calls
    assert [c.completion_ids != [] for c in calls] == [True] * 4
    reference = uncached(tiny_tokenizer)
    for call, (msgs, tools, _) in zip(calls, sent):
        expected = reference.encode(msgs, tools, session.tracker.lookup("assistant"))  # one lookup per prompt
        assert call.prompt_ids == expected.token_ids
        # (authors are not compared: the tracker untrains turns spliced after the tools changed)
        assert [s.token_ids for s in call.prompt_segments] == [s.token_ids for s in expected.segments]
    assert sum(seg.author == "llm" for seg in calls[1].prompt_segments) == 1  # the first turn spliced
    # Uncached, a call renders 1 + 2 texts per spliced turn. Cached, calls 2 and 4 render only what is
    # new (their full prompt and the last turn's "after"); call 3 changed the tools: all 5 are new.
    assert [n for _, _, n in sent] == [1, 2, 5, 2]
    assert calls[2].tools_key != calls[1].tools_key


def test_render_cache_hits_equal_fresh_renders(tiny_tokenizer):
    """Same conversation rendered through one renderer twice (second time from the cache), for SFT
    and for a live prompt, equals an uncached renderer; a template that reads the clock is not cached."""
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Houston?"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                    "name": "get_price", "arguments": '{"city": "Houston"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "3.1"},
                {"role": "assistant", "content": "3.1 USD."}]
    cached, reference = ChatRenderer(tiny_tokenizer), uncached(tiny_tokenizer)
    for _ in range(2):
        got = cached.encode_conversation(messages, TOOLS)
        want = reference.encode_conversation(messages, TOOLS)
        assert got.token_ids == want.token_ids and [s.token_ids for s in got.segments] == [s.token_ids for s in want.segments]
        assert cached.encode(messages[:4], TOOLS).token_ids == reference.encode(messages[:4], TOOLS).token_ids
        assert cached.encode(messages[:4], None).token_ids == reference.encode(messages[:4], None).token_ids
    assert cached._render_cache and not reference._render_cache
    clock = ChatRenderer(tiny_tokenizer, chat_template="{{ strftime_now('%Y') }}{% for m in messages %}"
                                                       "{{ m['content'] }}{% endfor %}")
    clock.encode(messages[:2], None)
    assert not clock._render_cache


async def test_constraint_cache_follows_the_tools_and_refuses_bad_requests_every_time(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "ok"}] * 4)
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        _, issue = open_episode(gateway)
        http = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {issue('assistant')}"})
        user = [{"role": "user", "content": "x"}]
        for tools in (TOOLS, TOOLS, OTHER_TOOLS):
            (await http.post("/chat/completions", json={"model": "m", "messages": user, "tools": tools})).raise_for_status()
        specs = list(gateway._guided_cache.values())
        assert specs == [guided_decoding(TOOLS, None), guided_decoding(OTHER_TOOLS, None)]
        for _ in range(2):  # an error is never cached: the second identical request is refused the same way
            bad = {"model": "m", "messages": user, "tools": TOOLS,
                   "tool_choice": {"type": "function", "function": {"name": "nope"}}}
            r = await http.post("/chat/completions", json=bad)
            assert r.status_code == 400 and "'nope', which is not in tools" in r.json()["error"]["message"]
        await http.aclose()


@pytest.mark.parametrize("body", [
    b'{"a": "\\ud800"}', b'{"a": "x \\uDBFF"}', b'{"\\udc00": 1}',
    '{"a": "\ud800"}'.encode("utf-8", "surrogatepass"), b"[" * 70 + b"]" * 70,
])
def test_fast_json_path_refuses_what_the_full_check_refuses(body):
    value = None
    try:
        value = json.loads(body)
    except RecursionError:
        pass
    if value is not None:
        assert safejson.find_problem(value) is not None  # the full check refuses it
    with pytest.raises(safejson.JSONProblem):
        safejson.loads(body)
    with pytest.raises(safejson.JSONProblem):
        safejson.loads(body.decode("utf-8", "surrogatepass"))


def test_fast_json_path_accepts_valid_pairs_and_plain_text():
    assert safejson.loads(b'{"a": "\\ud83d\\ude00", "b": [[{"c": "\\u00e9"}]]}') == {"a": "\U0001F600", "b": [[{"c": "é"}]]}
    assert safejson.loads('{"a": "\\\\ud800 is text"}') == {"a": "\\ud800 is text"}  # an escaped backslash
