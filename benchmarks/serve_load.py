"""`ajet serve` under load vs plain transformers `generate`, one request at a time.

Starts `ajet serve --model M` as a subprocess, sends the same greedy chat requests at concurrency
1, 4 and 16 (streamed, through `ajet bench`'s client, so the metrics are vLLM's), then answers the
same prompts with `AutoModelForCausalLM.generate` one at a time in this process (the peer: what a
script without a server does). Compares output tokens per second.

    python benchmarks/serve_load.py [--model smollm2-135m-instruct] [--requests 16] [--output-len 64]

Last line: serve_over_sequential_throughput=<best serve output tok/s / sequential output tok/s>.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ajet.eval.bench import make_prompt, run_cell  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "ajet.cli", "serve", "--model", model, "--port", str(port),
                             "--max-batch-size", "16"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"ajet serve exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(1)
    proc.kill()
    raise SystemExit("ajet serve did not start in 300 s")


def sequential(model: str, prompts: list[str], output_len: int) -> tuple[int, float]:
    """Plain transformers: one generate() per prompt, greedy; returns (output tokens, seconds)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ajet.models import resolve_model_path

    path = resolve_model_path(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    net = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tokens, started = 0, time.perf_counter()
    for prompt in prompts:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = net.generate(**ids, max_new_tokens=output_len, do_sample=False, pad_token_id=tokenizer.eos_token_id)
        tokens += out.shape[1] - ids["input_ids"].shape[1]
    return tokens, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--prompt-words", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--concurrency", default="1,4,16")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    port = free_port()
    server = start_server(args.model, port)
    serve_rates = {}
    try:
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        asyncio.run(run_cell(url, args.model, "EMPTY", 1, args.prompt_words, 8, 1, 99, 600))  # warm-up
        for level in levels:
            cell = asyncio.run(run_cell(url, args.model, "EMPTY", level, args.prompt_words, args.output_len,
                                        args.requests, 0, 600))
            serve_rates[level] = cell["output_throughput"]
            print(f"ajet serve, concurrency {level:>2}: {cell['completed']}/{args.requests} ok, "
                  f"{cell['output_tokens']} output tokens in {cell['duration_s']:.1f} s = "
                  f"{cell['output_throughput']:.1f} tok/s, E2EL p50 {cell['e2el_ms']['p50']:.0f} ms", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    rng = random.Random(0)  # the same prompts run_cell built with seed 0
    same_prompts = [make_prompt(args.prompt_words, rng) for _ in range(args.requests)]
    tokens, seconds = sequential(args.model, same_prompts, args.output_len)
    rate = tokens / seconds
    print(f"transformers generate, one at a time: {tokens} output tokens in {seconds:.1f} s = {rate:.1f} tok/s")
    best = max(serve_rates, key=serve_rates.get)
    print(f"best ajet serve level: concurrency {best}")
    print(f"serve_over_sequential_throughput={serve_rates[best] / rate:.2f}")


if __name__ == "__main__":
    main()
