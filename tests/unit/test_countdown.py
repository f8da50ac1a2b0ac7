"""The countdown tutorial: the verifier, the solver, the judge, the shipped data, and the AgentScope
agent driven through its ajet adapter against a scripted OpenAI server over real HTTP."""

from __future__ import annotations

import ast
import itertools
import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from ajet import Task, Tuner, WorkflowOutput
from ajet.errors import ConfigError
from ajet.judge import build_judge
from ajet.plugins import load_object

FOLDER = Path(__file__).resolve().parents[2] / "tutorial" / "example_countdown"
CountdownWorkflow = load_object(f"{FOLDER / 'agent.py'}:CountdownWorkflow")  # puts the folder on sys.path
import countdown  # noqa: E402
from countdown_agent import SEARCH_PROMPT, SYSTEM_PROMPT  # noqa: E402


def task(numbers: list[int], target: int) -> Task:
    return Task(task_id="t", query=f"Numbers: {numbers}. Target: {target}.", answer=target,
                metadata={"numbers": numbers, "target": target})


@pytest.mark.parametrize("expression, value, used", [
    ("(3 + 5) * 4", 32, [3, 5, 4]),
    ("6 / 4 * 2", 3, [6, 4, 2]),            # exact: (6/4)*2 = 3/2*2 = 3
    ("10 - 12 + 7", 5, [10, 12, 7]),        # left to right: -2 + 7
    ("7 × 2 ÷ 7", 2, [7, 2, 7]),            # the typographic signs are read as * and /
    ("9 / 2", Fraction(9, 2), [9, 2]),
])
def test_parse_computes_exact_values_and_lists_the_numbers(expression, value, used):
    assert countdown.parse(expression) == (value, used)


@pytest.mark.parametrize("expression, message", [
    ("3 ** 2", "only integers"),
    ("3 // 2", "only integers"),
    ("abs(-3)", "only integers"),
    ("-3 + 4", "only integers"),          # a sign is not an operation of the game
    ("2.5 * 2", "only integers"),
    ("True + 1", "only integers"),
    ("'a' + 'b'", "only integers"),
    ("4 / (2 - 2)", "division by zero"),
    ("3 +", "not an expression"),
    ("1 + " * 40 + "1", "longer than 120"),
])
def test_parse_refuses_everything_else(expression, message):
    with pytest.raises(countdown.InvalidExpression, match=message):
        countdown.parse(expression)


@pytest.mark.parametrize("expression, solved, why", [
    ("(3 + 5) * 4", True, "solved"),
    ("4 * (5 + 3)", True, "solved"),
    ("3 * 5 + 4", False, "equals 19, not 32"),
    ("(3 + 5) * 4 * 1", False, "uses [1, 3, 4, 5], not each of [3, 4, 5] once"),
    ("8 * 4", False, "uses [4, 8], not each of [3, 4, 5] once"),
    (None, False, "no <answer>...</answer>"),
    ("32", False, "uses [32], not each of [3, 4, 5] once"),
])
def test_verify(expression, solved, why):
    assert countdown.verify(expression, [3, 5, 4], 32) == (solved, why)


def test_extract_answer_takes_the_last_tag():
    assert countdown.extract_answer("try <answer>1 + 2</answer> no, <answer> 3 * 1 </answer>") == "3 * 1"
    assert countdown.extract_answer("The answer is 15.") is None
    assert countdown.extract_answer(None) is None


def test_solver_finds_a_verified_solution_or_none():
    assert countdown.solve([3, 5, 4], 32) == "(3 + 5) * 4"
    assert countdown.solve([3, 5, 4], 12) == "(3 + 5) + 4"  # left-nested, given order first
    assert countdown.solve([6, 4, 2], 3) == "(6 / 4) * 2"
    assert countdown.solve([1, 1, 1], 100) is None  # at most 3 from three ones


# ---------------------------------------------------------------------------- the judge


