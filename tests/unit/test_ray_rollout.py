"""Episodes in Ray workers (ray.enabled): failures read as in-process, a killed worker's episodes are
rerun once elsewhere (nothing counted twice) or counted as failed, and the step goes on.

A private Ray of 2 CPUs is started once for the module (no dashboard, a small object store); the
workflows below are loaded by the workers from this file's path, as a user's `file.py:Class` is."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from ajet import Task, Workflow, WorkflowOutput
from ajet.config.schema import AjetConfig
from ajet.rollout.stack import RolloutStack, settings_for
from tests.unit.gw_helpers import scripted_engine

ray = pytest.importorskip("ray")
HERE = Path(__file__).resolve()


class Scripted(Workflow):
    """One model call per episode, then behaves as its query says."""

    def __init__(self, marker: str = "") -> None:
        super().__init__()
        self.marker = Path(marker) if marker else None

    async def execute(self, task: Task, tuner) -> WorkflowOutput:
        client = tuner.openai_client()
        reply = await client.chat.completions.create(model=tuner.model,
                                                     messages=[{"role": "user", "content": task.query}])
        if task.query == "die" and self.marker is not None and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)  # this worker dies mid-rollout, its other episodes too
        if task.query == "slow":
            await asyncio.sleep(1.0)  # still running when the other episode kills the worker
        if task.query == "crash":
            raise RuntimeError("tool server down")
        if task.query == "exit":
            sys.exit(3)
        if task.query == "hang":
            await asyncio.sleep(60)
        if task.query == "not-output":
            return {"answer": "a dict"}  # type: ignore[return-value]
        if task.query == "agents":  # a second agent: its key comes from the gateway (POST /v1/ajet/keys)
            judge = tuner.openai_client(agent="critic")
            await judge.chat.completions.create(model=tuner.model, messages=[{"role": "user", "content": "ok?"}])
        return WorkflowOutput(answer=reply.choices[0].message.content, reward=1.0)


@pytest.fixture(scope="module")
def local_ray():
    # Ray starts its workers at nice 15: beside another CPU-heavy job (the README's test command run while
    # a training runs) they got a few percent of a core and the episodes hit their timeouts. These tests
    # are about what happens to episodes, not about scheduling.
    with pytest.MonkeyPatch.context() as patch:  # restores a value the user had set
        patch.setenv("RAY_worker_niceness", "0")
        ray.init(address="local", num_cpus=2, num_gpus=0, include_dashboard=False, object_store_memory=80 << 20,
                 logging_level="warning", configure_logging=False)
        yield
        ray.shutdown()


def _cfg(tmp_path: Path, ray_on: bool, **ray_args) -> AjetConfig:
    return AjetConfig(workflow=f"{HERE}:Scripted", workflow_args={"marker": str(tmp_path / "killed")},
                      ray={"enabled": ray_on, "num_workers": 2, **ray_args},
                      rollout={"episode_timeout_s": 8, "retries": 0, "concurrency": 8})  # "hang" sleeps 60


async def _run(cfg: AjetConfig, tokenizer, run_dir: Path, queries: list[str], group_size: int = 1):
    engine = scripted_engine(tokenizer, [{"text": "hello"}])
    engine.repeat = True
    tasks = [Task(task_id=f"t{i}-{q}", query=q) for i, q in enumerate(queries)]
    settings = dataclasses.replace(settings_for(cfg, "train"), group_size=group_size)
    async with RolloutStack(cfg, engine, tokenizer, run_dir) as stack:
        batch = await stack.runner.run(tasks, settings, show_progress=False)
        lost = stack.pool.lost if stack.pool is not None else 0
    return batch, lost


def test_failures_read_the_same_in_process_and_on_ray(local_ray, tiny_tokenizer, tmp_path):
    queries = ["fine", "crash", "exit", "hang", "not-output", "agents"]
    here, _ = asyncio.run(_run(_cfg(tmp_path, False), tiny_tokenizer, tmp_path / "a", queries))
    there, _ = asyncio.run(_run(_cfg(tmp_path, True), tiny_tokenizer, tmp_path / "b", queries))

    def view(batch):
        return [(e.task.task_id, e.ok, (e.error or "")[:60], len(e.calls), [c.agent for c in e.calls],
                 e.reward.total if e.reward else None, len(e.samples)) for e in batch.episodes]

    assert view(there) == view(here)
    by_query = {e.task.query: e for e in there.episodes}
    assert by_query["crash"].error == "RuntimeError: tool server down"
    assert by_query["exit"].error.startswith("SystemExit: the workflow called sys.exit(3)")
    assert by_query["hang"].error.startswith("TimeoutError") and by_query["hang"].counters["timed_out"]
    assert by_query["not-output"].error.startswith("TypeError: execute() returned dict")
    assert [c.agent for c in by_query["agents"].calls] == ["assistant", "critic"]
    summary_keys = ("episodes", "failed", "errors", "timed_out", "reward_mean", "success_rate", "turns_per_episode")
    assert {k: there.summary()[k] for k in summary_keys} == {k: here.summary()[k] for k in summary_keys}
    rows = (tmp_path / "b" / "episodes.jsonl").read_text().splitlines()
    assert len(rows) == len(queries)


def test_a_killed_worker_s_episodes_rerun_once_elsewhere(local_ray, tiny_tokenizer, tmp_path):
    queries = ["slow", "die", "slow", "fine", "slow", "fine"]
    batch, lost = asyncio.run(_run(_cfg(tmp_path, True), tiny_tokenizer, tmp_path, queries))
    assert (tmp_path / "killed").exists() and lost == 1
    assert [e.ok for e in batch.episodes] == [True] * len(queries), [e.error for e in batch.episodes]
    died = next(e for e in batch.episodes if e.task.query == "die")
    assert died.counters["worker_lost"] == 1 and died.attempts == 1  # rerun, not a retry of a failure
    # Nothing counted twice: the lost attempt's call went with its session; one call, one sample each.
    assert [len(e.calls) for e in batch.episodes] == [1] * len(queries)
    assert len(batch.samples) == len(queries)
    rows = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["task"]["task_id"] for r in rows) == sorted(e.task.task_id for e in batch.episodes)


def test_a_worker_killed_from_outside_mid_rollout(local_ray, tiny_tokenizer, tmp_path):
    """`kill -9` of a worker process while both workers run episodes: the step finishes with every
    episode, each lost one rerun on the other worker, and its lost calls dropped."""
    cfg = _cfg(tmp_path, True)
    queries = ["slow"] * 6

    async def main():
        engine = scripted_engine(tiny_tokenizer, [{"text": "hello"}])
        engine.repeat = True
        tasks = [Task(task_id=f"t{i}", query=q) for i, q in enumerate(queries)]
        settings = dataclasses.replace(settings_for(cfg, "train"), group_size=1)
        async with RolloutStack(cfg, engine, tiny_tokenizer, tmp_path) as stack:
            victim = stack.pool.pids()[0]
            running = asyncio.ensure_future(stack.runner.run(tasks, settings, show_progress=False))
            deadline = asyncio.get_running_loop().time() + 60
            while engine.played < len(queries):  # every episode made its call: all are in their sleep
                assert asyncio.get_running_loop().time() < deadline and not running.done(), (
                    f"only {engine.played} of {len(queries)} episodes made their call")
                await asyncio.sleep(0.02)
            os.kill(victim, signal.SIGKILL)
            batch = await running
            return batch, stack.pool.lost, stack.pool.pids()

    batch, lost, pids_after = asyncio.run(main())
    assert lost == 1 and len(pids_after) == 2  # the dead worker was replaced
    assert [e.ok for e in batch.episodes] == [True] * len(queries), [e.error for e in batch.episodes]
    rerun = [e for e in batch.episodes if e.counters.get("worker_lost")]
    assert len(rerun) == 3  # the victim's share of the 6 (the least busy worker takes each next episode)
    assert [len(e.calls) for e in batch.episodes] == [1] * len(queries) and len(batch.samples) == len(queries)


def test_without_reruns_a_lost_episode_is_counted_failed_and_the_step_goes_on(local_ray, tiny_tokenizer, tmp_path):
    queries = ["die", "fine", "fine", "fine"]
    batch, lost = asyncio.run(_run(_cfg(tmp_path, True, lost_retries=0), tiny_tokenizer, tmp_path, queries))
    assert lost == 1
    died = next(e for e in batch.episodes if e.task.query == "die")
    assert died.error.startswith("WorkerLost: Ray worker") and not died.ok and died.samples == []
    assert batch.summary()["failed"] >= 1 and len(batch.episodes) == len(queries)
    assert all(e.ok for e in batch.episodes if e.error is None)


class NoSandboxOnWorkers(Scripted):
    """Loads on the head, not on the workers (a node without the environment the workflow needs)."""

    def __init__(self, marker: str = "") -> None:
        super().__init__(marker)
        if ray.get_runtime_context().get_actor_id() is not None:
            raise RuntimeError("no sandbox on this node")


def test_a_workflow_the_workers_cannot_load_is_a_config_error(local_ray, tiny_tokenizer, tmp_path):
    from ajet.errors import ConfigError

    cfg = _cfg(tmp_path, True)
    cfg.workflow = f"{HERE}:NoSandboxOnWorkers"
    with pytest.raises(ConfigError, match="the Ray workers could not load the workflow: .*no sandbox on this node"):
        asyncio.run(_run(cfg, tiny_tokenizer, tmp_path, ["fine"]))


def test_the_url_workers_call(local_ray, tmp_path):
    from ajet.rollout.ray_pool import RayEpisodePool

    pool = RayEpisodePool(_cfg(tmp_path, True))
    here = ray.util.get_node_ip_address()
    assert pool._advertised_url("http://127.0.0.1:8765/v1", "127.0.0.1") == "http://127.0.0.1:8765/v1"  # one node
    assert pool._advertised_url("http://0.0.0.0:8765/v1", "0.0.0.0") == f"http://{here}:8765/v1"
    pool.settings.gateway_host = "head.internal"  # NAT or DNS: the host is given, the port stays each gateway's
    assert pool._advertised_url("http://0.0.0.0:41000/v1", "0.0.0.0") == "http://head.internal:41000/v1"
    pool.settings.gateway_host = "fd00::1"
    assert pool._advertised_url("http://[::]:41000/v1", "::") == "http://[fd00::1]:41000/v1"
