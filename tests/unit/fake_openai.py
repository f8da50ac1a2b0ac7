"""A scripted OpenAI chat server over real HTTP on 127.0.0.1, where a hosted model would be.

It answers `POST /v1/chat/completions` with scripted assistant messages, in order (or with
`respond(request)` when set), and `GET /v1/models`; it records every request and its headers.
A script item may also be "400" (an OpenAI-style error), "500" (a server error), "garbage" (HTTP
200 with a body that is not a chat completion) or {"sleep": seconds, ...} (answer late).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse


class ScriptedOpenAI:
    def __init__(self, model: str = "teacher-model") -> None:
        self.model = model
        self.script: list[Any] = []
        self.respond: Any = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        app = FastAPI()
        app.post("/v1/chat/completions")(self._complete)
        app.get("/v1/models")(self._models)
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def reset(self) -> None:
        self.script.clear()
        self.respond = None
        self.requests.clear()
        self.headers.clear()

    async def _models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model"}]}

    async def _complete(self, request: Request):
        self.requests.append(await request.json())
        self.headers.append(dict(request.headers))
        item = self.respond(self.requests[-1]) if self.respond else self.script.pop(0)
        if item == "400":
            return JSONResponse({"error": {"message": "prompt too long", "type": "invalid_request_error"}}, status_code=400)
        if item == "500":
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
        if item == "garbage":
            return PlainTextResponse("<html>this is not JSON</html>")
        if isinstance(item, dict) and "sleep" in item:
            await asyncio.sleep(item["sleep"])
        message = {"role": "assistant", "content": item.get("content")}
        if "tool_calls" in item:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                for i, (name, args) in enumerate(item["tool_calls"])
            ]
        return JSONResponse({
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": self.requests[-1]["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if "tool_calls" in item else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    def start(self) -> None:
        self._thread.start()
        while not self._server.started:
            threading.Event().wait(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
