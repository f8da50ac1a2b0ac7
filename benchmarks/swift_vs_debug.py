"""Seconds for the same GRPO run on the swift backbone and on the debug backbone, in one process.

Both train the tool-agent tutorial's config (its workflow, judge and tasks) with the same overrides:
`--steps` GRPO steps of `--tasks` tasks x `--group` episodes, `--max-tokens` per LLM call, on the
same model (`--model`, default the tiny test model; `smollm2-135m-instruct` for the real one), LoRA,
CPU. The debug backbone runs in this process; the swift backbone runs ms-swift in its managed
environment (built first if missing; the build is not timed).

What is compared, per backbone:
  setup: everything that is not a training step (debug: loading the model, starting the gateway;
         swift: compiling the config, swift's own argument and dataset check, starting swift's
         process, loading the model, writing the final checkpoint),
  step k: one RL step, rollout + judge + update (debug: between consecutive metrics.jsonl rows, the
          first from the end of setup; swift: swift's own `step_time` of the step).

The last line is `swift_over_debug_time=<total swift / total debug>` followed by the per-step and
setup breakdown. Numbers on a shared machine are noisy: compare runs taken on an idle one.

    python benchmarks/swift_vs_debug.py [--model tiny-random] [--steps 2] [--tasks 2] [--group 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from ajet.backbone.debug.run import DebugRun
from ajet.backbone.registry import run_backbone
from ajet.backbone.swift.env import swift_python
from ajet.config.loader import load_config

TUTORIAL = Path(__file__).resolve().parents[1] / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


def _config(backbone: str, out: Path, args: argparse.Namespace):
    overrides = [f"output_dir={out}", f"model.path={args.model}", "model.device=cpu", "algorithm=grpo",
                 f"trainer.steps={args.steps}", f"rollout.batch_tasks={args.tasks}", f"rollout.group_size={args.group}",
                 f"rollout.max_tokens_per_turn={args.max_tokens}", "trainer.save_every=0"]
    return load_config(TUTORIAL, overrides, backbone=backbone)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def time_debug(args: argparse.Namespace, out: Path) -> tuple[float, float, list[float]]:
    started = time.time()
    run = DebugRun(_config("debug", out, args))
    ready = time.time()
    run.run()
    total = time.time() - started
    times = [ready] + [r["time"] for r in _rows(out / "metrics.jsonl")]
    steps = [b - a for a, b in zip(times, times[1:])]
    return total, total - sum(steps), steps


def time_swift(args: argparse.Namespace, out: Path) -> tuple[float, float, list[float]]:
    started = time.time()
    run_backbone(_config("swift", out, args))
    total = time.time() - started
    steps = [r.get("swift/step_time", r.get("seconds_per_update", 0.0)) for r in _rows(out / "metrics.jsonl")]
    return total, total - sum(steps), steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-random")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--group", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    swift_python()  # build the environment first: not part of the timing
    with tempfile.TemporaryDirectory(prefix="ajet-swift-bench-") as tmp:
        debug = time_debug(args, Path(tmp) / "debug")
        swift = time_swift(args, Path(tmp) / "swift")
    for name, (total, setup, steps) in (("debug", debug), ("swift", swift)):
        print(f"{name}: {total:.1f} s total = setup {setup:.1f} s + steps " + ", ".join(f"{s:.1f}" for s in steps))
    steps = "; ".join(f"step {k + 1}: swift {s:.1f} s vs debug {d:.1f} s" for k, (s, d) in enumerate(zip(swift[2], debug[2])))
    print(f"swift_over_debug_time={swift[0] / debug[0]:.2f} ({steps}; setup: swift {swift[1]:.1f} s vs debug "
          f"{debug[1]:.1f} s; {args.model}, {args.tasks} tasks x {args.group} episodes per step)")


if __name__ == "__main__":
    main()
