"""Chat rendering: Hermes tool format, native tool templates, SFT masks and their parity with the gateway."""

from __future__ import annotations

import json

import openai

from ajet.render import ChatRenderer
from ajet.gateway.tool_parser import parse_tool_calls
from ajet.tracker.merge import build_samples
from tests.unit.gw_helpers import open_episode, running_gateway, scripted_engine
from tests.unit.test_tracker import TOOLS

CONVERSATION = [
    {"role": "system", "content": "You are a natural-gas expert."},
    {"role": "user", "content": "Gas price in Houston?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_price", "arguments": '{"city": "Houston"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"price": 3.1}'},
    {"role": "assistant", "content": "Gas in Houston costs 3.1 USD/MMBtu."},
]


def test_hermes_rewrite_for_a_template_without_tools(tiny_tokenizer):
    renderer = ChatRenderer(tiny_tokenizer)
    text = renderer.render_text(CONVERSATION, TOOLS, add_generation_prompt=False)
    assert "You are a natural-gas expert.\n\nYou are a function calling AI model." in text
    assert json.dumps(TOOLS[0]) in text
    assert '<tool_call>\n{"name": "get_price", "arguments": {"city": "Houston"}}\n</tool_call>' in text
    assert '<tool_response>\n{"price": 3.1}\n</tool_response>' in text
    plain = renderer.encode(CONVERSATION[:2], TOOLS)
    assert plain.token_ids == tiny_tokenizer(renderer.render_text(CONVERSATION[:2], TOOLS, True),
                                             add_special_tokens=False)["input_ids"]


def test_native_tool_template_gets_the_tools(tiny_tokenizer):
    template = ("{% if tools %}TOOLS:{% for t in tools %}{{ t.function.name }};{% endfor %}\n{% endif %}"
                "{% for m in messages %}{{ m.role }}: {{ m.content }}{{ eos_token }}\n{% endfor %}"
                "{% if add_generation_prompt %}assistant: {% endif %}")
    renderer = ChatRenderer(tiny_tokenizer, chat_template=template)
    text = renderer.render_text(CONVERSATION[:2], TOOLS, add_generation_prompt=True)
    assert text.startswith("TOOLS:get_price;system: You are a natural-gas expert.")  # HF templates trim blocks
    assert text.endswith("assistant: ")


def test_sft_mask_covers_assistant_turns_only(tiny_tokenizer):
    renderer = ChatRenderer(tiny_tokenizer)
    rendered = renderer.encode_conversation(CONVERSATION, TOOLS)
    trained = [tiny_tokenizer.decode(s.token_ids) for s in rendered.segments if s.author == "llm"]
    assert trained == [
        '<tool_call>\n{"name": "get_price", "arguments": {"city": "Houston"}}\n</tool_call><|im_end|>',
        "Gas in Houston costs 3.1 USD/MMBtu.<|im_end|>",
    ]
    # the full text is the template's rendering of the conversation, nothing lost or added
    full = renderer.render_text(CONVERSATION, TOOLS, False)
    assert full.startswith(tiny_tokenizer.decode(rendered.token_ids)) and full.endswith("USD/MMBtu.<|im_end|>\n")
    assert tiny_tokenizer.decode(rendered.token_ids).endswith("USD/MMBtu.<|im_end|>")


async def test_sft_rendering_equals_the_gateway_recorded_sample(tiny_tokenizer):
    """Mask parity: if the model generates exactly the demonstration's tokens through the gateway,
    the recorded sample is token for token the SFT sample."""
    renderer = ChatRenderer(tiny_tokenizer)
    sft = renderer.encode_conversation(CONVERSATION, TOOLS)
    sft_mask = [1 if s.author == "llm" else 0 for s in sft.segments for _ in s.token_ids]
    turns = [{"token_ids": s.token_ids} for s in sft.segments if s.author == "llm"]
    engine = scripted_engine(tiny_tokenizer, turns)
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        messages = CONVERSATION[:2]
        r = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
        call = r.choices[0].message.tool_calls[0]
        messages = messages + [r.choices[0].message.model_dump(exclude_none=True),
                               {"role": "tool", "tool_call_id": call.id, "content": '{"price": 3.1}'}]
        r = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
        assert r.choices[0].message.content == CONVERSATION[-1]["content"]
    samples, _ = build_samples(session.tracker.calls, reward=1.0, group_id="g", episode_id="e", task_id="t")
    assert len(samples) == 1
    assert samples[0].input_ids == sft.token_ids
    assert samples[0].loss_mask == sft_mask


def test_tool_parser_cases():
    ok = parse_tool_calls('Let me check.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>')
    assert ok.content == "Let me check." and ok.malformed == 0
    assert json.loads(ok.tool_calls[0]["function"]["arguments"]) == {"a": 1}
    two = parse_tool_calls('<tool_call>{"name": "f", "arguments": "{\\"a\\": 2}"}</tool_call>'
                           '<tool_call>{"name": "g", "parameters": {}}</tool_call>')
    assert [c["function"]["name"] for c in two.tool_calls] == ["f", "g"]
    assert json.loads(two.tool_calls[0]["function"]["arguments"]) == {"a": 2}
    for bad, why in [('<tool_call>{"name": "f"', "not closed"), ("<tool_call>[1]</tool_call>", "no string 'name'"),
                     ('<tool_call>{"name": "f", "arguments": 3}</tool_call>', "not an object")]:
        parsed = parse_tool_calls(bad)
        assert parsed.malformed == 1 and parsed.content == bad and why in parsed.error
    assert parse_tool_calls("no calls here").tool_calls == []
    assert parse_tool_calls('<tool_call>{"name": "h"}</tool_call>', {"f"}).malformed == 1
