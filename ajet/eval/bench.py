"""`ajet bench --endpoint URL --model M`: an async streaming load test of an OpenAI-compatible chat
endpoint (`ajet serve`, `vllm serve`, a hosted API) over a matrix of concurrency x prompt length x
output length, with the metric definitions of vLLM's `benchmark_serving.py`, so figures compare:

    TTFT   time from sending the request to the first streamed content (or tool-call) chunk
    TPOT   (E2EL - TTFT) / (output tokens - 1), per request with more than one output token
    ITL    the gaps between successive streamed chunks
    E2EL   time from sending the request to the last chunk
    request throughput  completed requests / wall time of the cell
    output throughput   output tokens / wall time;  total token throughput: (prompt + output) / wall time

Each cell sends `--requests` requests with at most `concurrency` in flight (vLLM's
`--max-concurrency` with an unlimited request rate). Token counts come from the server's `usage`
(`stream_options.include_usage`); `ignore_eos` is sent so vLLM generates exactly `max_tokens`
(servers that do not know it ignore it). Prompts are built from a fixed word list, seeded.
Percentiles: p50, p90, p99 and the mean. Writes bench.json and bench.png.

A server that sends the finished completion as one chunk (ajet serve today: its engines return
whole completions) gets TTFT = E2EL and ITL = 0; the report flags this (`streamed_tokens: false`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ajet.errors import ConfigError

console = Console()
_WORDS = ("time river model token light agent paper stone music green number ocean bridge window garden "
          "signal energy market planet circle forest letter engine silver winter summer cloud").split()
PERCENTILES = (50, 90, 99)


@dataclass
class RequestResult:
    """One request as the client saw it (seconds, perf_counter based)."""

    ok: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    e2el: float = 0.0
    itl: list[float] = field(default_factory=list)
    chunks: int = 0
    error: str | None = None


def make_prompt(words: int, rng: random.Random) -> str:
    """A prompt of about `words` words (about as many tokens with common BPE vocabularies)."""
    body = " ".join(rng.choice(_WORDS) for _ in range(max(words - 8, 1)))
    return f"Continue this list of words with more words: {body}"


async def send_one(client: Any, url: str, model: str, prompt: str, max_tokens: int) -> RequestResult:
    """One streamed chat completion, timed chunk by chunk."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    started = time.perf_counter()
    result = RequestResult(ok=False)
    last = None
    try:
        async with client.stream("POST", url, json=body) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode(errors="replace")[:300]
                result.error = f"HTTP {response.status_code}: {text}"
                return result
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("usage"):
                    result.prompt_tokens = chunk["usage"].get("prompt_tokens", 0)
                    result.output_tokens = chunk["usage"].get("completion_tokens", 0)
                delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                if delta.get("content") or delta.get("tool_calls"):
                    now = time.perf_counter()
                    if last is None:
                        result.ttft = now - started
                    else:
                        result.itl.append(now - last)
                    last = now
                    result.chunks += 1
    except Exception as exc:  # a failed request is counted, never fatal
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    result.e2el = time.perf_counter() - started
    result.output_tokens = result.output_tokens or result.chunks
    result.ok = last is not None
    if not result.ok:
        result.error = "no content in the stream"
    return result


def _stats(values: list[float], scale: float = 1000.0) -> dict[str, float]:
    """mean and p50/p90/p99 (numpy's linear interpolation, as vLLM), in milliseconds by default."""
    import numpy as np

    if not values:
        return {"mean": 0.0, **{f"p{p}": 0.0 for p in PERCENTILES}}
    array = np.asarray(values) * scale
    return {"mean": float(array.mean()), **{f"p{p}": float(np.percentile(array, p)) for p in PERCENTILES}}


def summarize_cell(results: list[RequestResult], duration: float) -> dict[str, Any]:
    """vLLM's serving metrics over one cell's requests."""
    done = [r for r in results if r.ok]
    output = sum(r.output_tokens for r in done)
    prompt = sum(r.prompt_tokens for r in done)
    tpots = [(r.e2el - r.ttft) / (r.output_tokens - 1) for r in done if r.output_tokens > 1]
    chunks = sum(r.chunks for r in done)
    return {
        "completed": len(done), "failed": len(results) - len(done), "duration_s": duration,
        "prompt_tokens": prompt, "output_tokens": output,
        "request_throughput": len(done) / duration if duration else 0.0,
        "output_throughput": output / duration if duration else 0.0,
        "total_token_throughput": (prompt + output) / duration if duration else 0.0,
        "ttft_ms": _stats([r.ttft for r in done]), "tpot_ms": _stats(tpots),
        "itl_ms": _stats([gap for r in done for gap in r.itl]), "e2el_ms": _stats([r.e2el for r in done]),
        "streamed_tokens": bool(done) and chunks > 1.5 * len(done),
        "errors": sorted({r.error for r in results if r.error})[:5],
    }


async def run_cell(url: str, model: str, api_key: str, concurrency: int, prompt_words: int, output_len: int,
                   requests: int, seed: int, timeout_s: float) -> dict[str, Any]:
    import httpx

    rng = random.Random(seed)
    prompts = [make_prompt(prompt_words, rng) for _ in range(requests)]
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits,
                                 headers={"Authorization": f"Bearer {api_key}"}) as client:
        async def one(prompt: str) -> RequestResult:
            async with gate:
                return await send_one(client, url, model, prompt, output_len)

        started = time.perf_counter()
        results = await asyncio.gather(*(one(p) for p in prompts))
        duration = time.perf_counter() - started
    return {"concurrency": concurrency, "prompt_words": prompt_words, "output_len": output_len,
            "requests": requests, **summarize_cell(list(results), duration)}


