"""Context tracker: merging of LLM calls into samples, checked token by token over the real gateway."""

from __future__ import annotations

import json
import math

import openai
import pytest

from ajet.tracker.merge import build_samples, merge_calls
from ajet.tracker.timeline import LLMCall, Segment
from tests.unit.gw_helpers import open_episode, running_gateway, scripted_engine

TOOLS = [{"type": "function", "function": {"name": "get_price", "description": "Gas price of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CALL = '<tool_call>\n{"name": "get_price", "arguments": {"city": "Houston"}}\n</tool_call>'


def samples_of(session, tokenizer, mode="token"):
    return build_samples(session.tracker.calls, reward=1.0, group_id="g", episode_id=session.episode_id,
                         task_id="t", mode=mode, decode=lambda ids: tokenizer.decode(ids))


def assert_mask_covers_exactly_completions(sample, calls):
    """Mask is 1 exactly on every call's completion ids, at the offset where that call's prompt ends."""
    expected = [0] * len(sample.input_ids)
    for call in calls:
        start = len(call.prompt_ids)
        assert sample.input_ids[start:start + len(call.completion_ids)] == call.completion_ids
        for i in range(start, start + len(call.completion_ids)):
            expected[i] = 1
    assert sample.loss_mask == expected


async def test_linear_multi_turn_is_one_sample(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": CALL}, {"text": "It is 3.1 USD."}, {"text": "You're welcome."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        messages = [{"role": "user", "content": "Gas price in Houston?"}]
        r = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
        call = r.choices[0].message.tool_calls[0]
        messages += [r.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"price": 3.1})}]
        r = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
        messages += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Thanks!"}]
        await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    calls = session.tracker.calls
    samples, stats = samples_of(session, tiny_tokenizer)
    assert len(calls) == 3 and len(samples) == 1
    assert samples[0].input_ids == calls[-1].tokens
    assert_mask_covers_exactly_completions(samples[0], calls)
    assert stats.llm_calls == 3 and stats.samples == 1
    assert stats.tokens_before == sum(len(c.tokens) for c in calls)
    assert stats.tokens_after == len(calls[-1].tokens) < stats.tokens_before
    assert samples[0].fork_reason is None


async def test_the_same_reply_twice_splices_each_turn_and_trains_both(tiny_tokenizer):
    # an agent retrying the same tool call gets the same message twice; each occurrence in the
    # history is its own generated turn (the first was once spliced as the second: untrained)
    engine = scripted_engine(tiny_tokenizer, [{"text": CALL}, {"text": CALL}, {"text": "It is 3.1 USD."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        messages = [{"role": "user", "content": "Gas price in Houston?"}]
        for _ in range(2):
            r = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
            call = r.choices[0].message.tool_calls[0]
            messages += [r.choices[0].message.model_dump(exclude_none=True),
                         {"role": "tool", "tool_call_id": call.id, "content": "timeout"}]
        await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    calls = session.tracker.calls
    assert [s.call_index for s in calls[2].prompt_segments if s.author == "llm"] == [0, 1]
    samples, _ = samples_of(session, tiny_tokenizer)
    assert len(samples) == 1
    assert_mask_covers_exactly_completions(samples[0], calls)


async def test_calls_of_an_episode_draw_different_seeds(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "a"}, {"text": "b"}, {"text": "c"}])
    seeds = []
    generate = engine.generate

    async def spy(prompt_ids, sampling):
        seeds.append(sampling.seed)
        return await generate(prompt_ids, sampling)

    engine.generate = spy
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway, seed=7)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        messages = [{"role": "user", "content": "hi"}]
        for _ in range(2):
            r = await client.chat.completions.create(model="m", messages=messages)
            messages += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "more"}]
        await client.chat.completions.create(model="m", messages=messages, seed=123)  # the client's seed wins
    assert seeds[0] != seeds[1] and seeds[2] == 123 and all(0 <= s < 2**63 for s in seeds[:2])
    again = open_episode(gateway, "ep2", seed=7)[0]
    assert again.call_seed() == seeds[0]  # stable: a resumed run draws the same numbers


