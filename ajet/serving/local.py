"""A local model behind an in-process OpenAI-compatible endpoint on 127.0.0.1.

`local_endpoint(model)` loads `model` (the embedded name, `tiny-random`, a model folder, an
exported folder; a training checkpoint or run folder is merged first) with the `hf` engine, mounts
the same chat gateway `ajet serve` uses (chat template, tool-call parsing, any API key) on a free
port, and yields an `Endpoint`. Code that speaks HTTP (BFCL's own handlers, the OpenAI SDK) then
treats a local model exactly like a hosted one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

# A checkpoint (or a run folder: its newest checkpoint) is merged into `work_dir/model-<step>` first.
from ajet.export.model_folder import model_folder


@dataclass(frozen=True)
class Endpoint:
    """Where an OpenAI-compatible chat API answers: base URL (ending in /v1), model name, key."""

    base_url: str
    model: str
    api_key: str = "EMPTY"


@asynccontextmanager
async def local_endpoint(
    model: str,
    work_dir: Path,
    *,
    chat_template: str | None = None,
    max_prompt_tokens: int = 4096,
    max_batch_size: int = 16,
    device: str = "auto",
    dtype: str = "auto",
) -> AsyncIterator[Endpoint]:
    """Serve `model` on 127.0.0.1 (free port) for the duration of the block."""
    from ajet.engine.hf import HFEngine
    from ajet.gateway.server import Gateway, GatewayServer, create_app
    from ajet.models import read_chat_template, resolve_model_path

    path = resolve_model_path(model_folder(model, work_dir))
    engine = HFEngine.from_pretrained(path, device=device, dtype=dtype, max_batch_size=max_batch_size,
                                      model_name=model)
    gateway = Gateway(engine, engine.tokenizer, model_name=model, chat_template=read_chat_template(chat_template),
                      max_prompt_tokens=max_prompt_tokens, require_key=False)
    server = GatewayServer(create_app(gateway))
    await engine.start()
    try:
        base_url = await server.start()
        try:
            yield Endpoint(base_url=base_url, model=model)
        finally:
            await server.stop()
    finally:
        await engine.close()
