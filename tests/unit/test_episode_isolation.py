"""One episode's misbehaviour ends that episode only: a workflow that cancels itself, calls sys.exit or
swallows its cancellation; a judge that returns NaN; text that is not valid Unicode. And the episode
timeout counts the workflow's own time, not the time its calls wait on the engine."""

from __future__ import annotations

import asyncio
import json
import sys
import time

from ajet import Judge, Reward, Task, Workflow, WorkflowOutput
from ajet.backbone.monitor import Monitor
from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.engine.hf import HFEngine
from ajet.rollout import guard
from ajet.rollout.episode import EpisodeWriter
from ajet.rollout.runner import RolloutRunner, RolloutSettings
from tests.unit.gw_helpers import running_gateway, scripted_engine


class Misbehaving(Workflow):
    """What each query asks the workflow to do instead of its job."""

    async def execute(self, task: Task, tuner) -> WorkflowOutput:
        if task.query == "cancel":
            raise asyncio.CancelledError()
        if task.query == "exit":
            sys.exit(3)
        if task.query == "swallow":  # ignores the timeout's cancellation once, then claims success
            try:
                await asyncio.sleep(18)
            except asyncio.CancelledError:
                pass
            await asyncio.sleep(2)
            return WorkflowOutput(answer="sneaky", reward=1.0)
        if task.query == "stubborn":  # ignores every cancellation
            while True:
                try:
                    await asyncio.sleep(0.1)
                except asyncio.CancelledError:
                    pass
        if task.query == "nan":
            return WorkflowOutput(answer="x", reward=float("nan"))
        return WorkflowOutput(answer=task.query)


class NanJudge(Judge):
    async def score(self, task, output):
        return {"good": 1.0, "judge-nan": float("nan"), "judge-inf": Reward(total=float("inf"))}.get(output.answer, 0.5)


def tasks(*queries: str) -> list[Task]:
    return [Task(task_id=q, query=q) for q in queries]


async def test_each_misbehaviour_is_a_counted_failure_of_its_episode_only(tiny_tokenizer, tmp_path):
    engine = scripted_engine(tiny_tokenizer, [])
    writer = EpisodeWriter(tmp_path / "episodes.jsonl")
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, Misbehaving(), NanJudge(), writer=writer)
        settings = RolloutSettings(episode_timeout_s=1.0, retries=0, concurrency=8)
        started = time.perf_counter()
        batch = await runner.run(tasks("good", "cancel", "exit", "swallow", "stubborn", "nan", "judge-nan",
                                       "judge-inf"), settings, show_progress=False)
        seconds = time.perf_counter() - started
        deadline = time.monotonic() + 10
        while guard.left_behind() and time.monotonic() < deadline:  # the stubborn one is closed in the background
            await asyncio.sleep(0.1)
    writer.close()
    by = {e.task.query: e for e in batch.episodes}
    assert by["good"].ok and by["good"].reward.total == 1.0
    assert by["cancel"].error == ("CancelledError: the workflow raised asyncio.CancelledError itself "
                                  "(nothing cancelled it)")
    assert by["exit"].error == "SystemExit: the workflow called sys.exit(3)"
    for name in ("swallow", "stubborn"):
        assert by[name].error.startswith("TimeoutError: the workflow ran "), by[name].error
        assert by[name].error.endswith("over the limit of 1 s; it ignored the cancellation (rollout.episode_timeout_s)")
        assert by[name].reward is None and not by[name].success and by[name].counters["timed_out"]
    assert by["nan"].judge_error.startswith("NonFiniteReward: the workflow set WorkflowOutput.reward a non-finite")
    assert by["judge-nan"].judge_error == ("NonFiniteReward: the judge returned a non-finite reward {'total': nan}; "
                                          "rewards must be finite numbers")
    assert by["judge-inf"].judge_error.startswith("NonFiniteReward") and not by["judge-inf"].samples
    assert seconds < 8  # the swallower's 18 s sleep and the stubborn loop did not hold the batch
    assert guard.left_behind() == 0
    summary = batch.summary()
    assert (summary["failed"], summary["judge_failed"], summary["timed_out"]) == (4, 3, 2)
    assert summary["errors"] == {"CancelledError": 1, "SystemExit": 1, "TimeoutError": 2}
    rows = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["task"]["query"] for r in rows) == sorted(by)


async def test_a_group_judge_that_returns_nan_fails_its_group_only(tiny_tokenizer):
    class NanGroupJudge(Judge):
        scores_groups = True

        async def score(self, task, output):  # pragma: no cover - group judge
            raise AssertionError

        async def score_group(self, task, outputs):
            return [float("nan") if task.query == "bad" else 1.0 for _ in outputs]

    engine = scripted_engine(tiny_tokenizer, [])
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, Misbehaving(), NanGroupJudge())
        batch = await runner.run(tasks("bad", "fine"), RolloutSettings(group_size=2), show_progress=False)
    assert [e.judge_error is None for e in batch.episodes] == [False, False, True, True]
    assert all(e.reward is None and not e.samples for e in batch.episodes[:2])