async def run_matrix(endpoint: str, model: str, *, api_key: str = "EMPTY", concurrency: list[int],
                     prompt_words: list[int], output_lens: list[int], requests: int | None = None,
                     seed: int = 0, timeout_s: float = 600.0) -> dict[str, Any]:
    """Every (concurrency, prompt length, output length) cell, one after another."""
    url = endpoint.rstrip("/") + "/chat/completions"
    cells = []
    for p in prompt_words:
        for o in output_lens:
            for c in concurrency:
                n = requests or max(2 * c, 4)
                console.print(f"[dim]cell: concurrency {c}, prompt ~{p} words, output {o} tokens, {n} requests[/]")
                cells.append(await run_cell(url, model, api_key, c, p, o, n, seed, timeout_s))
    return {"endpoint": endpoint, "model": model, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "metric_definitions": "vLLM benchmark_serving (TTFT, TPOT, ITL, E2EL; p50/p90/p99)", "cells": cells}


def print_report(report: dict[str, Any]) -> None:
    table = Table(title=f"ajet bench · {report['model']} @ {report['endpoint']}", header_style="bold")
    for name in ("conc", "prompt", "out", "ok/fail", "req/s", "out tok/s", "TTFT p50/p99 ms",
                 "TPOT p50 ms", "ITL p50 ms", "E2EL p50/p99 ms"):
        table.add_column(name, justify="right")
    for c in report["cells"]:
        table.add_row(str(c["concurrency"]), str(c["prompt_words"]), str(c["output_len"]),
                      f"{c['completed']}/{c['failed']}", f"{c['request_throughput']:.2f}", f"{c['output_throughput']:.1f}",
                      f"{c['ttft_ms']['p50']:.0f}/{c['ttft_ms']['p99']:.0f}", f"{c['tpot_ms']['p50']:.1f}",
                      f"{c['itl_ms']['p50']:.1f}", f"{c['e2el_ms']['p50']:.0f}/{c['e2el_ms']['p99']:.0f}")
    console.print(table)
    if report["cells"] and not any(c["streamed_tokens"] for c in report["cells"]):
        console.print("[yellow]the server sent each completion in one chunk: TTFT equals E2EL and ITL is 0; "
                      "TPOT is then the decode time per token hidden inside TTFT[/]")


def plot_report(report: dict[str, Any], path: Path) -> Path:
    """Throughput, TTFT and TPOT against concurrency, one line per (prompt, output) shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    shapes = sorted({(c["prompt_words"], c["output_len"]) for c in report["cells"]})
    for shape in shapes:
        rows = sorted((c for c in report["cells"] if (c["prompt_words"], c["output_len"]) == shape),
                      key=lambda c: c["concurrency"])
        xs = [c["concurrency"] for c in rows]
        label = f"prompt {shape[0]} / out {shape[1]}"
        axes[0].plot(xs, [c["output_throughput"] for c in rows], marker="o", label=label)
        axes[1].plot(xs, [c["ttft_ms"]["p50"] for c in rows], marker="o", label=f"{label} p50")
        axes[1].plot(xs, [c["ttft_ms"]["p99"] for c in rows], marker="x", linestyle="--", label=f"{label} p99")
        axes[2].plot(xs, [c["tpot_ms"]["p50"] for c in rows], marker="o", label=label)
    for ax, title in zip(axes, ("output tokens / s", "TTFT (ms)", "TPOT p50 (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=6)
    fig.suptitle(f"{report['model']} @ {report['endpoint']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected comma-separated integers, e.g. 1,4,16") from None
    if not values or min(values) < 1:
        raise ConfigError(f"{flag} {text!r}: give one or more integers >= 1")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", required=True, help="model name the endpoint serves")
    parser.add_argument("--api-key", default="EMPTY")
    parser.add_argument("--concurrency", default="1,4,16", help="requests in flight per cell (default: %(default)s)")
    parser.add_argument("--prompt-lens", default="64,256", help="prompt lengths in words (default: %(default)s)")
    parser.add_argument("--output-lens", default="32,128", help="max_tokens per request (default: %(default)s)")
    parser.add_argument("--requests", type=int, help="requests per cell (default: 2 x concurrency, at least 4)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--out", default="bench", metavar="DIR", help="writes DIR/bench.json and DIR/bench.png")


def run_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The `ajet bench` command."""
    report = asyncio.run(run_matrix(
        args.endpoint, args.model, api_key=args.api_key, concurrency=_ints(args.concurrency, "--concurrency"),
        prompt_words=_ints(args.prompt_lens, "--prompt-lens"), output_lens=_ints(args.output_lens, "--output-lens"),
        requests=args.requests, seed=args.seed, timeout_s=args.timeout))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    plot_report(report, out / "bench.png")
    print_report(report)
    console.print(f"wrote {out / 'bench.json'} and {out / 'bench.png'}")
    if all(c["completed"] == 0 for c in report["cells"]):
        errors = sorted({e for c in report["cells"] for e in c["errors"]})
        raise ConfigError(f"no request to {args.endpoint} succeeded: {'; '.join(errors[:3])}")
    return report


__all__ = ["RequestResult", "add_arguments", "run_from_args", "run_matrix", "summarize_cell"]