@pytest.fixture
def judge():
    return build_judge({"type": "judge.py:CountdownJudge", "args": {"format_reward": 0.1}}, FOLDER)


@pytest.mark.parametrize("answer, total, success", [
    ("<answer>(3 + 5) * 4</answer>", 1.0, True),
    ("Let me think. <answer>4 * (3 + 5)</answer>", 1.0, True),
    ("<answer>3 * 5 + 4</answer>", 0.1, False),        # well formed, all numbers once, wrong value
    ("<answer>8 * 4</answer>", 0.0, False),            # 32, but not from the given numbers
    ("<answer>3 ** 5 + 4</answer>", 0.0, False),       # not an allowed expression
    ("The answer is 32.", 0.0, False),                 # the base model's habit: no tag
    ("", 0.0, False),
])
async def test_judge_scores(judge, answer, total, success):
    reward = await judge.score(task([3, 5, 4], 32), WorkflowOutput(answer=answer))
    assert (reward.total, reward.is_success) == (total, success)
    assert reward.parts["solved"] == float(success)


@pytest.mark.parametrize("answer, total, success", [
    ("<answer>3 + 5</answer>", 1.0, True),             # two of the three numbers reach 8
    ("<answer>(3 + 5) * 4</answer>", 0.1, False),      # all three, well formed, 32
    ("<answer>3 + 3</answer>", 0.0, False),            # 3 used twice
    ("<answer>8</answer>", 0.0, False),                # a single number is not an expression of the numbers
])
async def test_judge_at_most_once_rule(answer, total, success):
    judge = build_judge({"type": "judge.py:CountdownJudge", "args": {"use_all": False}}, FOLDER)
    reward = await judge.score(task([3, 5, 4], 8), WorkflowOutput(answer=answer))
    assert (reward.total, reward.is_success) == (total, success)


def test_solve_at_most_once_prefers_fewer_numbers():
    assert countdown.solve([3, 5, 4], 8, use_all=False) == "3 + 5"
    assert countdown.solve([3, 5, 4], 32, use_all=False) == "(3 + 5) * 4"
    assert countdown.solve([3, 5, 4], 8) == "(5 - 3) * 4"  # the exactly-once rule needs all three
    assert countdown.verify("3 + 5", [3, 5, 4], 8) == (False, "uses [3, 5], not each of [3, 4, 5] once")


async def test_judge_scores_a_non_text_answer_zero(judge):
    reward = await judge.score(task([3, 5, 4], 32), WorkflowOutput(answer={"expr": "(3 + 5) * 4"}))
    assert reward.total == 0.0 and reward.feedback == "no <answer>...</answer>"


def test_judge_refuses_a_format_reward_outside_0_1():
    with pytest.raises(ConfigError, match=r"format_reward = 1.5; it must lie in \[0, 1\)"):
        build_judge({"type": "judge.py:CountdownJudge", "args": {"format_reward": 1.5}}, FOLDER)


# ---------------------------------------------------------------------------- shipped data


def test_search_trace_by_hand():
    # one line per pair result, then that result with the third number; stop at the target
    assert countdown.search_trace([3, 5, 4], 8) == ("3+5=8", "3+5")
    assert countdown.search_trace([3, 5, 4], 32) == ("3+5=8, 8+4=12, 8*4=32", "(3+5)*4")
    trace, answer = countdown.search_trace([5, 8, 1], 32)
    assert trace.splitlines() == [
        "5+8=13, 13+1=14, 13*1=13, 13-1=12",
        "5*8=40, 40+1=41, 40*1=40, 40-1=39",
        "8-5=3, 3+1=4, 3*1=3, 3-1=2",           # the larger number first
        "5+1=6, 6+8=14, 6*8=48, 8-6=2",         # a result below the third number is subtracted from it
        "5*1=5, 5+8=13, 5*8=40, 8-5=3",
        "5-1=4, 4+8=12, 4*8=32"]
    assert answer == "(5-1)*8"
    assert countdown.search_trace([2, 4, 9], 3)[1] == "9-(2+4)"  # z - (x + y): the pair sum subtracted
    trace, answer = countdown.search_trace([1, 1, 1], 50)
    assert answer is None and len(trace.splitlines()) == 9  # the whole search, nothing found
    with pytest.raises(ValueError, match="three numbers"):
        countdown.search_trace([1, 2], 3)


