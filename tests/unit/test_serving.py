"""Prometheus /metrics on `ajet serve` and `ajet bench` against it, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ajet.eval.bench import RequestResult, run_matrix, summarize_cell
from ajet.cli import main
from ajet.engine.hf import HFEngine
from ajet.gateway.server import Gateway, GatewayServer
from ajet.serving.app import create_serve_app
from tests.e2e.serve_process import ajet_serve, free_port

ROOT = Path(__file__).resolve().parents[2]


def samples(text: str) -> dict[str, float]:
    """'name{label=value,...}' -> value, from Prometheus text."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


@pytest.fixture
async def served(tiny_model_path):
    engine = HFEngine.from_pretrained(tiny_model_path, device="cpu", dtype="float32", max_batch_size=2)
    chat = Gateway(engine, engine.tokenizer, model_name="tiny", require_key=False)
    app = create_serve_app(engine, engine.tokenizer, "tiny", extra_routers=[chat.router])
    server = GatewayServer(app)
    await engine.start()
    base = await server.start()
    yield base
    await server.stop()
    await engine.close()


async def test_metrics_count_what_the_server_did(served):
    async with httpx.AsyncClient(timeout=120) as client:
        before = samples((await client.get(served.removesuffix("/v1") + "/metrics")).text)
        assert before['vllm:num_requests_running{model_name=tiny}'] == 0
        chat = await client.post(served + "/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "temperature": 0})
        comp = await client.post(served + "/completions", json={"prompt": [1, 2, 3], "max_tokens": 3})
        bad = await client.post(served + "/completions", json={"prompt": []})
        scrape = await client.get(served.removesuffix("/v1") + "/metrics")
    assert scrape.headers["content-type"].startswith("text/plain")
    after = samples(scrape.text)
    usage = chat.json()["usage"]
    generated = usage["completion_tokens"] + comp.json()["usage"]["completion_tokens"]
    assert bad.status_code == 400
    success = sum(v for k, v in after.items() if k.startswith("vllm:request_success_total{"))
    assert success == 2
    assert after["vllm:generation_tokens_total{model_name=tiny}"] == generated
    assert after["vllm:prompt_tokens_total{model_name=tiny}"] == usage["prompt_tokens"] + 3
    assert after["vllm:time_to_first_token_seconds_count{model_name=tiny}"] == 2
    assert after["vllm:e2e_request_latency_seconds_sum{model_name=tiny}"] > 0
    assert after["ajet:http_requests_total{method=POST,route=/v1/completions,status=400}"] == 1
    assert after["ajet:http_requests_total{method=POST,route=/v1/chat/completions,status=200}"] == 1


async def test_bench_matrix_against_ajet_serve(served, tmp_path):
    report = await run_matrix(served, "tiny", concurrency=[1, 3], prompt_words=[12], output_lens=[4],
                              requests=3)
    assert [(c["concurrency"], c["completed"], c["failed"]) for c in report["cells"]] == [(1, 3, 0), (3, 3, 0)]
    cell = report["cells"][1]
    assert cell["output_tokens"] == 12 and cell["prompt_tokens"] > 3 * 12  # ignore_eos is not honoured: 4 each
    assert cell["request_throughput"] > 0 and cell["ttft_ms"]["p50"] > 0
    assert cell["streamed_tokens"] is False  # ajet serve sends the finished completion as one chunk
    assert cell["e2el_ms"]["p99"] >= cell["e2el_ms"]["p50"] >= cell["ttft_ms"]["p50"] * 0.99


def test_vllm_metric_definitions_on_hand_made_timings():
    # Two requests: TTFT 0.1 / 0.3 s, E2EL 0.5 / 0.9 s, 5 / 3 output tokens, chunk gaps as given.
    results = [RequestResult(ok=True, prompt_tokens=10, output_tokens=5, ttft=0.1, e2el=0.5, itl=[0.1] * 4, chunks=5),
               RequestResult(ok=True, prompt_tokens=20, output_tokens=3, ttft=0.3, e2el=0.9, itl=[0.3, 0.3], chunks=3),
               RequestResult(ok=False, error="HTTP 500")]
    cell = summarize_cell(results, duration=2.0)
    assert (cell["completed"], cell["failed"]) == (2, 1)
    assert cell["request_throughput"] == 1.0 and cell["output_throughput"] == 4.0
    assert cell["total_token_throughput"] == 19.0  # (30 + 8) / 2
    assert cell["tpot_ms"]["mean"] == pytest.approx(((0.4 / 4) + (0.6 / 2)) / 2 * 1000)  # (E2EL-TTFT)/(n-1)
    assert cell["ttft_ms"]["p50"] == pytest.approx(200.0)
    assert cell["itl_ms"]["p50"] == pytest.approx(100.0)  # six gaps: four of 0.1, two of 0.3
    assert cell["streamed_tokens"] is True


@pytest.mark.slow
def test_ajet_bench_cli_against_ajet_serve_subprocess(tmp_path):
    with ajet_serve("tiny-random", tmp_path / "serve.log", served_name=None) as url:
        code = main(["bench", "--endpoint", url, "--model", "tiny-random",
                     "--concurrency", "1,2", "--prompt-lens", "8", "--output-lens", "4", "--requests", "2",
                     "--out", str(tmp_path)])
        assert code == 0
        report = json.loads((tmp_path / "bench.json").read_text())
        assert sum(c["completed"] for c in report["cells"]) == 4
        assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
        scraped = samples(httpx.get(url.removesuffix("/v1") + "/metrics").text)
        assert sum(v for k, v in scraped.items() if k.startswith("vllm:request_success_total{")) == 4


def test_bench_reports_an_unreachable_endpoint(tmp_path, capsys):
    code = main(["bench", "--endpoint", f"http://127.0.0.1:{free_port()}/v1", "--model", "m", "--concurrency", "1",
                 "--prompt-lens", "4", "--output-lens", "2", "--requests", "1", "--out", str(tmp_path)])
    assert code == 2 and "no request to http://127.0.0.1:" in capsys.readouterr().err
    assert main(["bench", "--endpoint", "http://x/v1", "--model", "m", "--concurrency", "0"]) == 2
