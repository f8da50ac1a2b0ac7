"""SFT on a hybrid coreset of half the tool-agent demonstrations vs SFT on all of them (seed 002's coreset).

Trains the embedded SmolLM2 twice with the tool-agent tutorial's SFT settings (`algorithm=sft`, same
epochs and batch size): once on all 74 demonstrations, once on `sft.coreset: {strategy: hybrid,
target_size: 37}` (half by the base model's loss, half by diversity around those). Each is then
evaluated with `ajet eval --model <run>` on the 38 val tasks it never saw. Both as subprocesses of the
installed CLI, as a user runs them. Extra arguments are config overrides for both training runs.

    python benchmarks/coreset.py [--strategy hybrid] [--size 37] [key=value ...]
Last line: `coreset_val_success=<x> full_val_success=<y> time_ratio=<coreset seconds / full seconds>`
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
YAML = REPO / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


def train_and_eval(out: Path, overrides: list[str]) -> tuple[float, float]:
    """(training seconds, val success) of one SFT run and its evaluation."""
    started = time.time()
    subprocess.run(["ajet", "--conf", str(YAML), "--backbone=debug", "algorithm=sft", f"output_dir={out / 'train'}",
                    *overrides], check=True)
    seconds = time.time() - started
    subprocess.run(["ajet", "eval", "--conf", str(YAML), "--model", str(out / "train"), f"output_dir={out / 'eval'}"],
                   check=True)
    report = json.loads((out / "eval" / "eval.json").read_text())
    return seconds, report["success_rate"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategy", default="hybrid", choices=["loss_topk", "diversity", "hybrid", "random"])
    parser.add_argument("--size", type=int, default=37, help="coreset target size (default: half of 74)")
    args, overrides = parser.parse_known_args()
    root = REPO / "runs" / "coreset_bench" / time.strftime("%Y%m%d-%H%M%S")
    full_s, full_success = train_and_eval(root / "full", overrides)
    core_s, core_success = train_and_eval(root / "coreset", [f"+sft.coreset.strategy={args.strategy}",
                                                             f"+sft.coreset.target_size={args.size}", *overrides])
    print(f"full: {full_s / 60:.1f} min, val success {full_success:.3f}")
    print(f"coreset ({args.strategy}, {args.size}): {core_s / 60:.1f} min, val success {core_success:.3f}")
    print(f"coreset_val_success={core_success:.3f} full_val_success={full_success:.3f} "
          f"time_ratio={core_s / full_s:.2f}")


if __name__ == "__main__":
    main()
