"""Each tutorial's before/after on the embedded SmolLM2: `ajet eval` of the base model, the tutorial's
training run, `ajet eval` of the trained checkpoint, all as subprocesses of the installed CLI.

A tutorial takes part when its folder holds `benchmark.json`:

    {"conf": "countdown.yaml",          # the tutorial's YAML, relative to its folder
     "measure": "success_rate",         # its success measure (measures.py): success_rate, reward_parts.NAME,
                                        # workflow_metrics.NAME; never the reward, which may hold format credit
     "also": [...],                     # optional: more measures to print (werewolves: the seer's accuracy)
     "margin": 0.05,                    # trained must beat base by more than this (the README says so)
     "train_overrides": [],             # key=value for the training run (kept small: minutes on 2 cores)
     "eval_overrides": [],              # key=value for both evals
     "rl_gain": {...},                  # what benchmarks/rl_gain.py runs (not read here)
     "variants": {"name": ["key=value", ...]}}   # optional: one row per variant, its overrides on every run

    python benchmarks/tutorials.py                       # every tutorial with a benchmark.json
    python benchmarks/tutorials.py example_countdown ... # only these folders
    python benchmarks/tutorials.py example_frameworks:langgraph   # one variant of a folder
Prints one row per tutorial (base, trained, margin, minutes, the CPU) and, last,
`tutorials_improved=<k>/<n>`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import measures
from quickstart import cpu_flags

REPO = Path(__file__).resolve().parents[1]
TUTORIALS = REPO / "tutorial"


def _eval(conf: Path, out: Path, overrides: list[str], model: Path | None = None) -> dict:
    command = ["ajet", "eval", "--conf", str(conf), f"output_dir={out}", *overrides]
    if model is not None:
        command[2:2] = ["--model", str(model)]
    subprocess.run(command, check=True)
    return json.loads((out / "eval.json").read_text())


def measure(folder: Path, out: Path, variant: str | None = None) -> dict:
    """Base and trained measure of one tutorial (or one of its variants), with the wall minutes of the
    training run."""
    spec = json.loads((folder / "benchmark.json").read_text())
    conf = folder / spec["conf"]
    key = measures.check(spec.get("measure", "success_rate"))
    also = [measures.check(k) for k in spec.get("also", [])]
    extra = list(spec.get("variants", {}).get(variant, [])) if variant else []
    eval_overrides = [*spec.get("eval_overrides", []), *extra]
    base_report = _eval(conf, out / "base", eval_overrides)
    started = time.time()
    subprocess.run(["ajet", "--conf", str(conf), "--backbone=debug", f"output_dir={out / 'train'}",
                    *spec.get("train_overrides", []), *extra], check=True)
    minutes = (time.time() - started) / 60
    trained_report = _eval(conf, out / "trained", eval_overrides, model=out / "train")
    base, trained = measures.from_report(base_report, key) or 0.0, measures.from_report(trained_report, key) or 0.0
    margin = float(spec.get("margin", 0.0))
    name = f"{folder.name}:{variant}" if variant else folder.name
    return {"tutorial": name, "measure": key, "base": base, "trained": trained, "margin": margin,
            "improved": trained > base + margin, "train_minutes": round(minutes, 1),
            "also": {k: [measures.from_report(base_report, k), measures.from_report(trained_report, k)] for k in also}}


def runs(names: list[str]) -> list[tuple[Path, str | None]]:
    """(folder, variant) for each name: `folder` (all its variants, or itself), or `folder:variant`."""
    if not names:
        names = sorted(p.parent.name for p in TUTORIALS.glob("*/benchmark.json"))
    picked = []
    for name in names:
        folder, _, variant = name.partition(":")
        path = TUTORIALS / folder
        if not (path / "benchmark.json").is_file():
            sys.exit(f"no benchmark.json in: {folder}")
        variants = json.loads((path / "benchmark.json").read_text()).get("variants") or {}
        if variant and variant not in variants:
            sys.exit(f"{folder} has no variant {variant!r}; it has: {', '.join(variants) or 'none'}")
        picked += [(path, variant)] if variant else [(path, v) for v in variants] or [(path, None)]
    return picked


def main(names: list[str]) -> None:
    cpu, flags = cpu_flags()
    print(f"cpu: {cpu} ({' '.join(flags) or 'no avx/amx flags'})")
    root = REPO / "runs" / "tutorials_bench" / time.strftime("%Y%m%d-%H%M%S")
    rows = []
    for folder, variant in runs(names):
        row = measure(folder, root / folder.name / (variant or ""), variant)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"{'tutorial':34} {'measure':13} {'base':>6} {'trained':>8} {'margin':>7} {'train min':>9}")
    for r in rows:
        print(f"{r['tutorial']:34} {r['measure']:13} {r['base']:6.3f} {r['trained']:8.3f} {r['margin']:7.2f} "
              f"{r['train_minutes']:9.1f}{'' if r['improved'] else '  (not improved)'}")
        for k, (b, t) in r["also"].items():  # None: no episode reported it (werewolves: the seer never knew a wolf)
            print(f"{'':34}   also {k}: base {'-' if b is None else f'{b:.3f}'}, trained {'-' if t is None else f'{t:.3f}'}")
    print(f"tutorials_improved={sum(r['improved'] for r in rows)}/{len(rows)}")


if __name__ == "__main__":
    main(sys.argv[1:])
