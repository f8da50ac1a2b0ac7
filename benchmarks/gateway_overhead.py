"""Latency the gateway adds to an LLM call, and episodes/s through the whole rollout path.

Per call: the same request (a 3-message tool conversation, a 20-token completion) is answered
(a) by calling the engine directly with the prompt ids, and (b) through the gateway over HTTP
(render with the chat template, splice earlier turns, generate, parse tool calls, record) with a
plain httpx client; the official openai SDK's own client-side cost is shown beside it. The engine is the replay engine, so the engine's own time is ~0 and (b) - (a) is
what the gateway costs. Also shown with the tiny HF model, where the engine does real work.

Episodes/s: a 3-turn tool workflow run by the rollout runner at concurrency 1, 8 and 64.

    python benchmarks/gateway_overhead.py [--calls 300]
Last line: `gateway_overhead_pct=<x> p50_ms=<y> p99_ms=<z> floor_pct=<f> floor_ms=<g>`: the p50
overhead with the replay engine as a percentage of the p50 tiny-model 20-token call (direct), both
measured in this run; and the floor beside it: the p50 round trip of the same request, same client,
to a bare ASGI app on the same uvicorn server that reads the body and answers a gateway reply's bytes
(no framework, no parsing), measured interleaved with the gateway calls. No gateway served over
HTTP by this client can cost less than the floor; overhead minus floor is the gateway's own work.
Then `in_process_pct=<p> in_process_ms=<q>`: the same call in-process (`InProcessTransport`: the
same ASGI app without a socket, what `tuner.openai_client()` uses when the rollout runs beside the
gateway), interleaved with the others. The HTTP server is uvicorn with httptools when installed (a
core dependency; h11 otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import httpx
import openai

from ajet import Task, Workflow, WorkflowOutput
from ajet.engine.base import SamplingParams
from ajet.engine.replay import ReplayEngine
from ajet.gateway.episodes import EpisodeSession
from ajet.gateway.inprocess import InProcessTransport
from ajet.gateway.server import Gateway, GatewayServer, create_app
from ajet.judge.base import Judge, Reward
from ajet.models import resolve_model_path
from ajet.rollout.runner import RolloutRunner, RolloutSettings
from ajet.tracker.episode import EpisodeTracker

TOOLS = [{"type": "function", "function": {"name": "get_price", "description": "Gas price of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CALL = '<tool_call>\n{"name": "get_price", "arguments": {"city": "Houston"}}\n</tool_call>'
MESSAGES = [{"role": "system", "content": "You are a natural-gas expert."},
            {"role": "user", "content": "What does gas cost in Houston today, in USD per MMBtu?"}]


def bare_app(reply: bytes):
    """The HTTP floor: reads the whole request, answers `reply` (a gateway answer's bytes) as is."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(reply))]})
        await send({"type": "http.response.body", "body": reply})

    return app


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def per_call(engine, tokenizer, calls: int, sdk: bool = False
                   ) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per call, in ms: the engine called directly, the same call through the gateway over HTTP, the floor
    (the same request to `bare_app`, answering the gateway's reply bytes) and the same call through the
    gateway in-process (`InProcessTransport`, what `tuner.openai_client()` uses), interleaved."""
    gateway = Gateway(engine, tokenizer)
    app = create_app(gateway)
    server = GatewayServer(app)
    url = await server.start()
    prompt = gateway.renderer.encode(MESSAGES, TOOLS).token_ids
    sampling = SamplingParams(max_tokens=20, temperature=0)
    direct, through = [], []
    session = EpisodeSession("bench", EpisodeTracker("bench"), max_tokens=20, temperature=0)
    key = gateway.open_episode(session)("assistant")
    client = openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0)
    # A long timeout: on a loaded machine one tiny-model call can take seconds.
    http = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    body = {"model": "m", "messages": MESSAGES, "tools": TOOLS}
    reply = (await http.post("/chat/completions", json=body)).content
    bare = GatewayServer(bare_app(reply))
    bare_http = httpx.AsyncClient(base_url=await bare.start(), headers={"Authorization": f"Bearer {key}"}, timeout=120)
    local = httpx.AsyncClient(transport=InProcessTransport(app), base_url=url, headers={"Authorization": f"Bearer {key}"},
                              timeout=120)
    local_client = openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0,
                                      http_client=httpx.AsyncClient(transport=InProcessTransport(app), timeout=120))
    floor, inproc = [], []
    for i in range(calls + 10):  # the first 10 warm up connections and caches
        t0 = time.perf_counter()
        await engine.generate(prompt, sampling)
        t1 = time.perf_counter()
        if sdk:
            await client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS)
        else:
            (await http.post("/chat/completions", json=body)).raise_for_status()
        t2 = time.perf_counter()
        (await bare_http.post("/chat/completions", json=body)).raise_for_status()
        t3 = time.perf_counter()
        if sdk:
            await local_client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS)
        else:
            (await local.post("/chat/completions", json=body)).raise_for_status()
        t4 = time.perf_counter()
        if i >= 10:
            direct.append((t1 - t0) * 1000)
            through.append((t2 - t1) * 1000)
            floor.append((t3 - t2) * 1000)
            inproc.append((t4 - t3) * 1000)
    await http.aclose()
    await bare_http.aclose()
    await local.aclose()
    await local_client.close()
    await client.close()
    await server.stop()
    await bare.stop()
    return direct, through, floor, inproc


class ToolEpisode(Workflow):
    """Three LLM calls: a tool call, the tool result, a final answer, a follow-up."""

    async def execute(self, task, tuner):
        client = tuner.openai_client()
        messages = list(MESSAGES)
        for _ in range(3):
            r = await client.chat.completions.create(model=tuner.model, messages=messages, tools=TOOLS)
            msg = r.choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            for call in msg.tool_calls or []:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"price": 3.1})})
            if not msg.tool_calls:
                messages.append({"role": "user", "content": "And tomorrow?"})
        return WorkflowOutput(answer=msg.content)


class Constant(Judge):
    async def score(self, task, output):
        return Reward(total=1.0)


async def episodes_per_s(tokenizer, concurrency: int, episodes: int) -> float:
    script = [{"text": CALL}, {"text": "It is 3.1 USD/MMBtu."}, {"text": "Probably the same."}] * episodes
    engine = ReplayEngine(script, tokenizer)
    gateway = Gateway(engine, tokenizer)
    server = GatewayServer(create_app(gateway))
    url = await server.start()
    runner = RolloutRunner(gateway, url, ToolEpisode(), Constant())
    tasks = [Task(task_id=f"t{i}", query="q") for i in range(episodes)]
    t0 = time.perf_counter()
    batch = await runner.run(tasks, RolloutSettings(group_size=1, concurrency=concurrency), show_progress=False)
    seconds = time.perf_counter() - t0
    await server.stop()
    assert all(e.error is None for e in batch.episodes), batch.summary()["errors"]
    return episodes / seconds


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from ajet.engine.hf import HFEngine

    tiny = resolve_model_path("tiny-random")
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    replay = ReplayEngine([{"text": CALL}], tokenizer, repeat=True)
    direct, through, floor, inproc = await per_call(replay, tokenizer, args.calls)
    overhead = [b - a for a, b in zip(direct, through)]
    local = [b - a for a, b in zip(direct, inproc)]
    print(f"replay engine: direct p50 {percentile(direct, .5):.3f} ms · via gateway (httpx) p50 "
          f"{percentile(through, .5):.3f} ms p99 {percentile(through, .99):.3f} ms")
    print(f"HTTP floor (the same request to a bare ASGI app on the same uvicorn, answering the gateway's "
          f"reply bytes): p50 {percentile(floor, .5):.3f} ms p99 {percentile(floor, .99):.3f} ms · the gateway's "
          f"own work, p50 overhead - floor: {percentile(overhead, .5) - percentile(floor, .5):.3f} ms")
    print(f"in-process (InProcessTransport, what tuner.openai_client() uses beside the gateway): p50 "
          f"{percentile(inproc, .5):.3f} ms p99 {percentile(inproc, .99):.3f} ms")
    _, sdk, _, sdk_local = await per_call(replay, tokenizer, args.calls, sdk=True)
    print(f"same through the openai SDK client: p50 {percentile(sdk, .5):.3f} ms p99 {percentile(sdk, .99):.3f} ms "
          f"over HTTP, p50 {percentile(sdk_local, .5):.3f} ms in-process (the SDK's own parsing and validation included)")
    hf = HFEngine.from_pretrained(tiny, device="cpu")
    hf_direct, hf_through, _, _ = await per_call(hf, hf.tokenizer, max(args.calls // 5, 20))
    print(f"tiny HF engine (20 tokens): direct p50 {percentile(hf_direct, .5):.2f} ms · via gateway p50 "
          f"{percentile(hf_through, .5):.2f} ms (added {statistics.median(hf_through) - statistics.median(hf_direct):.2f} ms: "
          "through the gateway the engine also applies the tool-call constraint of tool_choice auto, the direct call not)")
    for concurrency in (1, 8, 64):
        rate = await episodes_per_s(tokenizer, concurrency, episodes=max(64, concurrency * 2))
        print(f"3-call tool episodes, concurrency {concurrency:>2}: {rate:.1f} episodes/s")
    p50 = percentile(overhead, .5)
    tiny = percentile(hf_direct, .5)
    print(f"gateway_overhead_pct={100 * p50 / tiny:.2f} p50_ms={p50:.3f} p99_ms={percentile(overhead, .99):.3f} "
          f"floor_pct={100 * percentile(floor, .5) / tiny:.2f} floor_ms={percentile(floor, .5):.3f} "
          f"in_process_pct={100 * percentile(local, .5) / tiny:.2f} in_process_ms={percentile(local, .5):.3f}")


if __name__ == "__main__":
    asyncio.run(main())
