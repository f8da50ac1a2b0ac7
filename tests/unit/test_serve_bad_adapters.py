"""A failed LoRA load on `ajet serve` changes nothing (issue 16, items 1 and 6): bad peft folders made
from a real saved adapter of the tiny model (a tensor of the wrong shape, a truncated safetensors
file, tensors missing under `init_lora_weights: false`, a config whose rank disagrees, no config)
are refused, and greedy output of the base model and of an adapter already loaded stays the same to
the token and logprob; the name is not stuck; an in-place reload that fails keeps the old version,
which unloads cleanly. Over real HTTP on 127.0.0.1, in process and in a real `ajet serve`."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from ajet.engine.hf import HFEngine
from ajet.gateway.server import GatewayServer
from ajet.serving.app import create_serve_app
from ajet.serving.chat import ServeChat
from tests.e2e.serve_process import ajet_serve
from tests.unit.bad_adapters import BAD, missing_tensors, save_adapter, truncated, wrong_rank, wrong_shape

PROMPT = [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def folders(tiny_model_path, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adapters")
    saved = {"keep": save_adapter(tiny_model_path, root / "keep", 3), "other": save_adapter(tiny_model_path, root / "other", 5)}
    for breaker in BAD:
        shutil.copytree(saved["other"], root / breaker.__name__)
        breaker(root / breaker.__name__)
        saved[breaker.__name__] = root / breaker.__name__
    return saved


@pytest.fixture
async def client(tiny_model_path):
    # No prefix cache: a replayed prompt then runs the same arithmetic, so outputs compare exactly.
    engine = HFEngine.from_pretrained(tiny_model_path, device="cpu", dtype="float32", max_batch_size=2,
                                      prefix_cache_mb=0)
    chat = ServeChat(engine, engine.tokenizer, model_name="tiny")
    app = create_serve_app(engine, engine.tokenizer, "tiny", chat=chat, enable_lora=True)
    server = GatewayServer(app)
    await engine.start()
    url = await server.start()
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:  # one keep-alive connection throughout
        yield http
    await server.stop()
    await engine.close()


async def _greedy(http: httpx.AsyncClient, model: str | None = None) -> tuple[list[int], list[float]]:
    body = {"prompt": PROMPT, "max_tokens": 6, "temperature": 0, "logprobs": 1, **({"model": model} if model else {})}
    answer = await http.post("/completions", json=body)
    assert answer.status_code == 200, answer.text
    choice = answer.json()["choices"][0]
    return choice["token_ids"], choice["logprobs"]["token_logprobs"]


async def _models(http: httpx.AsyncClient) -> list[str]:
    return [m["id"] for m in (await http.get("/models")).json()["data"]]


async def _load(http: httpx.AsyncClient, name: str, folder: Path, inplace: bool = False) -> httpx.Response:
    return await http.post("/load_lora_adapter", json={"lora_name": name, "lora_path": str(folder),
                                                       "load_inplace": inplace})


async def test_a_failed_load_leaves_the_base_model_and_loaded_adapters_as_they_were(client, folders):
    assert (await _load(client, "keep", folders["keep"])).status_code == 200
    base, keep = await _greedy(client), await _greedy(client, "keep")
    assert base != keep  # the adapter really changes the output
    for breaker, (status, phrase) in BAD.items():
        answer = await _load(client, "g", folders[breaker.__name__])
        assert answer.status_code == status, (breaker.__name__, answer.text)
        assert phrase in answer.json()["error"]["message"], (breaker.__name__, answer.text)
        assert await _greedy(client) == base, breaker.__name__  # token ids and logprobs alike
        assert await _greedy(client, "keep") == keep, breaker.__name__
        assert await _models(client) == ["tiny", "keep"]
        gone = await client.post("/unload_lora_adapter", json={"lora_name": "g"})
        assert gone.status_code == 404  # never loaded
        assert (await client.post("/completions", json={"model": "g", "prompt": PROMPT})).status_code == 404
    # The name is not stuck: a good adapter loads under it and serves.
    assert (await _load(client, "g", folders["other"])).status_code == 200
    assert await _greedy(client, "g") not in (base, keep)
    assert await _models(client) == ["tiny", "keep", "g"]


async def test_a_failed_in_place_reload_keeps_the_old_version_which_unloads(client, folders):
    assert (await _load(client, "g", folders["keep"])).status_code == 200
    before = await _greedy(client, "g")
    for breaker in (wrong_shape, truncated, missing_tensors, wrong_rank):
        answer = await _load(client, "g", folders[breaker.__name__], inplace=True)
        assert answer.status_code == 400, answer.text
        assert await _greedy(client, "g") == before  # the old version still serves
        assert await _models(client) == ["tiny", "g"]
    unloaded = await client.post("/unload_lora_adapter", json={"lora_name": "g"})
    assert (unloaded.status_code, unloaded.text) == (200, "Success: LoRA adapter 'g' removed successfully.")
    assert await _models(client) == ["tiny"]  # and the same connection goes on answering
    chat = await client.post("/chat/completions", json={"model": "g", "messages": [{"role": "user", "content": "hi"}]})
    assert chat.status_code == 404 and chat.json()["error"]["code"] == "model_not_found"


def test_the_issue_repro_on_a_real_ajet_serve(tiny_model_path, folders, tmp_path):
    """The issue's own steps against `ajet serve --model tiny-random --enable-lora` in a subprocess."""
    serve = ajet_serve(tiny_model_path, tmp_path / "serve.log", "--enable-lora")
    with serve as url, httpx.Client(base_url=url, timeout=120) as http:
        greedy = {"prompt": PROMPT, "max_tokens": 6, "temperature": 0}
        before = http.post("/completions", json=greedy).json()["choices"][0]["token_ids"]
        for breaker in (wrong_shape, truncated, missing_tensors):
            folder = str(folders[breaker.__name__])
            answer = http.post("/load_lora_adapter", json={"lora_name": "g", "lora_path": folder})
            assert answer.status_code == 400, answer.text
            assert http.post("/completions", json=greedy).json()["choices"][0]["token_ids"] == before
        good = http.post("/load_lora_adapter", json={"lora_name": "g", "lora_path": str(folders["other"])})
        assert good.status_code == 200
        chat = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert http.post("/chat/completions", json=chat).status_code == 200  # main() gives chat the app's adapters
        assert http.post("/unload_lora_adapter", json={"lora_name": "g"}).status_code == 200
        assert http.post("/chat/completions", json=chat).json()["error"]["code"] == "model_not_found"
