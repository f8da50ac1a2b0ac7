"""SmolLM2-135M learns the tool agent on CPU: val success before and after SFT then GRPO.

Runs the quickstart's own config (tutorial/example_tool_agent/tool_agent.yaml) through the public
API: `ajet eval` on the val split with the base model, `ajet --backbone=debug` with
`algorithm: [sft, grpo]`, then `ajet eval` on the newest checkpoint. Extra arguments are config
overrides, e.g. `trainer.steps=4 eval.limit=20`.

    python benchmarks/learning_curve.py [key=value ...]
Last line: `val_success_before=<x> after=<y>` (fractions of val tasks solved: calls and answer right).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ajet.backbone.registry import run_backbone as run
from ajet.config.loader import load_config
from ajet.eval.run import run_eval

YAML = Path(__file__).resolve().parents[1] / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


def main(overrides: list[str]) -> None:
    out = Path("runs/learning_curve") / time.strftime("%Y%m%d-%H%M%S")
    started = time.perf_counter()
    before = run_eval(load_config(YAML, [*overrides, f"output_dir={out / 'before'}"]))
    t_before = time.perf_counter() - started
    train_started = time.perf_counter()
    run(load_config(YAML, [*overrides, f"output_dir={out / 'train'}"]))
    t_train = time.perf_counter() - train_started
    after = run_eval(load_config(YAML, [*overrides, f"output_dir={out / 'after'}"]), model=str(out / "train"))
    total = time.perf_counter() - started
    rows = [json.loads(line) for line in (out / "train" / "metrics.jsonl").read_text().splitlines()]
    sft = [r["loss"] for r in rows if r["stage"] == "sft"]
    grpo = [r["reward_mean"] for r in rows if r["stage"] == "grpo"]
    print(f"run folder: {out}")
    print(f"eval before: {t_before / 60:.1f} min · training: {t_train / 60:.1f} min · total {total / 60:.1f} min")
    if sft:
        print(f"SFT loss {sft[0]:.3f} → {sft[-1]:.3f} over {len(sft)} steps")
    if grpo:
        print(f"GRPO train reward by step: {' '.join(f'{r:.2f}' for r in grpo)}")
    for name, report in (("before", before), ("after", after)):
        print(f"{name}: success {report['success_rate']:.1%} · reward {report['reward_mean']:.3f} · "
              f"tool calls parsed {report['tool_calls_parsed']} · parse failures {report['tool_call_parse_failures']} "
              f"· parts {json.dumps({k: round(v, 3) for k, v in report['reward_parts'].items()})}")
    print(f"val_success_before={before['success_rate']:.3f} after={after['success_rate']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