async def test_non_canonical_generated_ids_are_spliced_not_retokenized(tiny_tokenizer):
    canonical = tiny_tokenizer("Paris", add_special_tokens=False)["input_ids"]
    odd = [tiny_tokenizer.convert_tokens_to_ids(c) for c in "Paris"]  # one token per letter
    assert odd != canonical and tiny_tokenizer.decode(odd) == "Paris"
    generated = odd + [tiny_tokenizer.eos_token_id]
    engine = scripted_engine(tiny_tokenizer, [{"token_ids": generated}, {"text": "Yes."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        messages = [{"role": "user", "content": "Capital of France?"}]
        r = await client.chat.completions.create(model="m", messages=messages)
        assert r.choices[0].message.content == "Paris"
        messages += [{"role": "assistant", "content": "Paris"}, {"role": "user", "content": "Sure?"}]
        await client.chat.completions.create(model="m", messages=messages)
    first, second = session.tracker.calls
    assert second.prompt_ids[: len(first.tokens)] == first.tokens  # exact ids, not the canonical "Paris"
    samples, _ = samples_of(session, tiny_tokenizer)
    assert len(samples) == 1
    assert_mask_covers_exactly_completions(samples[0], [first, second])


def _call(index, prompt, completion, agent="a", tools_key="[]", llm_spans=()):
    """A hand-built call: `llm_spans` are (start, end) ranges of `prompt` generated earlier."""
    segments, at = [], 0
    for start, end in llm_spans:
        segments += [Segment("prompt", prompt[at:start]), Segment("llm", prompt[start:end], [-0.1] * (end - start))]
        at = end
    segments.append(Segment("prompt", prompt[at:]))
    return LLMCall(index=index, agent=agent, trained=True, prompt_segments=[s for s in segments if s.token_ids],
                   completion_ids=completion, completion_logprobs=[-0.5] * len(completion), finish_reason="stop",
                   tools_key=tools_key)


def test_build_samples_hands_each_merged_sample_its_calls_turn_rewards():
    # agent a: calls 0 and 2 merge into one sample of two spans; agent b: call 1 alone
    a0 = _call(0, [5, 6], [7, 8])
    b1 = _call(1, [40, 41], [42], agent="b")
    a2 = _call(2, [5, 6, 7, 8, 9], [10], llm_spans=[(2, 4)])
    samples, _ = build_samples([a0, b1, a2], reward=1.0, group_id="g", episode_id="e", task_id="t",
                               turn_rewards=[0.25, 0.5, 1.0])
    by_agent = {s.agent: s for s in samples}
    assert by_agent["a"].spans == [(2, 4), (5, 6)] and by_agent["a"].turn_rewards == [0.25, 1.0]
    assert by_agent["b"].turn_rewards == [0.5]
    # a list that does not give one reward per trained call is dropped: the samples keep the episode reward only
    samples, _ = build_samples([a0, b1, a2], reward=1.0, group_id="g", episode_id="e", task_id="t", turn_rewards=[1.0])
    assert all(s.turn_rewards is None for s in samples)


def test_drift_forks_in_token_mode_and_merges_in_text_mode(tiny_tokenizer):
    tok = tiny_tokenizer
    prompt = tok("<|im_start|>user\nCapital?<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    odd = [tok.convert_tokens_to_ids(c) for c in "Paris"] + [tok.eos_token_id]
    canonical = tok("Paris<|im_end|>", add_special_tokens=False)["input_ids"]
    follow = tok("\n<|im_start|>user\nSure?<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    first = _call(0, prompt, odd)
    second = _call(1, prompt + canonical + follow, tok("Yes<|im_end|>", add_special_tokens=False)["input_ids"])
    decode = lambda ids: tok.decode(ids)  # noqa: E731

    timelines, stats = merge_calls([first, second], "token", decode)
    assert len(timelines) == 2 and stats.forks == {"retokenized": 1}

    timelines, stats = merge_calls([first, second], "text", decode)
    assert len(timelines) == 1 and not stats.forks
    merged = timelines[0]
    start = len(prompt)
    # the re-tokenized "Paris<|im_end|>" span is trained, with unknown (NaN) sampling logprobs
    assert merged.mask[start:start + len(canonical)] == [1] * len(canonical)
    assert all(math.isnan(x) for x in merged.logprobs[start:start + len(canonical)])
    assert merged.mask[:start] == [0] * start
    assert sum(merged.mask) == len(canonical) + len(second.completion_ids)


def test_off_mode_keeps_one_sample_per_call(tiny_tokenizer):
    a = _call(0, [5, 6, 7], [8, 9])
    b = _call(1, [5, 6, 7, 8, 9, 10], [11], llm_spans=[(3, 5)])
    timelines, stats = merge_calls([a, b], "off")
    assert [t.mask for t in timelines] == [[0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0, 1]]
    timelines, stats = merge_calls([a, b], "token")
    assert [t.mask for t in timelines] == [[0, 0, 0, 1, 1, 0, 1]]
    assert timelines[0].logprobs == [0, 0, 0, -0.1, -0.1, 0, -0.5]


def test_tools_changed_and_other_agent_fork():
    a = _call(0, [1, 2], [3], tools_key="A")
    b = _call(1, [1, 2, 3, 4], [5], tools_key="B")  # the same tokens, but the tool set changed
    c = _call(2, [1, 2, 3, 4, 5, 6], [7], agent="other")
    timelines, stats = merge_calls([a, b, c], "token")
    # token prefix is what decides merging; tools_changed is only a reason when a merge is impossible
    assert len(timelines) == 2 and stats.forks == {"different_agent": 1}
    d = _call(3, [1, 9], [3], tools_key="C")
    timelines, stats = merge_calls([a, d], "token")
    assert stats.forks == {"tools_changed": 1}


async def test_think_stripped_history_forks_with_reason(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "<think>2+2 is 4</think>The answer is 4."}, {"text": "Ok."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        messages = [{"role": "user", "content": "2+2?"}]
        r = await client.chat.completions.create(model="m", messages=messages)
        assert r.choices[0].message.content.startswith("<think>")
        # like thinking models' templates: the earlier reasoning is dropped from the history
        messages += [{"role": "assistant", "content": "The answer is 4."}, {"role": "user", "content": "Why?"}]
        await client.chat.completions.create(model="m", messages=messages)
    samples, stats = samples_of(session, tiny_tokenizer)
    assert len(samples) == 2 and stats.forks == {"think_stripped": 1}
    assert samples[1].fork_reason == "think_stripped"
    assert_mask_covers_exactly_completions(samples[1], [session.tracker.calls[1]])


async def test_edited_history_and_two_agents(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "Hello."}, {"text": "Hi again."}, {"text": "I judge: good."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway)
        actor = openai.AsyncOpenAI(base_url=url, api_key=issue("actor"))
        critic = openai.AsyncOpenAI(base_url=url, api_key=issue("critic"))
        await actor.chat.completions.create(model="m", messages=[{"role": "user", "content": "Say hello"}])
        edited = [{"role": "user", "content": "Say hello!!"}, {"role": "assistant", "content": "Hello."},
                  {"role": "user", "content": "Again"}]
        await actor.chat.completions.create(model="m", messages=edited)
        await critic.chat.completions.create(model="m", messages=[{"role": "user", "content": "Judge: Hello."}])
    samples, stats = samples_of(session, tiny_tokenizer)
    assert [s.agent for s in samples] == ["actor", "actor", "critic"]
    assert [s.fork_reason for s in samples] == [None, "history_edited", "different_agent"]
    assert stats.forks == {"history_edited": 1, "different_agent": 1}
    for sample, call in zip(samples, session.tracker.calls):
        assert_mask_covers_exactly_completions(sample, [call])


async def test_untrained_agent_is_recorded_but_not_sampled(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "A."}, {"text": "B."}])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        session, issue = open_episode(gateway, is_trained=lambda agent: agent == "actor")
        for agent in ("actor", "user_sim"):
            client = openai.AsyncOpenAI(base_url=url, api_key=issue(agent))
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": agent}])
    assert len(session.tracker.calls) == 2
    samples, _ = samples_of(session, tiny_tokenizer)
    assert [s.agent for s in samples] == ["actor"]


@pytest.mark.parametrize("mode", ["token", "text"])
async def test_logprobs_of_hf_engine_land_on_masked_positions(tiny_model_path, tiny_tokenizer, mode):
    from ajet.engine.hf import HFEngine

    engine = HFEngine.from_pretrained(tiny_model_path, device="cpu")
    async with running_gateway(engine, engine.tokenizer) as (gateway, url):
        session, issue = open_episode(gateway, max_tokens=8, temperature=1.0, seed=3)
        client = openai.AsyncOpenAI(base_url=url, api_key=issue("assistant"))
        messages = [{"role": "user", "content": "hi"}]
        r = await client.chat.completions.create(model="m", messages=messages)
        messages += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "more"}]
        await client.chat.completions.create(model="m", messages=messages)
    calls = session.tracker.calls
    samples, _ = samples_of(session, tiny_tokenizer, mode)
    assert len(samples) == 1
    sample = samples[0]
    for call in calls:
        start = len(call.prompt_ids)
        assert sample.old_logprobs[start:start + len(call.completion_ids)] == call.completion_logprobs
    assert all(lp == 0.0 for lp, m in zip(sample.old_logprobs, sample.loss_mask) if not m)
