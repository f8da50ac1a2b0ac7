#!/usr/bin/env bash
# Success on the energy tutorial's 38 val tasks, measured the same way (ajet eval, greedy, the
# tool_agent.yaml composite judge) for:
#   (a) base SmolLM2-135M-Instruct
#   (b) cold start: tasks and demonstrations written by SmolLM2 itself (--teacher self), then SFT
#   (c) the hand-made tutorial demonstrations (example_tool_agent/sft.jsonl), then the same SFT
# Run from the repository root on an otherwise idle machine (about 25 minutes on 2 idle CPU cores):
#   bash tutorial/example_mcp_pipeline/closing_figures.sh [OUT_DIR]
set -euo pipefail
OUT=${1:-runs/closing_figures}
TOOL=tutorial/example_tool_agent/tool_agent.yaml
PIPE=tutorial/example_mcp_pipeline/pipeline.yaml
mkdir -p "$OUT"

ajet eval --conf "$TOOL" output_dir="$OUT/a_base/eval"

ajet generate tasks --conf "$PIPE" -n 60 --out "$OUT/b_self/tasks.jsonl" --teacher self
ajet generate demos --conf "$PIPE" --tasks "$OUT/b_self/tasks.jsonl" --out "$OUT/b_self/sft.jsonl" --teacher self \
    generate.demos.attempts=2
ajet --conf "$TOOL" --backbone=debug algorithm=sft sft.data="$(pwd)/$OUT/b_self/sft.jsonl" output_dir="$OUT/b_self/train"
ajet eval --conf "$TOOL" --model "$OUT/b_self/train" output_dir="$OUT/b_self/eval"

ajet --conf "$TOOL" --backbone=debug algorithm=sft output_dir="$OUT/c_handmade/train"
ajet eval --conf "$TOOL" --model "$OUT/c_handmade/train" output_dir="$OUT/c_handmade/eval"

python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in ("a_base", "b_self", "c_handmade"):
    report = json.loads((out / name / "eval" / "eval.json").read_text())
    print(f"{name:11s} success {report['success_rate']:.1%}  reward {report['reward_mean']:.3f}  "
          f"tool calls parsed {report['tool_calls_parsed']}  failed episodes {report['failed']}")
PY
