"""A workflow's `tuner.openai_client()` calls the gateway's ASGI app in-process
(ajet.gateway.inprocess.InProcessTransport) when the rollout runs beside it: the answers equal those
over HTTP, bodies stream as the app sends them, a client that leaves is a disconnect (the generation
is cancelled), an app that crashes gives a 500, and another event loop goes over HTTP."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest

from ajet import Task, Workflow, WorkflowOutput
from ajet.engine.replay import ReplayEngine
from ajet.gateway.inprocess import InProcessTransport
from ajet.gateway.server import Gateway, GatewayServer, create_app
from ajet.rollout.runner import RolloutRunner, RolloutSettings
from tests.unit.gw_helpers import open_episode
from tests.unit.test_gateway_fast_path import USER, _comparable, _Slow
from tests.unit.test_rollout import LengthJudge
from tests.unit.test_tracker import CALL, TOOLS

REQUESTS = [
    ("POST", "/chat/completions", {"model": "m", "messages": USER, "tools": TOOLS}),
    ("POST", "/chat/completions", {"model": "m", "messages": USER, "tools": TOOLS, "stream": True}),
    ("POST", "/chat/completions", {"messages": USER, "logprobs": True}),
    ("POST", "/chat/completions", b"{not json"),
    ("POST", "/chat/completions", {"messages": [{"role": "user", "content": "x" * 10000}]}),
    ("GET", "/chat/completions", None),
    ("POST", "/nowhere", {"messages": USER}),
    ("GET", "/models", None),
]


async def _answers(client_of, tokenizer) -> list[tuple]:
    engine = ReplayEngine([{"text": CALL}, {"text": "It is 3.1 USD."}], tokenizer, repeat=True)
    gateway = Gateway(engine, tokenizer, max_request_bytes=4096)
    app = create_app(gateway)
    server = GatewayServer(app)
    url = await server.start()
    _, issue = open_episode(gateway)
    out = []
    try:
        async with client_of(app, url) as http:
            for key in (issue("assistant"), "ajet-forged"):
                for method, path, body in REQUESTS:
                    content = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
                    response = await http.request(method, path, content=content, headers={"Authorization": f"Bearer {key}"})
                    status, headers, text = _comparable(response)
                    headers.pop("connection", None)  # a socket's business
                    out.append((status, headers, text))
    finally:
        await server.stop()
    return out


async def test_in_process_answers_equal_those_over_http(tiny_tokenizer):
    http = await _answers(lambda app, url: httpx.AsyncClient(base_url=url, timeout=60), tiny_tokenizer)
    local = await _answers(lambda app, url: httpx.AsyncClient(transport=InProcessTransport(app), base_url=url,
                                                              timeout=60), tiny_tokenizer)
    assert [a[0] for a in local] == [200, 200, 200, 400, 413, 405, 404, 200] + [401] * 5 + [405, 404, 200]
    assert local == http


def _gated_app(release: asyncio.Event, seen: list[str]):
    """Sends a first chunk, waits for `release`, sends a second; records what receive() gave it."""

    async def app(scope, receive, send):
        seen.append((await receive())["type"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"first ", "more_body": True})
        waiter = asyncio.ensure_future(receive())
        done, _ = await asyncio.wait({waiter, asyncio.ensure_future(release.wait())}, return_when=asyncio.FIRST_COMPLETED)
        if waiter in done:
            seen.append(waiter.result()["type"])
            return
        waiter.cancel()
        await send({"type": "http.response.body", "body": b"second", "more_body": False})

    return app


async def test_the_body_streams_and_closing_it_early_is_a_disconnect():
    release, seen = asyncio.Event(), []
    async with httpx.AsyncClient(transport=InProcessTransport(_gated_app(release, seen)), base_url="http://x") as http:
        async with http.stream("GET", "/") as response:
            chunks = response.aiter_bytes()
            assert await asyncio.wait_for(chunks.__anext__(), 5) == b"first "  # before the app could finish
            release.set()
            assert [c async for c in chunks] == [b"second"]
        release, seen_early = asyncio.Event(), []
        async with httpx.AsyncClient(transport=InProcessTransport(_gated_app(release, seen_early)),
                                     base_url="http://x") as early:
            async with early.stream("GET", "/") as response:
                assert await response.aiter_bytes().__anext__() == b"first "
            # the client left after the first chunk: the app's receive() said so
            for _ in range(100):
                if len(seen_early) == 2:
                    break
                await asyncio.sleep(0.01)
    assert seen == ["http.request"] and seen_early == ["http.request", "http.disconnect"]


async def test_a_cancelled_call_cancels_its_generation_in_the_gateway(tiny_tokenizer):
    engine = _Slow()
    gateway = Gateway(engine, tiny_tokenizer)
    session, issue = open_episode(gateway)
    async with httpx.AsyncClient(transport=InProcessTransport(create_app(gateway)), base_url="http://x/v1") as http:
        call = asyncio.ensure_future(http.post("/chat/completions", json={"messages": USER},
                                               headers={"Authorization": f"Bearer {issue('assistant')}"}))
        await asyncio.wait_for(engine.started.wait(), 10)
        call.cancel()  # an episode timeout, say
        with pytest.raises(asyncio.CancelledError):
            await call
    assert engine.cancelled == 1
    assert gateway.busy._holders == 0 and session.tracker.calls == []


async def test_an_app_that_raises_before_answering_gives_a_500():
    async def broken(scope, receive, send):
        raise RuntimeError("boom")

    async with httpx.AsyncClient(transport=InProcessTransport(broken), base_url="http://x") as http:
        response = await http.get("/")
    assert (response.status_code, response.text) == (500, "Internal Server Error")


class _Recording(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return httpx.Response(200, content=b"over http", request=request)


async def test_another_event_loop_goes_over_http():
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"in process"})

    fallback = _Recording()
    transport = InProcessTransport(app, fallback=fallback)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as http:
        assert (await http.get("/here")).text == "in process"
    texts = []

    def other_loop() -> None:  # a workflow that runs its own event loop in a thread
        async def call() -> str:
            return (await httpx.AsyncClient(transport=transport, base_url="http://x").get("/there")).text

        texts.append(asyncio.run(call()))

    thread = threading.Thread(target=other_loop)
    thread.start()
    thread.join()
    assert texts == ["over http"] and fallback.paths == ["/there"]


class _Asks(Workflow):
    async def execute(self, task, tuner):
        client = tuner.openai_client()
        transport = type(client._client._transport).__name__  # the openai SDK's httpx client
        r = await client.chat.completions.create(model=tuner.model, messages=[{"role": "user", "content": task.query}])
        return WorkflowOutput(answer=r.choices[0].message.content, metadata={"transport": transport})


async def test_rollout_clients_reach_the_gateway_without_its_socket(tiny_tokenizer):
    engine = ReplayEngine([{"text": "It is 3.1 USD."}], tiny_tokenizer, repeat=True)
    gateway = Gateway(engine, tiny_tokenizer)
    app = create_app(gateway)
    over_http = []

    async def counted(scope, receive, send):  # what uvicorn serves: counts the requests that came by socket
        over_http.append(scope.get("path"))
        await app(scope, receive, send)

    server = GatewayServer(counted)
    url = await server.start()
    try:
        tasks = [Task(task_id=f"t{i}", query="Houston?") for i in range(3)]
        local = await RolloutRunner(gateway, url, _Asks(), LengthJudge(), app=app).run(
            tasks, RolloutSettings(group_size=2), show_progress=False)
        assert over_http == []
        assert all(e.error is None and e.output.metadata["transport"] == "InProcessTransport" for e in local.episodes)
        assert len(local.samples) == 6 and all(s.loss_mask for s in local.samples)  # recorded as before
        remote = await RolloutRunner(gateway, url, _Asks(), LengthJudge()).run(
            tasks[:1], RolloutSettings(group_size=1), show_progress=False)  # no app given: over HTTP
        assert over_http == ["/v1/chat/completions"] and remote.episodes[0].error is None
    finally:
        await server.stop()
