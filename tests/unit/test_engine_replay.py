"""ReplayEngine: recorded episodes matched by prompt ids, scripted completions in order, clear errors."""

from __future__ import annotations

import json

import pytest

from ajet.engine.base import SamplingParams
from ajet.engine.replay import ReplayEngine
from ajet.errors import EngineError

SAMPLING = SamplingParams(max_tokens=64, temperature=1.0)


def call(prompt, completion, logprobs=None, finish="stop") -> dict:
    return {"prompt_ids": prompt, "completion_ids": completion, "logprobs": logprobs, "finish_reason": finish}


@pytest.fixture
def episodes_file(tmp_path):
    p1, p2 = [1, 10, 11, 12], [1, 10, 11, 12, 40, 41, 2, 50]
    episodes = [
        {"task_id": "a", "reward": 1.0, "llm_calls": [
            call(p1, [40, 41, 2], [-0.5, -0.25, -0.125], "tool_calls"),
            call(p2, [60, 2], [-1.0, -2.0]),
        ]},
        {"task_id": "b", "error": "timeout"},  # failed before any LLM call: nothing to play
        {"task_id": "a", "reward": 0.0, "llm_calls": [call(p1, [70, 71, 72], [-3.0, -3.0, -3.0], "length")]},
    ]
    path = tmp_path / "episodes.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in episodes) + "\n\n")
    return path, p1, p2


async def test_recorded_completions_are_matched_by_prompt_in_recorded_order(episodes_file):
    path, p1, p2 = episodes_file
    engine = ReplayEngine(path)
    assert engine.mode == "recorded" and engine.unplayed() == 3
    first = await engine.generate(p1, SAMPLING)
    assert (first.token_ids, first.logprobs, first.finish_reason) == ([40, 41, 2], [-0.5, -0.25, -0.125], "stop")
    second = await engine.generate(p2, SAMPLING)
    assert (second.token_ids, second.logprobs, second.finish_reason) == ([60, 2], [-1.0, -2.0], "stop")
    third = await engine.generate(p1, SAMPLING)
    assert (third.token_ids, third.finish_reason) == ([70, 71, 72], "length")
    assert engine.unplayed() == 0 and engine.played == 3
    with pytest.raises(EngineError, match="all 2 recorded completions of this prompt were played"):
        await engine.generate(p1, SAMPLING)


async def test_repeat_plays_a_prompt_again(episodes_file):
    path, p1, _ = episodes_file
    engine = ReplayEngine(path, repeat=True)
    played = [(await engine.generate(p1, SAMPLING)).token_ids for _ in range(3)]
    assert played == [[40, 41, 2], [70, 71, 72], [40, 41, 2]]


async def test_unknown_prompt_error_shows_its_tail_and_the_closest_recording(episodes_file, tiny_tokenizer):
    path, p1, _ = episodes_file
    engine = ReplayEngine(path, tiny_tokenizer)
    hello = tiny_tokenizer.encode("Hello world")
    assert hello == [19556, 905]
    with pytest.raises(EngineError) as info:
        await engine.generate([1, 10, 11] + hello, SAMPLING)
    message = str(info.value)
    assert "no recorded completion for this prompt (5 tokens, ending with" in message
    assert "Hello world" in message
    assert "2 distinct prompts are recorded" in message
    assert "closest shares its first 3 tokens" in message


async def test_scripted_json_file_plays_in_order_whatever_the_prompt(tmp_path, tiny_tokenizer):
    path = tmp_path / "script.json"
    path.write_text(json.dumps([
        {"text": "Hello world"},
        {"token_ids": [5, 6, 7], "logprobs": [-1, -2, -3]},
        {"text": "Hello", "eos": False},
    ]))
    engine = ReplayEngine(path, tiny_tokenizer)
    assert engine.mode == "scripted"
    a = await engine.generate([99], SAMPLING)
    assert a.token_ids == [19556, 905, 2] and a.logprobs == [0.0, 0.0, 0.0] and a.finish_reason == "stop"
    b = await engine.generate([1, 2, 3], SAMPLING)
    assert b.token_ids == [5, 6, 7] and b.logprobs == [-1.0, -2.0, -3.0]
    c = await engine.generate([], SAMPLING)
    assert c.token_ids == [19556]
    with pytest.raises(EngineError, match="all 3 scripted completions of .*script.json were played"):
        await engine.generate([99], SAMPLING)


