"""The same SFT run on the llamafactory and the debug backbone, measured in one process.

Config: the tool-agent tutorial's demonstrations (tutorial/example_tool_agent/sft.jsonl), LoRA
(rank 16, all linear layers), 8 conversations per optimizer update, lr 3e-4, `--steps` updates, on
this machine's device. The debug backbone trains in this process; the llamafactory backbone converts
the data and runs `llamafactory-cli train` in its managed environment (built before timing starts,
and its build time is not counted).

Per backbone: wall time of the whole run (what a user waits for), the sum of its step times, and
the rest ("startup": loading the model and data, for llamafactory also the conversion, the argument
check by LLaMA-Factory's parser and the subprocess start). Step times are each backbone's own
`time_s` in metrics.jsonl.

    python benchmarks/llamafactory_vs_debug.py [--steps 3] [--model smollm2-135m-instruct]
Last line: `llamafactory_over_debug_time=<ratio of wall times> ...per-step breakdown...`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from ajet.backbone.envs import ensure_env
from ajet.backbone.llamafactory.env import SPEC
from ajet.backbone.registry import run_backbone
from ajet.config.loader import load_config

ROOT = Path(__file__).resolve().parents[1]
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
ROWS = 74  # demonstrations in sft.jsonl
BATCH = 8


def measure(backbone: str, steps: int, model: str, out: Path) -> dict[str, float]:
    overrides = [f"model.path={model}", "algorithm=sft", f"sft.batch_size={BATCH}", "sft.lr=3e-4",
                 f"output_dir={out / backbone}", "trainer.save_every=0"]
    if backbone == "debug":
        overrides.append(f"sft.epochs={(steps * BATCH - 1) / ROWS}")  # exactly `steps` updates
    else:
        overrides.append(f"+backbone.llamafactory.args.max_steps={steps}")
    cfg = load_config(TOOL_YAML, overrides, backbone=backbone)
    started = time.perf_counter()
    run_backbone(cfg)
    wall = time.perf_counter() - started
    rows = [json.loads(line) for line in (out / backbone / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == steps, f"{backbone} ran {len(rows)} steps, expected {steps}"
    step_times = [float(r["time_s"]) for r in rows]
    return {"wall_s": wall, "steps_s": sum(step_times), "startup_s": wall - sum(step_times),
            "step_median_s": statistics.median(step_times), "last_loss": float(rows[-1]["loss"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="optimizer updates per backbone (default: %(default)s)")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model (default: %(default)s)")
    args = parser.parse_args()
    ensure_env(SPEC)  # built once, outside the timing
    with tempfile.TemporaryDirectory(prefix="ajet-lf-bench-") as tmp:
        debug = measure("debug", args.steps, args.model, Path(tmp))
        lf = measure("llamafactory", args.steps, args.model, Path(tmp))
    print(f"{'':14}{'wall s':>9}{'steps s':>9}{'startup s':>11}{'median step s':>15}{'last loss':>11}")
    for name, m in (("debug", debug), ("llamafactory", lf)):
        print(f"{name:14}{m['wall_s']:9.1f}{m['steps_s']:9.1f}{m['startup_s']:11.1f}{m['step_median_s']:15.2f}"
              f"{m['last_loss']:11.4f}")
    print(f"llamafactory_over_debug_time={lf['wall_s'] / debug['wall_s']:.2f} "
          f"step_ratio={lf['step_median_s'] / debug['step_median_s']:.2f} "
          f"debug_step_s={debug['step_median_s']:.2f} llamafactory_step_s={lf['step_median_s']:.2f} "
          f"debug_startup_s={debug['startup_s']:.1f} llamafactory_startup_s={lf['startup_s']:.1f} "
          f"steps={args.steps} model={args.model}")


if __name__ == "__main__":
    main()