def test_search_trace_finds_every_reachable_target():
    # every whole target + - * make of two or three of three numbers: the search is complete
    for numbers in ([1, 2, 3], [2, 9, 4], [7, 7, 10], [10, 1, 6]):
        targets = {int(v) for size in (2, 3) for picked in itertools.combinations(numbers, size)
                   for e, v in countdown.expressions(picked) if "/" not in e and v.denominator == 1 and v >= 1}
        for target in targets:
            answer = countdown.search_trace(numbers, target)[1]
            assert countdown.verify(answer, numbers, target, use_all=False) == (True, "solved"), (numbers, target)


def test_make_data_reproduces_the_shipped_files(tmp_path):
    run = subprocess.run([sys.executable, "make_data.py", "--out", str(tmp_path)], cwd=FOLDER,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    for name in ["train.jsonl", "val.jsonl", "heldout.jsonl", "sft.jsonl", "sft_search.jsonl", "heldout2.jsonl",
                 "heldout3.jsonl"]:
        assert (tmp_path / name).read_bytes() == (FOLDER / name).read_bytes(), name


def test_every_puzzle_is_solved_by_its_solution_and_demonstration():
    splits = ["train", "val", "heldout", "sft", "heldout2", "heldout3"]
    rows = {n: [json.loads(x) for x in (FOLDER / f"{n}.jsonl").read_text().splitlines()] for n in splits}
    assert [len(rows[n]) for n in splits] == [96, 32, 128, 768, 128, 128]
    key = lambda r: (tuple(sorted(r["metadata"]["numbers"])), r["answer"])  # noqa: E731
    keys = [{key(r) for r in rows[n]} for n in ("train", "val", "heldout", "heldout2", "heldout3")]
    # the demonstrations past the train ones: puzzles of no split, read back from their query
    numbers_target = [list(map(int, re.findall(r"\d+", d["messages"][1]["content"]))) for d in rows["sft"][96:]]
    keys.append({(tuple(sorted(v[:-1])), v[-1]) for v in numbers_target})
    assert sum(map(len, keys)) == len(set().union(*keys)) == 96 + 32 + 128 + 128 + 128 + 672  # no puzzle twice
    for split in ("train", "val", "heldout", "heldout2", "heldout3"):
        # half the targets take one operation, half two (and no fewer): sized for the 135M model
        assert sum(r["metadata"]["ops"] == 1 for r in rows[split]) == len(rows[split]) // 2
        for row in rows[split]:
            m = row["metadata"]
            assert row["answer"] == m["target"] and 1 <= m["target"] <= 50
            assert countdown.verify(m["solution"], m["numbers"], m["target"], use_all=False) == (True, "solved")
            assert len(countdown.parse(m["solution"])[1]) == m["ops"] + 1
            assert m["category"] == {1: "one_op", 2: "two_op"}[m["ops"]]  # what rollout.task_weights reads
            assert countdown.solve(m["numbers"], m["target"], use_all=False) == m["solution"]
    for row, demo in zip(rows["train"], rows["sft"]):
        assert demo["messages"] == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": row["query"]},
                                    {"role": "assistant", "content": f"<answer>{row['metadata']['solution']}</answer>"}]
    for (*numbers, target), demo in zip(numbers_target, rows["sft"][96:]):
        answer = demo["messages"][2]["content"].removeprefix("<answer>").removesuffix("</answer>")
        assert countdown.verify(answer, numbers, target, use_all=False) == (True, "solved")
    search = [json.loads(x) for x in (FOLDER / "sft_search.jsonl").read_text().splitlines()]
    assert [d["messages"][:2] for d in search] == [
        [{"role": "system", "content": SEARCH_PROMPT}, d["messages"][1]] for d in rows["sft"]]  # the same puzzles
    for (*numbers, target), demo in zip([list(map(int, re.findall(r"\d+", d["messages"][1]["content"])))
                                         for d in search], search):
        trace, answer = countdown.search_trace(numbers, target)
        assert demo["messages"][2]["content"] == f"{trace}\n<answer>{answer}</answer>"
        assert countdown.verify(countdown.extract_answer(demo["messages"][2]["content"]), numbers, target,
                                use_all=False) == (True, "solved")


