"""The debug backbone's adapter publishing to a remote server (ajet/backbone/debug/publish.py), against
`ajet serve --enable-lora` in this process over real HTTP: names per version, nothing published while
the weights equal what the server serves, a resumed run replacing a name already loaded, folder pruning,
and the config refusals."""

from __future__ import annotations

import httpx
import pytest
import torch

from ajet.backbone.debug.publish import KEEP, AdapterPublisher, check_engine
from ajet.config.schema import AjetConfig
from ajet.engine.hf import HFEngine
from ajet.engine.remote import RemoteEngine
from ajet.errors import ConfigError, EngineError
from ajet.gateway.server import GatewayServer
from ajet.serving.app import create_serve_app
from ajet.trainer.policy import load_policy


def _cfg(**engine) -> AjetConfig:
    return AjetConfig(workflow="wf.py:W", model={"path": "tiny-random", "device": "cpu"}, engine=engine)


def test_the_debug_backbone_refuses_engines_it_cannot_train_with():
    remote = {"type": "remote", "base_url": "http://127.0.0.1:9/v1"}
    check_engine(_cfg(**remote))
    full = _cfg(**remote)
    full.model.lora.enabled = False
    with pytest.raises(ConfigError, match="engine.type=remote trains LoRA only .*vLLM cannot swap full weights"):
        check_engine(full)
    with pytest.raises(ConfigError, match="got 'replay'"):
        check_engine(_cfg(type="replay", replay_file="x.jsonl"))


@pytest.fixture
async def server(tiny_model_path):
    engine = HFEngine.from_pretrained(tiny_model_path, device="cpu", dtype="float32", max_batch_size=2)
    app = create_serve_app(engine, engine.tokenizer, "tiny", enable_lora=True)
    served = GatewayServer(app)
    await engine.start()
    yield await served.start()
    await served.stop()
    await engine.close()


def _nudge(policy) -> None:
    """An optimizer-like in-place change of the LoRA weights."""
    with torch.no_grad():
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.add_(0.01)


async def _served_names(url: str) -> list[str]:
    async with httpx.AsyncClient() as client:
        return [m["id"] for m in (await client.get(f"{url}/models")).json()["data"]]


async def test_publishes_each_new_version_once_and_prunes(server, tmp_path):
    policy = load_policy(_cfg().model)
    engine = RemoteEngine(server)
    publisher = AdapterPublisher(policy, engine, tmp_path)
    await publisher.sync(0)  # a fresh LoRA is the base model: nothing to publish
    assert engine.adapter is None and not (tmp_path / "adapters").exists() and publisher.take_metrics() == {}

    for step in (1, 2, 3):
        _nudge(policy)
        await publisher.sync(step)
        await publisher.sync(step)  # unchanged weights: no second load
    assert engine.adapter == "ajet-step-3" and await _served_names(server) == ["tiny", "ajet-step-3"]
    assert sorted(p.name for p in (tmp_path / "adapters").iterdir()) == ["step-000002", "step-000003"][-KEEP:]
    assert publisher.take_metrics()["adapter_publish_seconds"] > 0

    # A resumed run starts from non-zero adapter weights: published before its first rollout, under a
    # name the server may still hold from before the restart, which is replaced.
    resumed_engine = RemoteEngine(server)
    resumed = AdapterPublisher(policy, resumed_engine, tmp_path)
    await resumed.sync(3)
    assert resumed_engine.adapter == "ajet-step-3" and await _served_names(server) == ["tiny", "ajet-step-3"]
    await engine.close()
    await resumed_engine.close()


async def test_a_load_the_server_refuses_names_the_folder(server, tmp_path):
    engine = RemoteEngine(server)
    folder = tmp_path / "not-an-adapter"
    with pytest.raises(EngineError) as failure:
        await engine.load_adapter("x", str(folder))
    message = str(failure.value)
    assert "HTTP 404" in message and str(folder) in message and "same filesystem" in message
    with pytest.raises(EngineError, match="HTTP 404: The lora adapter 'x' cannot be found"):
        await engine.unload_adapter("x")
    await engine.close()
