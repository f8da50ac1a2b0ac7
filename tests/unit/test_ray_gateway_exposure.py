"""The rollout gateway listens beyond 127.0.0.1 only when gateway.host asks, and then no request
without a live episode key reaches the engine (real HTTP, on this machine's own non-loopback address)."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from ajet.config.schema import AjetConfig
from ajet.gateway.episodes import EpisodeSession
from ajet.loopback import is_loopback
from ajet.rollout.stack import RolloutStack
from ajet.tracker.episode import EpisodeTracker
from tests.unit.gw_helpers import scripted_engine

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def _own_address() -> str | None:
    """An address of this machine other than loopback (no packet is sent: UDP connect only routes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if is_loopback(address) else address


def _cfg(host: str) -> AjetConfig:
    return AjetConfig(workflow="ajet.workflows.chat:ChatWorkflow",
                      gateway={"host": host})


def _stack(tiny_tokenizer, host: str):
    engine = scripted_engine(tiny_tokenizer, [{"text": "hello"}])
    engine.repeat = True
    return RolloutStack(_cfg(host), engine, tiny_tokenizer, None), engine


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("head.example")


@pytest.mark.parametrize("host", ["[::1]", "LOCALHOST", "127.0.0.2"])
def test_the_gateway_and_serve_agree_on_loopback(tiny_tokenizer, host):
    """The gateway's own copy of is_loopback missed `[::1]` and `LOCALHOST`, which `ajet serve`'s accepted:
    one rule now (ajet/loopback.py), and the training gateway reads it."""
    from ajet.serving.auth import check_exposure

    stack, _ = _stack(tiny_tokenizer, host)
    assert not stack.gateway.exposed
    check_exposure(host, enable_lora=True, api_key=None)  # serve: loopback, no key needed either


def test_the_default_gateway_is_unreachable_from_other_interfaces(tiny_tokenizer):
    address = _own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")

    async def main():
        stack, _ = _stack(tiny_tokenizer, "127.0.0.1")
        async with stack:
            assert stack.server.base_url.startswith("http://127.0.0.1:") and not stack.gateway.exposed
            async with httpx.AsyncClient() as http:
                with pytest.raises(httpx.ConnectError):
                    await http.get(f"http://{address}:{stack.server.port}/v1/models")

    asyncio.run(main())


def test_an_exposed_gateway_lets_only_live_episode_keys_reach_the_engine(tiny_tokenizer):
    address = _own_address() or "127.0.0.1"

    async def main():
        stack, engine = _stack(tiny_tokenizer, "0.0.0.0")
        async with stack:
            gateway = stack.gateway
            assert gateway.exposed
            root = f"http://{address}:{stack.server.port}/v1"
            session = EpisodeSession(episode_id="ep", tracker=EpisodeTracker("ep"))
            key = gateway.open_episode(session)("assistant")
            async with httpx.AsyncClient(timeout=30) as http:
                refused = [
                    await http.post(f"{root}/chat/completions", json=CHAT),
                    await http.post(f"{root}/chat/completions", json=CHAT, headers={"authorization": "Bearer nope"}),
                    await http.post(f"{root}/chat/completions", json=CHAT, headers={"authorization": key}),
                    await http.get(f"{root}/models"),
                    await http.post(f"{root}/ajet/keys", json={"agent": "critic"}),
                ]
                assert [r.status_code for r in refused] == [401] * len(refused)
                assert all(r.json()["error"]["code"] == "invalid_api_key" for r in refused)
                assert engine.played == 0  # nothing reached the engine

                auth = {"authorization": f"Bearer {key}"}
                assert (await http.get(f"{root}/models", headers=auth)).status_code == 200
                ok = await http.post(f"{root}/chat/completions", json=CHAT, headers=auth)
                assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "hello"
                critic = await http.post(f"{root}/ajet/keys", json={"agent": "critic"}, headers=auth)
                assert critic.status_code == 200 and critic.json()["key"] != key
                bad = await http.post(f"{root}/ajet/keys", json={"agent": ""}, headers=auth)
                assert bad.status_code == 400 and bad.json()["error"]["param"] == "agent"
                assert engine.played == 1 and [c.agent for c in session.tracker.calls] == ["assistant"]

                gateway.close_episode("ep")  # finished: its keys stop working at once
                for k in (key, critic.json()["key"]):
                    late = await http.post(f"{root}/chat/completions", json=CHAT,
                                           headers={"authorization": f"Bearer {k}"})
                    assert late.status_code == 401
                assert engine.played == 1

    asyncio.run(main())