def test_the_agent_module_is_plain_agentscope():
    # the agent must be what an AgentScope user writes: no ajet import anywhere in it
    tree = ast.parse((FOLDER / "countdown_agent.py").read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(m.split(".")[0] == "ajet" for m in modules)
    assert {"agentscope.agent", "agentscope.model", "agentscope.credential"} <= modules


# ---------------------------------------------------------------------------- the AgentScope agent over HTTP


def tuner_for(server) -> Tuner:
    return Tuner(server.base_url, "policy", issue_key=lambda agent: f"key-{agent}")


async def test_agentscope_agent_calls_the_endpoint_with_the_episode_key(llm):
    # (streaming needs a server that streams: tests/e2e/test_tutorial_countdown.py runs it on the gateway)
    llm.script = [{"content": "<answer>(3 + 5) * 4</answer>"}]
    out = await CountdownWorkflow().execute(task([3, 5, 4], 32), tuner_for(llm))
    assert out.answer == "<answer>(3 + 5) * 4</answer>" and out.metadata["expression"] == "(3 + 5) * 4"
    request = llm.requests[0]
    assert llm.headers[0]["authorization"] == "Bearer key-solver"  # the key marks the episode and agent
    assert request["model"] == "policy" and request["stream"] is False
    sent = [(m["role"], m["content"][0]["text"]) for m in request["messages"]]  # AgentScope sends text parts
    assert sent == [("system", SYSTEM_PROMPT), ("user", "Numbers: [3, 5, 4]. Target: 32.")]
    assert "tools" not in request  # plain text, no tool calls


async def test_the_search_style_sends_its_prompt_and_reads_the_last_answer(llm):
    llm.script = [{"content": "3+5=8, 8+4=12, 8*4=32\n<answer>(3+5)*4</answer>"}]
    out = await CountdownWorkflow(style="search").execute(task([3, 5, 4], 32), tuner_for(llm))
    assert out.metadata["expression"] == "(3+5)*4" and out.messages[0] == {"role": "system", "content": SEARCH_PROMPT}
    assert llm.requests[0]["messages"][0]["content"][0]["text"] == SEARCH_PROMPT
    with pytest.raises(ValueError, match="style 'essay'"):
        await CountdownWorkflow(style="essay").execute(task([3, 5, 4], 32), tuner_for(llm))


async def test_a_refused_call_ends_the_episode_without_an_answer(llm):
    llm.script = ["400"]
    out = await CountdownWorkflow().execute(task([3, 5, 4], 32), tuner_for(llm))
    assert out.answer == "" and out.metadata["stop_reason"].startswith("llm_refused")
    assert len(llm.requests) == 1  # not retried


@pytest.mark.parametrize("item, error", [("500", "InternalServerError"), ("garbage", "AttributeError")])
async def test_a_broken_endpoint_raises_for_the_rollout_to_count(llm, item, error):
    llm.script = [item]
    with pytest.raises(Exception) as info:
        await CountdownWorkflow().execute(task([3, 5, 4], 32), tuner_for(llm))
    assert type(info.value).__name__ == error and len(llm.requests) == 1
