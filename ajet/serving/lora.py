"""Runtime LoRA loading for `ajet serve`, with vLLM's endpoints, request shapes and answers.

    POST /v1/load_lora_adapter    {"lora_name": "a", "lora_path": "/abs/folder", "load_inplace": false}
    POST /v1/unload_lora_adapter  {"lora_name": "a"}

Success is HTTP 200 with a plain-text body, as vLLM answers ("Success: LoRA adapter 'a' added
successfully."). Errors are `{"error": {"message", "type", "param", "code"}}` with vLLM's types and
statuses: 400 `InvalidUserInput` (a field missing, the name already loaded without `load_inplace`,
the base model's name), 404 `NotFoundError` (no adapter folder at the path; unloading a name that is
not loaded), 400 `BadRequestError` (the folder is there but the engine cannot load it: unreadable or
truncated weights, tensors missing or of the wrong shape). A failed load changes nothing: the base
model, every loaded adapter, and an adapter being reloaded in place answer exactly as before
(ajet/engine/adapters.py loads all or nothing). The server reads the folder itself, so the path is one
on the server's filesystem; on a non-loopback host `ajet serve` requires an API key for it.

A completions or chat request whose `model` names a loaded adapter runs with it
(`SamplingParams.adapter`); `/v1/models` lists each adapter after the base model, with `parent`
(the base model's name) and `root` (the adapter's folder), as vLLM does.

vLLM serves these routes only when started with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; `ajet serve`
only with `--enable-lora` (`create_serve_app(..., enable_lora=True)`). Without it the routes answer
404, naming the flag.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from ajet.errors import AjetError, GatewayError
from ajet.gateway.request import read_json

log = logging.getLogger(__name__)


def vllm_error(status: int, kind: str, message: str, param: str | None = None) -> JSONResponse:
    """An error body as vLLM's OpenAI server writes it: the type names the error, code is the status."""
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}},
                        status_code=status)


class LoraAdapters:
    """The adapters loaded into one engine over HTTP: name -> folder, and the two routes."""

    def __init__(self, engine: Any, base_name: str, base_names: set[str], *, enabled: bool,
                 max_request_bytes: int, body_timeout_s: float):
        if enabled and not callable(getattr(engine, "load_adapter", None)):
            raise AjetError(f"{type(engine).__name__} cannot load LoRA adapters; runtime LoRA needs the hf engine")
        self.engine = engine
        self.base_name = base_name
        self.base_names = base_names
        self.enabled = enabled
        self.loaded: dict[str, str] = {}  # name -> folder, in load order
        self.max_request_bytes = max_request_bytes
        self.body_timeout_s = body_timeout_s
        self._lock = asyncio.Lock()  # one load or unload at a time, so the name checks hold

    def adapter_for(self, model: str | None) -> str | None:
        """The adapter a request's `model` names (None: the base model); 404 for an unknown name."""
        if model is None or model in self.base_names:
            return None
        if model in self._serving():
            return model
        names = ", ".join(f"`{n}`" for n in [self.base_name, *self._serving()])
        raise GatewayError(f"The model `{model}` does not exist; this server serves {names} (GET /v1/models)",
                           status=404, code="model_not_found")

    def cards(self) -> list[dict[str, Any]]:
        serving = self._serving()
        return [{"id": name, "object": "model", "created": 0, "owned_by": "ajet", "root": self.loaded[name],
                 "parent": self.base_name} for name in serving]

    def _serving(self) -> list[str]:
        """Loaded names the engine really serves, in load order: `/v1/models` and routing never
        offer a name the engine would answer with an error."""
        engine_has = getattr(getattr(self.engine, "adapters", None), "loaded", None)
        return [name for name in self.loaded if engine_has is None or name in engine_has]

    def mount(self, router: APIRouter) -> None:
        router.add_api_route("/v1/load_lora_adapter", self.load, methods=["POST"])
        router.add_api_route("/v1/unload_lora_adapter", self.unload, methods=["POST"])

    # ------------------------------------------------------------------ routes
    async def load(self, request: Request) -> Response:
        body, refusal = await self._body(request)
        if refusal is not None:
            return refusal
        name, path = body.get("lora_name"), body.get("lora_path")
        if not (isinstance(name, str) and name and isinstance(path, str) and path):
            return vllm_error(400, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.")
        if name in self.base_names:
            return vllm_error(400, "InvalidUserInput",
                              f"The lora adapter name '{name}' conflicts with a served base model.", "lora_name")
        async with self._lock:
            if name in self.loaded and body.get("load_inplace") is not True:
                return vllm_error(400, "InvalidUserInput", f"The lora adapter '{name}' has already been loaded. "
                                  "If you want to load the adapter in place, set 'load_inplace' to true.", "lora_name")
            folder = Path(path)
            if not (folder / "adapter_config.json").is_file():
                return vllm_error(404, "NotFoundError", f"Loading lora {name} failed: No adapter found for {path} "
                                  "(no adapter_config.json in that folder on the server's filesystem)", "lora_path")
            try:
                await asyncio.to_thread(self.engine.load_adapter, name, str(folder))
            except AjetError as exc:  # the engine loads all or nothing: what served before still does
                log.warning("loading LoRA adapter %r from %s failed: %s", name, path, exc)
                return vllm_error(400, "BadRequestError", f"Loading lora {name} failed: {exc}", "lora_path")
            self.loaded.pop(name, None)
            self.loaded[name] = str(folder)
        log.info("Loaded new LoRA adapter: name '%s', path '%s'", name, path)
        return PlainTextResponse(f"Success: LoRA adapter '{name}' added successfully.")

    async def unload(self, request: Request) -> Response:
        body, refusal = await self._body(request)
        if refusal is not None:
            return refusal
        name = body.get("lora_name")
        if not isinstance(name, str) or not name:
            return vllm_error(400, "InvalidUserInput", "either 'lora_name' and 'lora_int_id' needs to be provided.")
        async with self._lock:
            if name not in self.loaded:
                return vllm_error(404, "NotFoundError", f"The lora adapter '{name}' cannot be found.", "lora_name")
            try:
                await asyncio.to_thread(self.engine.unload_adapter, name)
            except AjetError as exc:  # the engine no longer has it: nothing serves under this name
                del self.loaded[name]
                log.warning("unloading LoRA adapter %r: %s", name, exc)
                return vllm_error(404, "NotFoundError", f"The lora adapter '{name}' cannot be found.", "lora_name")
            del self.loaded[name]
        log.info("Removed LoRA adapter: name '%s'", name)
        return PlainTextResponse(f"Success: LoRA adapter '{name}' removed successfully.")

    async def _body(self, request: Request) -> tuple[dict[str, Any], Response | None]:
        if not self.enabled:
            return {}, vllm_error(404, "NotFoundError", f"{request.url.path}: runtime LoRA loading is off; start "
                                  "`ajet serve` with --enable-lora (vLLM: VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)")
        try:
            body = await read_json(request, max_bytes=self.max_request_bytes, timeout_s=self.body_timeout_s)
        except GatewayError as exc:
            return {}, vllm_error(exc.status, "BadRequestError", str(exc))
        if not isinstance(body, dict):
            return {}, vllm_error(400, "InvalidUserInput", "the body must be a JSON object")
        return body, None