class Asker(Workflow):
    """Two LLM calls; 'hung' then waits 30 s for something that never comes."""

    async def execute(self, task: Task, tuner) -> WorkflowOutput:
        client = tuner.openai_client()
        messages = [{"role": "user", "content": task.query}]
        for _ in range(2):
            r = await client.chat.completions.create(model=tuner.model, messages=messages, max_tokens=4)
            messages += [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "more"}]
        if task.query == "hung":
            await asyncio.sleep(30)
        return WorkflowOutput(answer="done", reward=1.0)


class _Slow(Engine):
    """The real tiny engine behind a queue that serves one call at a time and takes `hold_s` for each:
    a saturated engine whose speed does not depend on how loaded the test machine is."""

    def __init__(self, inner: HFEngine, hold_s: float) -> None:
        self.inner, self.tokenizer, self.hold_s = inner, inner.tokenizer, hold_s
        self.max_positions = inner.max_positions
        self._lock = asyncio.Lock()

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        async with self._lock:
            await asyncio.sleep(self.hold_s)
            return await self.inner.generate(prompt_ids, sampling)


async def test_time_waiting_on_the_engine_does_not_count_against_the_episode_timeout(tiny_model_path):
    """12 episodes x 2 calls share an engine that answers one call per 0.5 s: most of an episode's
    wall time (up to 12 s) is its turn in the engine's queue. Counted as the workflow's time (before),
    the episodes at the back of the queue timed out at 3 s. The hung one is still caught once the
    model is idle."""
    engine = _Slow(HFEngine.from_pretrained(tiny_model_path, device="cpu"), hold_s=0.5)
    async with running_gateway(engine, engine.tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, Asker(), NanJudge())
        settings = RolloutSettings(episode_timeout_s=3.0, retries=0, concurrency=12, max_tokens=4, temperature=1.0)
        batch = await runner.run(tasks(*[f"question {i}" for i in range(11)], "hung"), settings, show_progress=False)
    by = {e.task.query: e for e in batch.episodes}
    healthy = [e for q, e in by.items() if q != "hung"]
    assert all(e.ok for e in healthy), [e.error for e in healthy if e.error]
    assert max(e.seconds for e in healthy) > 2 * settings.episode_timeout_s  # far longer than the timeout
    assert max(e.counters["model_wait_s"] for e in healthy) > 2 * settings.episode_timeout_s
    hung = by["hung"]
    assert hung.error.startswith("TimeoutError: the workflow ran 3.0 s of its own time (plus ")
    assert "while the model was busy, not counted" in hung.error  # cut at 3 s, not after its 30 s sleep
    assert hung.counters["timeout_busy_s"] > settings.episode_timeout_s  # the model's busy time, not counted
    assert batch.summary()["timed_out"] == 1


def test_the_step_line_says_how_many_timed_out_and_why(tmp_path, capsys):
    monitor = Monitor(tmp_path, total_steps=3)
    monitor.log(1, "grpo", {"reward_mean": 0.5, "failed": 3, "judge_failed": 1, "timed_out": 2,
                            "timed_out_busy_s": 41.2, "errors/TimeoutError": 2})
    printed = capsys.readouterr()  # a plain line on stdout without a terminal, a rich one on stderr with one
    line = " ".join((printed.out + printed.err).split())
    assert "failed 3 (TimeoutError 2: own time over rollout.episode_timeout_s, +41 s of model time not counted; judge 1)" in line
    assert json.loads((tmp_path / "metrics.jsonl").read_text())["timed_out"] == 2


def test_a_row_with_text_that_is_not_unicode_is_still_written(tmp_path):
    from ajet.rollout.episode import EpisodeResult

    deep: list = []
    for _ in range(5000):  # what a workflow may leave in its metadata: too deep for json.dumps
        deep = [deep]
    writer = EpisodeWriter(tmp_path / "episodes.jsonl")
    odd = EpisodeResult(episode_id="e1", task=Task(task_id="t", query="bad \ud800 text"), repeat=0, group_id="g",
                        output=WorkflowOutput(answer="a\udfff", metadata={"object": object()}))
    deeper = EpisodeResult(episode_id="e2", task=Task(task_id="t", query="q"), repeat=1, group_id="g",
                           output=WorkflowOutput(answer="x", metadata={"deep": deep}))
    writer.write(odd, step=1)
    writer.write(deeper, step=1)
    writer.close()
    first, second = map(json.loads, (tmp_path / "episodes.jsonl").read_text(encoding="utf-8").splitlines())
    assert first["task"]["query"] == "bad \ud800 text" and first["answer"] == "a\udfff" and first["step"] == 1
    assert first["metadata"]["object"].startswith("<object object")
    assert second["episode_id"] == "e2" and second["step"] == 1
    assert second["write_error"].startswith("RecursionError")
