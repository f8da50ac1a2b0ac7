"""The gateway called in this process: an httpx transport that hands requests to its ASGI app directly.

A workflow's `tuner.openai_client()` runs in the process and event loop that serve the gateway
(unless its episodes run in Ray workers). Over HTTP, each of its LLM calls pays for the client's
connection handling, a loopback round trip and uvicorn's parsing: ~0.7 ms of a ~1 ms gateway call on
the project's 2-core machine (benchmarks/gateway_overhead.py), which is most of what the gateway adds
to a short completion. `InProcessTransport` gives the app the same ASGI request instead, with what a
server gives it too:

- the response streams: the app runs in its own task and each body chunk reaches the client as it is
  sent (httpx's own `ASGITransport` returns the body only after the app has finished);
- a client that leaves is a disconnect: closing the response early, or cancelling the call, makes the
  app's `receive()` return `http.disconnect` (the gateway then cancels the generation, as it does for
  a client that drops its socket) and the app's task is cancelled if it does not end by itself;
- an app that raises before answering gives a plain 500, as uvicorn would.

Used from another event loop than the one it was made in (a workflow that runs its own loop in a
thread), it sends the request over HTTP instead: the gateway's state belongs to its own loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import httpx

_DONE = object()  # the app's task ended: no more messages


class InProcessTransport(httpx.AsyncBaseTransport):
    """Send httpx requests to `app` (ASGI 3) in this event loop; `fallback` (HTTP) from any other loop."""

    def __init__(self, app: Any, fallback: httpx.AsyncBaseTransport | None = None):
        self.app = app
        self.loop = asyncio.get_running_loop()
        self.fallback = fallback or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if asyncio.get_running_loop() is not self.loop:
            return await self.fallback.handle_async_request(request)
        body = b"".join([chunk async for chunk in request.stream])  # request bodies are JSON, read whole
        messages: asyncio.Queue = asyncio.Queue()
        gone = asyncio.Event()
        task = asyncio.create_task(self._run(_scope(request), body, messages, gone))
        try:
            start = await messages.get()
        except asyncio.CancelledError:  # the caller gave up before the answer began: a disconnect
            await _stop(task, gone)
            raise
        if start is _DONE or start.get("type") != "http.response.start":
            await _stop(task, gone)
            return httpx.Response(500, content=b"Internal Server Error", request=request)
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])]
        return httpx.Response(start["status"], headers=headers, stream=_Body(messages, task, gone), request=request)

    async def aclose(self) -> None:
        await self.fallback.aclose()

    async def _run(self, scope: dict[str, Any], body: bytes, messages: asyncio.Queue, gone: asyncio.Event) -> None:
        received = False

        async def receive() -> dict[str, Any]:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()  # as a server does: nothing more until the client goes
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            await messages.put(message)

        try:
            await self.app(scope, receive, send)
        except Exception:  # noqa: BLE001 - as uvicorn: the client gets a 500 (or a cut body), the caller goes on
            pass
        finally:
            await messages.put(_DONE)


class _Body(httpx.AsyncByteStream):
    """The response body as the app sends it; closing it early is the client leaving."""

    def __init__(self, messages: asyncio.Queue, task: asyncio.Task, gone: asyncio.Event):
        self.messages, self.task, self.gone = messages, task, gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            message = await self.messages.get()
            if message is _DONE:
                return
            if message.get("type") == "http.response.body":
                if message.get("body"):
                    yield message["body"]
                if not message.get("more_body", False):
                    return

    async def aclose(self) -> None:
        await _stop(self.task, self.gone)


async def _stop(task: asyncio.Task, gone: asyncio.Event) -> None:
    """End the app's task: tell it the client left, give it a moment to wind down, then cancel it."""
    gone.set()
    if task.done():
        return
    try:
        await asyncio.wait_for(asyncio.shield(task), timeout=1.0)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        task.cancel()


def _scope(request: httpx.Request) -> dict[str, Any]:
    url = request.url
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": url.scheme, "path": unquote(url.path), "raw_path": url.raw_path.split(b"?")[0],
        "query_string": url.query, "root_path": "", "headers": [(k.lower(), v) for k, v in request.headers.raw],
        "server": (url.host, url.port), "client": ("127.0.0.1", 0),
    }
