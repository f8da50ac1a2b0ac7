"""Peak memory and time of an SFT step against `trainer.micro_batch_tokens`, on the tool-agent tutorial's data.

A training step holds its activations for the backward pass, in proportion to the tokens of one
micro-batch; a smaller budget splits the step into more micro-batches that give the same update
(tests/unit/test_trainer_step.py) and hold less at once. For each budget a fresh process loads
SmolLM2-135M with the tutorial's LoRA, runs one warm-up step and `--steps` timed SFT steps of
`--batch` rows (tutorial/example_tool_agent/sft.jsonl, rendered as the trainer renders them), and
reports its resident memory sampled every 5 ms (the peak over the timed steps) and the mean wall
seconds per step. The peer is the trainer's default budget, 4096, measured in the same run.

    python benchmarks/sft_memory.py [--budgets 4096,2048,1024] [--steps 3] [--autocast auto|off|bfloat16]

Last line: `peak_gb_<budget>=<x> ...` for each budget, then `peak_ratio=<smallest budget's peak over
4096's> time_ratio=<its s/step over 4096's>`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tutorial" / "example_tool_agent" / "sft.jsonl"
DEFAULT_BUDGET = 4096


def resident_gb() -> float:
    """This process's resident set size (Linux /proc)."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 2**20


def one_budget(budget: int, steps: int, batch: int, autocast: str) -> dict[str, float]:
    """Run the steps in this process; its peak resident GB and mean s/step."""
    import torch

    from ajet.config.schema import ModelConfig, TrainerConfig
    from ajet.render import ChatRenderer
    from ajet.trainer.optim import build_optimizer
    from ajet.trainer.policy import load_policy
    from ajet.trainer.sft_data import load_sft_samples
    from ajet.trainer.step import train_step

    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path="smollm2-135m-instruct", autocast=autocast))  # the tutorial's LoRA
    samples, _ = load_sft_samples(DATA, ChatRenderer(policy.tokenizer))
    cfg = TrainerConfig(lr=1e-4, micro_batch_tokens=budget, updates_per_step=1)
    optimizer = build_optimizer(policy.trainable_parameters(), cfg)
    peak, stop = [0.0], threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], resident_gb())
            time.sleep(0.005)

    seconds = []
    for step in range(steps + 1):  # step 0 warms up, unwatched
        if step == 1:
            threading.Thread(target=watch, daemon=True).start()
        rows = [samples[(step * batch + i) % len(samples)] for i in range(batch)]
        started = time.perf_counter()
        stats = train_step(policy, optimizer, None, rows, None, cfg, algo="sft")
        if step:
            seconds.append(time.perf_counter() - started)
    stop.set()
    return {"peak_gb": peak[0], "seconds": statistics.mean(seconds), "micro_batches": stats["micro_batches"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="4096,2048,1024", help="micro_batch_tokens values, comma-separated")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8, help="rows per SFT step (the tutorial's sft.batch_size)")
    parser.add_argument("--autocast", default="auto", choices=["auto", "off", "bfloat16"],
                        help="model.autocast; off is the float32 path of a CPU without bf16 (AVX2)")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # the child process's budget
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_budget(args.one, args.steps, args.batch, args.autocast)))
        return
    budgets = sorted({int(b) for b in args.budgets.split(",")} | {DEFAULT_BUDGET}, reverse=True)
    found: dict[int, dict[str, float]] = {}
    for budget in budgets:  # one process each: a peak is a process's own
        child = subprocess.run([sys.executable, __file__, "--one", str(budget), "--steps", str(args.steps),
                                "--batch", str(args.batch), "--autocast", args.autocast],
                               capture_output=True, text=True, check=True)
        found[budget] = json.loads(child.stdout.strip().splitlines()[-1])
        r = found[budget]
        print(f"micro_batch_tokens {budget:>5}: peak {r['peak_gb']:.2f} GB, {r['seconds']:.1f} s/step, "
              f"{r['micro_batches']:.0f} micro-batches a step", flush=True)
    smallest, base = found[budgets[-1]], found[DEFAULT_BUDGET]
    print(" ".join(f"peak_gb_{b}={found[b]['peak_gb']:.2f}" for b in budgets)
          + f" peak_ratio={smallest['peak_gb'] / base['peak_gb']:.2f} time_ratio={smallest['seconds'] / base['seconds']:.2f}")


if __name__ == "__main__":
    main()