async def test_scripted_python_list_and_jsonl_lines(tmp_path, tiny_tokenizer):
    engine = ReplayEngine(["Hello world", {"token_ids": [3]}], tiny_tokenizer, repeat=True)
    got = [(await engine.generate([1], SAMPLING)).token_ids for _ in range(3)]
    assert got == [[19556, 905, 2], [3], [19556, 905, 2]]
    path = tmp_path / "script.jsonl"
    path.write_text('{"token_ids": [8, 9]}\n\n{"token_ids": [10]}\n')
    lines = ReplayEngine(path)
    assert [(await lines.generate([1], SAMPLING)).token_ids for _ in range(2)] == [[8, 9], [10]]


async def test_max_tokens_cuts_a_longer_completion(tiny_tokenizer):
    engine = ReplayEngine([{"token_ids": [4, 5, 6, 7], "logprobs": [-1, -1, -1, -1]}])
    gen = await engine.generate([1], SamplingParams(max_tokens=2))
    assert gen.token_ids == [4, 5] and gen.logprobs == [-1.0, -1.0] and gen.finish_reason == "length"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"llm_calls": [{"prompt_ids": [1]}]}\n', r"episodes.jsonl:1 llm_calls\[0\]: a recorded call needs"),
        ('{"llm_calls": []}\n{"llm_calls": "x"}\n', r"episodes.jsonl:2: an episode is an object"),
        ('{"llm_calls": [{"prompt_ids": [1], "completion_ids": [2, 3], "logprobs": [-1]}]}\n',
         "logprobs must be a list of 2 numbers"),
        ('{"llm_calls": [{"prompt_ids": [1, "a"], "completion_ids": [2]}]}\n',
         "prompt_ids must be a list of token ids"),
        ("{not json\n", r"episodes.jsonl:1: not valid JSON"),
        ('{"llm_calls": []}\n', "has episodes but no llm_calls"),
        ("\n", "holds no completions"),
    ],
)
def test_bad_recordings_are_reported_with_file_and_line(tmp_path, content, message):
    path = tmp_path / "episodes.jsonl"
    path.write_text(content)
    with pytest.raises(EngineError, match=message):
        ReplayEngine(path)


def test_bad_scripts_and_missing_files(tmp_path):
    with pytest.raises(EngineError, match="does not exist; set engine.replay_file"):
        ReplayEngine(tmp_path / "missing.jsonl")
    with pytest.raises(EngineError, match=r"item 0: a scripted completion is"):
        ReplayEngine([{"text": "a", "token_ids": [1]}])
    with pytest.raises(EngineError, match="a text completion needs a tokenizer"):
        ReplayEngine(["hello"])


async def test_build_engine_makes_replay_and_remote_engines(tmp_path, tiny_model_path, tiny_tokenizer):
    from ajet.config.schema import AjetConfig
    from ajet.engine.factory import build_engine
    from ajet.engine.remote import RemoteEngine

    script = tmp_path / "script.json"
    script.write_text('[{"text": "Hello world"}]')
    cfg = AjetConfig(workflow="wf.py:W", model={"path": tiny_model_path},
                     engine={"type": "replay", "replay_file": str(script)})
    engine = build_engine(cfg)  # loads the model's tokenizer to tokenize the scripted text
    assert isinstance(engine, ReplayEngine)
    assert (await engine.generate([1], SAMPLING)).token_ids == [19556, 905, 2]
    cfg = AjetConfig(workflow="wf.py:W", engine={"type": "remote", "base_url": "http://127.0.0.1:9/v1/",
                                                 "model": "m", "request_timeout_s": 5})
    remote = build_engine(cfg, tiny_tokenizer)
    assert isinstance(remote, RemoteEngine)
    assert (remote.base_url, remote.model_name, remote.timeout_s) == ("http://127.0.0.1:9/v1", "m", 5)
    assert remote.tokenizer is tiny_tokenizer
