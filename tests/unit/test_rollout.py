"""Rollout: groups, concurrency, timeouts, retries, failing workflows and judges, episodes.jsonl."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from ajet import Judge, Reward, Task, Workflow, WorkflowOutput
from ajet.errors import ConfigError
from ajet.rollout.validation import eval_report, pass_at_k
from ajet.rollout.episode import EpisodeWriter
from ajet.rollout.runner import RolloutRunner, RolloutSettings
from tests.unit.gw_helpers import running_gateway, scripted_engine


class EchoAgent(Workflow):
    """Asks the model once; misbehaves on purpose for some queries."""

    async def execute(self, task: Task, tuner) -> WorkflowOutput:
        if task.query == "crash":
            raise RuntimeError("tool server down")
        if task.query == "hang":
            await asyncio.sleep(30)
        client = tuner.openai_client()
        r = await client.chat.completions.create(model=tuner.model, messages=[{"role": "user", "content": task.query}])
        return WorkflowOutput(answer=r.choices[0].message.content)


class FlakyAgent(Workflow):
    """Fails on the first attempt of every episode, succeeds on the retry."""

    def __init__(self):
        super().__init__()
        self.attempts = 0

    async def execute(self, task, tuner):
        self.attempts += 1
        if self.attempts % 2 == 1:
            raise ConnectionError("flaky")
        return WorkflowOutput(answer="ok", reward=0.5)


class LengthJudge(Judge):
    async def score(self, task, output):
        if output.answer == "boom":
            raise ValueError("judge bug")
        return Reward(total=float(len(output.answer or "") > 2), parts={"long": 1.0})


class RankJudge(Judge):
    scores_groups = True

    async def score(self, task, output):  # pragma: no cover - rank judges score groups
        raise AssertionError

    async def score_group(self, task, outputs):
        return [Reward(total=i / max(len(outputs) - 1, 1)) for i, _ in enumerate(outputs)]


def tasks(*queries):
    return [Task(task_id=f"t{i}", query=q) for i, q in enumerate(queries)]


async def test_failures_are_counted_and_written_never_raised(tiny_tokenizer, tmp_path):
    engine = scripted_engine(tiny_tokenizer, [{"text": "hello"}, {"text": "boom"}])
    writer = EpisodeWriter(tmp_path / "episodes.jsonl")
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, EchoAgent(), LengthJudge(), writer=writer)
        settings = RolloutSettings(group_size=1, episode_timeout_s=0.5, retries=1, concurrency=2)
        batch = await runner.run(tasks("a", "crash", "hang", "b"), settings, show_progress=False)
    writer.close()
    by_query = {e.task.query: e for e in batch.episodes}
    assert by_query["crash"].error == "RuntimeError: tool server down" and by_query["crash"].attempts == 2
    assert by_query["hang"].error.startswith("TimeoutError") and by_query["hang"].counters["timed_out"]
    assert by_query["a"].reward.total == 1.0 and by_query["a"].success and len(by_query["a"].samples) == 1
    assert by_query["b"].judge_error == "ValueError: judge bug" and by_query["b"].samples == []
    summary = batch.summary()
    assert summary["episodes"] == 4 and summary["failed"] == 2 and summary["judge_failed"] == 1
    assert summary["errors"] == {"RuntimeError": 1, "TimeoutError": 1}
    lines = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    row = next(r for r in lines if r["task"]["query"] == "a")
    assert row["answer"] == "hello" and row["reward"] == 1.0 and row["reward_parts"] == {"long": 1.0}
    assert row["llm_calls"][0]["completion_ids"] and row["samples"][0]["trained"] == len(
        row["llm_calls"][0]["completion_ids"])
    assert row["task"]["task_id"] == "t0" and row["tokens"]["generated"] > 0


async def test_retry_succeeds_and_workflow_reward_skips_the_judge(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, FlakyAgent(), LengthJudge())
        batch = await runner.run(tasks("x"), RolloutSettings(group_size=3, retries=1, concurrency=1),
                                 show_progress=False)
    assert [e.attempts for e in batch.episodes] == [2, 2, 2]
    assert all(e.reward.total == 0.5 and e.error is None for e in batch.episodes)
    assert len(gateway.keys) == 0  # every episode's keys were retired


async def test_group_judge_sees_the_whole_group(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [{"text": "x"}] * 4)
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, EchoAgent(), RankJudge())
        batch = await runner.run(tasks("q"), RolloutSettings(group_size=4, success_threshold=0.5),
                                 show_progress=False)
    assert sorted(e.reward.total for e in batch.episodes) == [0.0, 1 / 3, 2 / 3, 1.0]
    assert len({e.group_id for e in batch.episodes}) == 1
    report = eval_report(batch, group_size=4)
    assert report["success_rate"] == 0.5 and report["pass@4"] == 1.0 and report["pass@1"] == 0.5


def test_pass_at_k_by_hand():
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 1, 1) == 0.25
    assert abs(pass_at_k(4, 1, 2) - 0.5) < 1e-12  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 3, 2) == 1.0


class RewardOf(Workflow):
    """Answers with its query; the judge below returns what the query names."""

    async def execute(self, task, tuner):
        return WorkflowOutput(answer=task.query)


class LiteralJudge(Judge):
    VALUES = {"str": "0.5", "true": True, "huge": 1e308, "-huge": -1e308, "part": Reward(total=1.0, parts={"p": 1e7}),
              "bound": 1e6, "-bound": -1e6, "int": 2, "none": None,
              "f32": np.float32(0.25), "i64": np.int64(3)}  # numpy scalars (a judge's np.mean...) are numbers

    async def score(self, task, output):
        return self.VALUES[output.answer]


async def test_a_string_a_bool_or_a_reward_past_the_bound_is_a_judge_failure(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, RewardOf(), LiteralJudge())
        batch = await runner.run(tasks(*LiteralJudge.VALUES), RolloutSettings(group_size=1), show_progress=False)
    by = {e.task.query: e for e in batch.episodes}
    assert by["str"].judge_error == ("InvalidReward: the judge returned '0.5' (str), not a number or ajet.Reward; "
                                     "return a float (a bool or a string is not a reward)")
    assert by["true"].judge_error.startswith("InvalidReward: the judge returned 'True' (bool)")
    assert by["none"].judge_error.startswith("InvalidReward: the judge returned 'None' (NoneType)")
    assert by["huge"].judge_error == ("RewardOutOfRange: the judge returned {'total': 1e+308}; rewards must lie within "
                                      "±1e+06 (larger ones overflow the group statistics); scale the reward down")
    assert by["-huge"].judge_error.startswith("RewardOutOfRange") and by["part"].judge_error.startswith(
        "RewardOutOfRange: the judge returned {'p': 10000000.0}")
    assert [by[k].reward.total for k in ("bound", "-bound", "int", "f32", "i64")] == [1e6, -1e6, 2.0, 0.25, 3.0]  # the bound itself is fine
    assert batch.summary()["judge_failed"] == 6
    assert all(not by[k].samples and by[k].reward is None for k in ("str", "true", "huge", "-huge", "part"))


class Rewriter(Workflow):
    """Rewrites the Task it receives, nested metadata included, then answers the question it made up."""

    async def execute(self, task, tuner):
        seen = (task.query, task.answer, task.metadata["deep"]["n"])
        task.query, task.answer = "changed", "forged"
        task.metadata["deep"]["n"] += 1
        task.metadata["deep"]["list"].append("x")
        return WorkflowOutput(answer="forged", metadata={"seen": list(seen)})


class AnswerJudge(Judge):
    async def score(self, task, output):
        return float(output.answer == task.answer)


async def test_a_workflow_that_rewrites_its_task_changes_nothing_outside_its_episode(tiny_tokenizer, tmp_path):
    original = Task(task_id="t", query="What is 2+2?", answer="4", metadata={"deep": {"n": 0, "list": []}})
    writer = EpisodeWriter(tmp_path / "episodes.jsonl")
    engine = scripted_engine(tiny_tokenizer, [])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, Rewriter(), AnswerJudge(), writer=writer)
        first = await runner.run([original], RolloutSettings(group_size=3, concurrency=1), show_progress=False)
        second = await runner.run([original], RolloutSettings(group_size=1), step=2, show_progress=False)
    writer.close()
    # every repeat and the next step saw the reader's task; the judge scored "forged" against "4"
    assert [e.output.metadata["seen"] for e in first.episodes + second.episodes] == [["What is 2+2?", "4", 0]] * 4
    assert [e.reward.total for e in first.episodes + second.episodes] == [0.0] * 4
    assert original.model_dump() == {"task_id": "t", "query": "What is 2+2?", "answer": "4",
                                     "metadata": {"deep": {"n": 0, "list": []}}}
    logged = [json.loads(line)["task"] for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert logged == [original.model_dump()] * 4


class CountingAgent(Workflow):
    """Reports its own per-episode numbers, as the math-python tutorial counts its programs."""

    async def execute(self, task, tuner):
        if task.query == "crash":
            raise RuntimeError("no output, no metrics")
        runs = {"a": 1.0, "b": 3.0, "c": 2.0}[task.query]
        extra = {"timeouts": 1.0} if task.query == "b" else {}
        return WorkflowOutput(answer="ok", reward=1.0, metrics={"code_runs": runs, **extra})


async def test_workflow_metrics_are_averaged_over_the_episodes_that_report_them(tiny_tokenizer):
    engine = scripted_engine(tiny_tokenizer, [])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, CountingAgent(), LengthJudge())
        batch = await runner.run(tasks("a", "b", "c", "crash"), RolloutSettings(group_size=1, retries=0),
                                 show_progress=False)
    # (1 + 3 + 2) / 3: the crashed episode has no output; 'timeouts' only from the one episode that said it
    assert batch.summary()["workflow_metrics"] == {"code_runs": 2.0, "timeouts": 1.0}


class MisconfiguredAgent(Workflow):
    """Fails as a workflow does when its configuration is wrong (ajet.mcp_client: a server
    file that does not import), on every task or only on the one named 'bad'."""

    def __init__(self, only_bad: bool = False):
        super().__init__()
        self.only_bad = only_bad

    async def execute(self, task, tuner):
        if not self.only_bad or task.query == "bad":
            raise ConfigError("importing the MCP server file 'server.py' failed: ImportError: no fastmcp server")
        return WorkflowOutput(answer="fine", reward=1.0)


async def test_a_batch_where_every_episode_has_the_same_config_error_stops_with_it(tiny_tokenizer, tmp_path):
    engine = scripted_engine(tiny_tokenizer, [])
    writer = EpisodeWriter(tmp_path / "episodes.jsonl")
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, MisconfiguredAgent(), LengthJudge(), writer=writer)
        settings = RolloutSettings(group_size=2, retries=1, concurrency=2)
        with pytest.raises(ConfigError, match=r"all 4 episodes of rollout 3 failed \(retries included\) with "
                                              r"ConfigError: importing the MCP server file 'server.py' failed"):
            await runner.run(tasks("a", "b"), settings, label="rollout 3", show_progress=False)
        # one task whose episodes all fail among others that work: counted, as any failure
        runner = RolloutRunner(gateway, url, MisconfiguredAgent(only_bad=True), LengthJudge(), writer=writer)
        batch = await runner.run(tasks("a", "bad"), settings, show_progress=False)
    writer.close()
    assert batch.summary()["errors"] == {"ConfigError": 2} and batch.config_failure() is None
    assert len((tmp_path / "episodes.jsonl").read_text().splitlines()) == 8  # the failed batch's episodes too
