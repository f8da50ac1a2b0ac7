"""Rollout throughput on Ray: 1 vs 2 workers, with an environment that costs CPU time per step.

Each episode runs `--turns` steps; a step is one LLM call through the real gateway (a scripted engine
that answers at once, so the model is not what is measured) and then `--step-ms` of pure-Python CPU
work in the environment (hashing, holding the GIL: a simulator, a sandbox, a parser). In-process, all
episodes share one interpreter, so that work runs one step at a time however many episodes are in
flight. On Ray, each worker is its own process: with 2 workers on 2 cores, two steps run at once.

    python benchmarks/ray_rollout.py [--tasks 16] [--turns 3] [--step-ms 150] [--repeats 2]

Reports episodes/s in-process, with 1 Ray worker and with 2, and the speedup of 2 workers over 1.
What it implies for N nodes: the environment's CPU scales with workers (one per core, on any node)
until the driver's gateway and engine are the bottleneck: about (step CPU time) / (gateway time per
call, ~1-2 ms here) concurrent steps, i.e. hundreds of workers for environments of 100+ ms per step
before inference, which `engine.base_urls` replicas then spread.
Last line: `ray_speedup_2_workers=<x>`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ajet import Task, Workflow, WorkflowOutput  # noqa: E402


class CpuEnvironment(Workflow):
    """`turns` steps of (one LLM call, then `step_ms` of CPU work in the environment)."""

    def __init__(self, turns: int = 3, step_ms: float = 150.0) -> None:
        super().__init__()
        self.turns, self.step_ms = turns, step_ms

    async def execute(self, task: Task, tuner) -> WorkflowOutput:
        client = tuner.openai_client()
        messages = [{"role": "user", "content": task.query}]
        digest = b""
        for _ in range(self.turns):
            reply = await client.chat.completions.create(model=tuner.model, messages=messages, max_tokens=8)
            messages += [{"role": "assistant", "content": reply.choices[0].message.content or "."},
                         {"role": "user", "content": "next"}]
            deadline = time.thread_time() + self.step_ms / 1000  # CPU time of this thread, not wall time
            while time.thread_time() < deadline:
                digest = hashlib.sha256(digest + b"x" * 512).digest()
        return WorkflowOutput(answer=digest.hex()[:8], reward=1.0)


async def _rollout(tokenizer, tasks: list[Task], args, workers: int | None) -> dict:
    from ajet.config.schema import AjetConfig
    from ajet.engine.replay import ReplayEngine
    from ajet.rollout.stack import RolloutStack, settings_for

    cfg = AjetConfig(workflow=f"{Path(__file__).resolve()}:CpuEnvironment",
                     workflow_args={"turns": args.turns, "step_ms": args.step_ms},
                     ray={"enabled": workers is not None, "num_workers": workers or 1},
                     rollout={"concurrency": args.tasks, "episode_timeout_s": 600, "retries": 0})
    engine = ReplayEngine([{"text": "ok"}], tokenizer, repeat=True)
    settings = dataclasses.replace(settings_for(cfg, "train"), group_size=1)
    async with RolloutStack(cfg, engine, tokenizer, None) as stack:
        await stack.runner.run(tasks[:2], settings, show_progress=False)  # warm: imports, first connections
        started = time.perf_counter()
        batch = await stack.runner.run(tasks, settings, show_progress=False)
        seconds = time.perf_counter() - started
    failed = sum(1 for e in batch.episodes if not e.ok)
    cpu_s = len(tasks) * args.turns * args.step_ms / 1000
    # effective_cores: the environment's CPU seconds per wall second, what the machine actually gave
    # the steps (on a machine that other jobs load, less than the workers asked for)
    return {"episodes": len(batch.episodes), "failed": failed, "seconds": round(seconds, 2),
            "episodes_per_s": round(len(batch.episodes) / seconds, 3), "effective_cores": round(cpu_s / seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--step-ms", type=float, default=150.0)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each Ray setting, interleaved; the best "
                        "counts (a shared machine's other load only ever slows a run down)")
    args = parser.parse_args()

    import ray
    from transformers import AutoTokenizer

    from ajet.models import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("tiny-random"))
    tasks = [Task(task_id=f"env-{i}", query=f"episode {i}") for i in range(args.tasks)]
    results = {"in_process": asyncio.run(_rollout(tokenizer, tasks, args, None))}
    # One small Ray for both measurements (2 CPUs: this benchmark's 2 workers), no dashboard.
    ray.init(address="local", num_cpus=2, num_gpus=0, include_dashboard=False, object_store_memory=80 << 20,
             logging_level="warning", configure_logging=False)
    try:
        for _ in range(args.repeats):
            for workers in (1, 2):
                run = asyncio.run(_rollout(tokenizer, tasks, args, workers))
                best = results.get(f"ray_{workers}_workers")
                if best is None or run["episodes_per_s"] > best["episodes_per_s"]:
                    results[f"ray_{workers}_workers"] = run
    finally:
        ray.shutdown()
    cpu_s = args.tasks * args.turns * args.step_ms / 1000
    print(json.dumps({"environment_cpu_s": cpu_s, **results}, indent=2))
    if any(r["failed"] for r in results.values()):
        print("some episodes failed", file=sys.stderr)
    speedup = results["ray_2_workers"]["episodes_per_s"] / results["ray_1_workers"]["episodes_per_s"]
    vs_in_process = results["ray_2_workers"]["episodes_per_s"] / results["in_process"]["episodes_per_s"]
    print(f"2 workers vs in-process: {vs_in_process:.2f}x")
    print(f"ray_speedup_2_workers={speedup:.2f}")


if __name__ == "__main__":
    main()
