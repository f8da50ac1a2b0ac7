"""Several engine replicas behind one gateway (`engine.base_urls`): a GRPO group and an episode's turns
stay on one replica, groups spread over the replicas, LoRA reaches every replica, and an unreachable
replica's requests move to another. The replicas are two `ajet serve --enable-lora` apps (the tiny
model) on 127.0.0.1, over real HTTP."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest
import torch

from ajet import Task, Workflow, WorkflowOutput
from ajet.config.schema import AjetConfig
from ajet.engine.base import SamplingParams
from ajet.engine.factory import build_engine
from ajet.engine.hf import HFEngine
from ajet.engine.replicas import ReplicatedEngine, route_key
from ajet.errors import EngineError
from ajet.gateway.server import GatewayServer
from ajet.rollout.stack import RolloutStack, settings_for
from ajet.serving.app import create_serve_app

HERE = Path(__file__).resolve()


class TwoTurns(Workflow):
    async def execute(self, task: Task, tuner) -> WorkflowOutput:
        client = tuner.openai_client()
        messages = [{"role": "user", "content": task.query}]
        first = await client.chat.completions.create(model=tuner.model, messages=messages, max_tokens=4)
        messages += [{"role": "assistant", "content": first.choices[0].message.content or "."},
                     {"role": "user", "content": "and then?"}]
        await client.chat.completions.create(model=tuner.model, messages=messages, max_tokens=4)
        return WorkflowOutput(answer="done", reward=1.0)


@pytest.fixture
async def replicas(tiny_model_path):
    """Two serving replicas; `seen[i]` holds the prompts replica i generated for."""
    servers, engines, seen = [], [], []
    for _ in range(2):
        engine = HFEngine.from_pretrained(tiny_model_path, device="cpu", dtype="float32", max_batch_size=4)
        prompts: list[list[int]] = []
        original = engine.generate

        async def recording(prompt_ids, sampling, _original=original, _prompts=prompts):
            _prompts.append(list(prompt_ids))
            return await _original(prompt_ids, sampling)

        engine.generate = recording
        server = GatewayServer(create_serve_app(engine, engine.tokenizer, "tiny", enable_lora=True))
        await engine.start()
        servers.append(await server.start())
        engines.append((engine, server))
        seen.append(prompts)
    yield servers, seen
    for engine, server in engines:
        await server.stop()
        await engine.close()


def test_pick_is_sticky_per_key_and_balances_new_keys():
    engine = ReplicatedEngine(["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1", "http://127.0.0.1:11/v1"])
    first = [engine.pick(f"group-{i}") for i in range(6)]
    assert first == [0, 1, 2, 0, 1, 2]  # nothing in flight: the replica holding the fewest keys
    assert [engine.pick(f"group-{i}") for i in range(6)] == first  # later turns: the same replica
    engine.in_flight[:] = [5, 0, 3]
    assert engine.pick(None) == 1 and engine.pick("new") == 1  # the least busy
    engine._down_until[1] = float("inf")  # replica 1 unreachable: its keys move
    assert engine.pick("group-1") in (0, 2) and engine.pick("group-1") == engine.pick("group-1")


async def test_groups_and_turns_keep_to_one_replica_and_groups_spread(replicas, tiny_tokenizer, tmp_path):
    urls, seen = replicas
    cfg = AjetConfig(workflow=f"{HERE}:TwoTurns", model={"path": "tiny-random"},
                     engine={"type": "remote", "base_urls": urls}, rollout={"concurrency": 8})
    engine = build_engine(cfg, tiny_tokenizer)
    assert isinstance(engine, ReplicatedEngine)
    tasks = [Task(task_id=f"t{i}", query=f"question number {i}") for i in range(4)]
    settings = dataclasses.replace(settings_for(cfg, "train"), group_size=2)
    async with RolloutStack(cfg, engine, tiny_tokenizer, tmp_path) as stack:
        batch = await stack.runner.run(tasks, settings, step=1, show_progress=False)
    await engine.close()
    assert all(e.ok for e in batch.episodes) and len(batch.episodes) == 8

    def replica_of(prompt_ids: list[int]) -> int:
        return next(i for i, prompts in enumerate(seen) if prompt_ids in prompts)

    groups: dict[str, set[int]] = {}
    for e in batch.episodes:
        assert len(e.calls) == 2
        for call in e.calls:
            groups.setdefault(e.group_id, set()).add(replica_of(call.to_dict()["prompt_ids"]))
    assert all(len(where) == 1 for where in groups.values()), groups  # one replica per group, every turn
    placed = sorted(next(iter(w)) for w in groups.values())
    assert placed == [0, 0, 1, 1]  # 4 groups over 2 replicas: 2 each
    assert [len(p) for p in seen] == [8, 8] and engine.served == [8, 8]


async def test_lora_is_published_to_every_replica(replicas, tmp_path):
    from ajet.backbone.debug.publish import AdapterPublisher
    from ajet.trainer.policy import load_policy

    urls, _ = replicas
    cfg = AjetConfig(workflow="wf.py:W", model={"path": "tiny-random", "device": "cpu"},
                     engine={"type": "remote", "base_urls": urls})
    policy = load_policy(cfg.model)
    engine = build_engine(cfg, policy.tokenizer)
    await engine.start()
    publisher = AdapterPublisher(policy, engine, tmp_path)
    with torch.no_grad():
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.add_(0.01)
    await publisher.sync(1)
    assert engine.adapter == "ajet-step-1"
    async with httpx.AsyncClient() as http:
        for url in urls:
            assert [m["id"] for m in (await http.get(f"{url}/models")).json()["data"]] == ["tiny", "ajet-step-1"]
    token = route_key.set("group")
    try:  # a request names the published adapter on whichever replica it lands
        generation = await engine.generate([1, 2, 3], SamplingParams(max_tokens=2, seed=1))
    finally:
        route_key.reset(token)
    assert len(generation.token_ids) == 2
    await engine.close()


async def test_an_unreachable_replica_s_requests_move_to_another(replicas):
    urls, seen = replicas
    engine = ReplicatedEngine(["http://127.0.0.1:9/v1", urls[0]], retries=0)
    await engine.start()
    token = route_key.set("group")
    try:
        for _ in range(2):
            generation = await engine.generate([1, 2, 3], SamplingParams(max_tokens=2, seed=1))
            assert len(generation.token_ids) == 2
    finally:
        route_key.reset(token)
    assert engine.served == [0, 2] and len(seen[0]) == 2
    assert engine._down_until[0] > 0  # set aside: the second request went straight to the live one
    await engine.close()
    dead = ReplicatedEngine(["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"], retries=0)
    with pytest.raises(EngineError, match="none of engine.base_urls answers"):
        await dead.start()


def test_base_urls_are_for_the_remote_engine_only():
    with pytest.raises(ValueError, match="engine.base_urls is for engine.type 'remote'"):
        AjetConfig(workflow="wf.py:W", engine={"type": "hf", "base_urls": ["http://127.0.0.1:9/v1"]})
    with pytest.raises(ValueError, match="not both"):
        AjetConfig(workflow="wf.py:W", engine={"type": "remote", "base_url": "http://a/v1",
                                                "base_urls": ["http://b/v1"]})


def test_new_keys_go_to_the_replica_holding_fewest_and_counts_follow_moves_and_evictions(monkeypatch):
    """Routing bookkeeping by hand, no server needed: keys spread 0, 1, 0; a key whose replica is down
    moves and is counted where it went; the least recently used key is forgotten past MAX_KEYS."""
    import time

    import ajet.engine.replicas as replicas

    engine = replicas.ReplicatedEngine(["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"], model="m")
    assert [engine.pick(k) for k in ("a", "b", "c")] == [0, 1, 0]
    assert engine.pick("a") == 0 and engine._held == [2, 1]
    engine._down_until[0] = time.monotonic() + 60
    assert engine.pick("a") == 1 and engine._held == [1, 2]
    monkeypatch.setattr(replicas, "MAX_KEYS", 2)
    engine._down_until[0] = 0.0
    assert engine.pick("d") == 0  # 'b' (least recently used) is forgotten: one key each on 0 and 1
    assert list(engine._routes) == ["a", "d"] and engine._held == [1, 1]


async def test_a_lora_load_is_all_or_nothing_across_replicas(replicas, tiny_model_path, tmp_path):
    """One replica refuses (it already serves that name): the other must not keep it, or the replicas would
    serve different weights under one name. A later load that both accept reaches both."""
    from tests.unit.bad_adapters import save_adapter

    urls, _ = replicas
    first, second = save_adapter(tiny_model_path, tmp_path / "a", seed=1), save_adapter(tiny_model_path, tmp_path / "b", seed=2)
    async with httpx.AsyncClient(timeout=120) as http:
        async def served(url):
            return [m["id"] for m in (await http.get(f"{url}/models")).json()["data"]]

        taken = await http.post(f"{urls[1]}/load_lora_adapter", json={"lora_name": "step", "lora_path": str(first)})
        assert taken.status_code == 200
        engine = ReplicatedEngine(urls, model="tiny")
        with pytest.raises(EngineError, match=r"refused by 1 of 2 replicas .*unloaded again from the 1 that had loaded it"):
            await engine.load_adapter("step", str(second))
        assert await served(urls[0]) == ["tiny"] and await served(urls[1]) == ["tiny", "step"]
        await engine.unload_adapter("step")  # the replica without it is fine; the one with it drops it
        await engine.load_adapter("step", str(second))
        assert await served(urls[0]) == await served(urls[1]) == ["tiny", "step"]
        with pytest.raises(EngineError, match="404"):  # no replica has it: an error, as for one server
            await engine.unload_adapter("never-loaded")
        await engine.close()
