"""Prometheus metrics for `ajet serve`, under vLLM's metric names so vLLM's Grafana dashboards work.

`mount_metrics(app, engine, model_name)` adds `GET /metrics` (Prometheus text format) and meters
every completion the engine makes, whichever route asked for it (`/v1/completions`,
`/v1/chat/completions`), plus every HTTP request.

    vllm:num_requests_running          gauge      completions being decoded (at most the batch size)
    vllm:num_requests_waiting          gauge      completions queued behind a full batch
    vllm:request_success_total         counter    finished completions, by finished_reason
    vllm:prompt_tokens_total           counter    prompt tokens of finished completions
    vllm:generation_tokens_total       counter    generated tokens
    vllm:e2e_request_latency_seconds   histogram  engine time of one completion
    vllm:time_to_first_token_seconds   histogram  time until the first token reached the server
    vllm:time_per_output_token_seconds histogram  mean seconds per generated token after the first
    vllm:request_prompt_tokens         histogram  prompt length per completion
    vllm:request_generation_tokens     histogram  output length per completion
    ajet:http_requests_total           counter    HTTP requests, by method, route and status
    ajet:http_request_duration_seconds histogram  HTTP handling time, by route

ajet's engines return a completion whole (no token streaming), so the first token reaches the
server when the last one does: time_to_first_token equals e2e latency, and the per-token time is
the completion's mean (e2e / tokens), not vLLM's per-step interval. Labels: `model_name` as vLLM.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_TPOT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


class ServingMetrics:
    """The collectors of one server, in their own registry (several apps in one process never clash)."""

    def __init__(self, model_name: str, max_batch_size: int | None = None) -> None:
        self.registry = CollectorRegistry()
        self.model_name = model_name
        self.max_batch_size = max_batch_size
        self.in_flight = 0
        r, m = self.registry, ["model_name"]
        self.running = Gauge("vllm:num_requests_running", "Number of requests currently running.", m, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", m, registry=r)
        self.success = Counter("vllm:request_success", "Count of successfully processed requests.",
                               m + ["finished_reason"], registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", m, registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.", m,
                                         registry=r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                             m, buckets=_LATENCY, registry=r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              m, buckets=_LATENCY, registry=r)
        self.tpot = Histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                              m, buckets=_TPOT, registry=r)
        self.request_prompt = Histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", m,
                                        buckets=_TOKENS, registry=r)
        self.request_generation = Histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
                                            m, buckets=_TOKENS, registry=r)
        self.http = Counter("ajet:http_requests", "HTTP requests by method, route and status.",
                            ["method", "route", "status"], registry=r)
        self.http_seconds = Histogram("ajet:http_request_duration_seconds", "HTTP handling time by route.",
                                      ["route"], buckets=_LATENCY, registry=r)
        self._set_queue()

    def _set_queue(self) -> None:
        batch = self.max_batch_size or self.in_flight
        running = min(self.in_flight, batch)
        self.running.labels(self.model_name).set(running)
        self.waiting.labels(self.model_name).set(self.in_flight - running)

    def started(self) -> None:
        self.in_flight += 1
        self._set_queue()

    def finished(self, prompt_len: int, output_len: int, seconds: float, reason: str | None) -> None:
        self.in_flight -= 1
        self._set_queue()
        if reason is None:  # the engine raised: not a success, nothing generated
            return
        name = self.model_name
        self.success.labels(name, reason).inc()
        self.prompt_tokens.labels(name).inc(prompt_len)
        self.generation_tokens.labels(name).inc(output_len)
        self.e2e.labels(name).observe(seconds)
        self.ttft.labels(name).observe(seconds)
        if output_len > 1:
            self.tpot.labels(name).observe(seconds / output_len)
        self.request_prompt.labels(name).observe(prompt_len)
        self.request_generation.labels(name).observe(output_len)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def meter_engine(engine: Any, metrics: ServingMetrics) -> None:
    """Wrap `engine.generate` on this instance so every completion is counted, whoever calls it."""
    inner = engine.generate

    async def generate(prompt_ids: list[int], sampling: Any) -> Any:
        metrics.started()
        started = time.perf_counter()
        reason = None
        try:
            generation = await inner(prompt_ids, sampling)
            reason = generation.finish_reason
            return generation
        finally:
            output = len(generation.token_ids) if reason is not None else 0
            metrics.finished(len(prompt_ids), output, time.perf_counter() - started, reason)

    engine.generate = generate


def mount_metrics(app: Any, engine: Any, model_name: str) -> ServingMetrics:
    """Add `GET /metrics` and the HTTP middleware to `app`; meter `engine`. Returns the collectors."""
    from starlette.requests import Request
    from starlette.responses import Response

    metrics = ServingMetrics(model_name, getattr(engine, "max_batch_size", None))
    meter_engine(engine, metrics)
    app.state.metrics = metrics

    async def scrape() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.add_api_route("/metrics", scrape, methods=["GET"], include_in_schema=False)

    @app.middleware("http")
    async def count_requests(request: Request, call_next):
        started = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            metrics.http.labels(request.method, path, str(status)).inc()
            metrics.http_seconds.labels(path).observe(time.perf_counter() - started)

    return metrics
