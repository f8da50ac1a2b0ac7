"""`ajet serve`'s runtime LoRA endpoints (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter)
over real HTTP on 127.0.0.1, on the tiny model with a saved non-zero peft adapter."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from ajet.engine.hf import HFEngine
from ajet.gateway.server import GatewayServer
from ajet.serving.app import create_serve_app
from ajet.serving.chat import ServeChat

PROMPT = [1, 504, 3458, 314, 4649, 982]


@pytest.fixture(scope="module")
def adapter(tiny_model_path, tmp_path_factory) -> Path:
    torch.manual_seed(3)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=32, target_modules="all-linear",
                                                  init_lora_weights=False))  # random B: the adapter changes outputs
    folder = tmp_path_factory.mktemp("adapter")
    peft_model.save_pretrained(folder)
    return folder


async def _served(tiny_model_path, enable_lora: bool):
    engine = HFEngine.from_pretrained(tiny_model_path, device="cpu", dtype="float32", max_batch_size=2)
    chat = ServeChat(engine, engine.tokenizer, model_name="tiny")
    app = create_serve_app(engine, engine.tokenizer, "tiny", chat=chat, enable_lora=enable_lora)
    server = GatewayServer(app)
    await engine.start()
    return engine, server, await server.start()


@pytest.fixture
async def served(tiny_model_path):
    engine, server, url = await _served(tiny_model_path, enable_lora=True)
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        yield client
    await server.stop()
    await engine.close()


async def _logprobs(client: httpx.AsyncClient, model: str) -> tuple[list[int], list[float]]:
    answer = await client.post("/completions", json={"model": model, "prompt": PROMPT, "max_tokens": 6,
                                                     "temperature": 0, "logprobs": 1})
    assert answer.status_code == 200, answer.text
    choice = answer.json()["choices"][0]
    return choice["token_ids"], choice["logprobs"]["token_logprobs"]


def _error(answer: httpx.Response, status: int, kind: str) -> str:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == (kind, status)
    return error["message"]


async def test_load_use_and_unload_an_adapter(served, adapter):
    base_before = await _logprobs(served, "tiny")
    loaded = await served.post("/load_lora_adapter", json={"lora_name": "step-1", "lora_path": str(adapter)})
    assert (loaded.status_code, loaded.text) == (200, "Success: LoRA adapter 'step-1' added successfully.")
    models = (await served.get("/models")).json()["data"]
    assert [(m["id"], m["parent"], m["root"]) for m in models] == [("tiny", None, "tiny"),
                                                                    ("step-1", "tiny", str(adapter))]

    ids, logprobs = await _logprobs(served, "step-1")
    assert await _logprobs(served, "tiny") == base_before  # the base model is untouched
    # Logprobs of the adapter's own greedy tokens differ from the base model's run.
    assert (ids, logprobs) != base_before and max(abs(a - b) for a, b in zip(logprobs, base_before[1])) > 1e-3
    chat = {"messages": [{"role": "user", "content": "Say something"}], "max_tokens": 8, "temperature": 0}
    base_chat = (await served.post("/chat/completions", json={**chat, "model": "tiny"})).json()
    lora_chat = (await served.post("/chat/completions", json={**chat, "model": "step-1"})).json()
    assert lora_chat["choices"][0]["message"] != base_chat["choices"][0]["message"]

    again = await served.post("/load_lora_adapter", json={"lora_name": "step-1", "lora_path": str(adapter)})
    assert "has already been loaded" in _error(again, 400, "InvalidUserInput")
    inplace = await served.post("/load_lora_adapter", json={"lora_name": "step-1", "lora_path": str(adapter),
                                                            "load_inplace": True})
    assert inplace.status_code == 200 and await _logprobs(served, "step-1") == (ids, logprobs)

    unloaded = await served.post("/unload_lora_adapter", json={"lora_name": "step-1"})
    assert (unloaded.status_code, unloaded.text) == (200, "Success: LoRA adapter 'step-1' removed successfully.")
    gone = await served.post("/completions", json={"model": "step-1", "prompt": PROMPT, "max_tokens": 2})
    assert gone.status_code == 404 and "`step-1` does not exist" in gone.json()["error"]["message"]
    twice = await served.post("/unload_lora_adapter", json={"lora_name": "step-1"})
    assert _error(twice, 404, "NotFoundError") == "The lora adapter 'step-1' cannot be found."
    assert [m["id"] for m in (await served.get("/models")).json()["data"]] == ["tiny"]


async def test_bad_loads_are_refused_naming_the_problem(served, adapter, tmp_path):
    missing = tmp_path / "nowhere"
    answer = await served.post("/load_lora_adapter", json={"lora_name": "a", "lora_path": str(missing)})
    assert str(missing) in _error(answer, 404, "NotFoundError")

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4}))
    answer = await served.post("/load_lora_adapter", json={"lora_name": "a", "lora_path": str(broken)})
    assert str(broken) in _error(answer, 400, "BadRequestError")

    answer = await served.post("/load_lora_adapter", json={"lora_name": "a"})
    assert _error(answer, 400, "InvalidUserInput") == "Both 'lora_name' and 'lora_path' must be provided."
    answer = await served.post("/load_lora_adapter", json={"lora_name": "tiny", "lora_path": str(adapter)})
    assert "conflicts with a served base model" in _error(answer, 400, "InvalidUserInput")
    answer = await served.post("/unload_lora_adapter", json=["a"])
    assert _error(answer, 400, "InvalidUserInput") == "the body must be a JSON object"
    assert [m["id"] for m in (await served.get("/models")).json()["data"]] == ["tiny"]


async def test_endpoints_answer_404_unless_enabled(tiny_model_path, adapter):
    engine, server, url = await _served(tiny_model_path, enable_lora=False)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            answer = await client.post("/load_lora_adapter", json={"lora_name": "a", "lora_path": str(adapter)})
            assert "--enable-lora" in _error(answer, 404, "NotFoundError")
            answer = await client.post("/unload_lora_adapter", json={"lora_name": "a"})
            assert answer.status_code == 404
    finally:
        await server.stop()
        await engine.close()
