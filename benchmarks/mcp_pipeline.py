"""The no-human-data pipeline end to end, on two MCP servers, scored on hand-written val tasks it never sees.

For each server: `ajet generate explore` → `ajet generate tasks --from-calls` → `ajet generate demos`
→ `ajet generate tasks --seed 1` (the same bank phrased anew, for GRPO) → `ajet --backbone=debug` (SFT
on the built demonstrations, then GRPO on the tasks phrased anew) →
`ajet eval` of the checkpoint at the end of SFT and of the final one, on the server's hand-written
val set (energy: tutorial/example_tool_agent/val.jsonl, 38 tasks; library:
tutorial/example_mcp_pipeline/library/val.jsonl, 40 tasks). Every stage is the installed CLI in a
subprocess, as a user runs it; nothing hand-written reaches the pipeline.

    python benchmarks/mcp_pipeline.py [--servers energy,library] [-n 180] [key=value ...]

Tasks per server: energy 180 (SFT 3 epochs, the YAML's), library 360 with `sft.epochs=2` (180 x 3
was unstable there: 7.5-35% over runs). The key=value overrides go to every pipeline command (e.g.
trainer.steps=2) after the server's own. Last line:
`energy_val_success=<x> second_server_val_success=<y> pipeline_minutes=<m> energy_sft_grpo=<a>
second_server_sft_grpo=<b>`: the first two are the model the tutorial's YAML ships (SFT only: GRPO on
the generated tasks has not reliably raised val success), the last two the same run after GRPO,
so what RL adds is measured every time; minutes: the slower server's generate + train time, GRPO
included. Each server's line before it has all its figures.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "tutorial" / "example_mcp_pipeline" / "pipeline.yaml"
LIBRARY = REPO / "tutorial" / "example_mcp_pipeline" / "library"
SERVERS = {
    # name: (overrides that point the pipeline at the server, the val config that scores it, tasks)
    "energy": ([], REPO / "tutorial" / "example_tool_agent" / "tool_agent.yaml", 180),
    # 180 tasks x 3 epochs left the library model at 7.5-35% over runs; 360 x 2 at 47.5-50% (tutorial README)
    "library": ([f"workflow_args.server={LIBRARY / 'library_server.py'}",
                 # the val config's own system prompt: the agent is trained as it will be evaluated
                 'workflow_args.system_prompt="You are a library assistant. Answer the user\'s question by calling the '
                 'tools; when you have the result, reply with one short sentence that states the number."',
                 "sft.epochs=2"],
                LIBRARY / "library.yaml", 360),
}


def cpu() -> str:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = set(re.findall(r"\b(avx\w*|amx\w*)\b", text))
    return "amx" if "amx_bf16" in flags else "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "other"


def run(args: list[str], log: Path) -> float:
    """Run one CLI command, its output to `log`; its wall seconds. A failure stops the benchmark with the log's tail."""
    started = time.time()
    with log.open("w") as out:
        code = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, cwd=REPO).returncode
    if code:
        sys.exit(f"{' '.join(args[:4])} ... failed ({code}); last lines of {log}:\n" + "".join(log.read_text().splitlines(True)[-20:]))
    return time.time() - started


def rows(path: Path) -> int:
    """Lines of a JSONL file the pipeline wrote (the rich report wraps its JSON line, so count the file)."""
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


def val_success(model: Path, val_yaml: Path, log: Path) -> float:
    """`ajet eval` of `model` on the val config; its success rate (eval.json)."""
    out = log.parent / f"eval-{log.stem}"
    run(["ajet", "eval", "--conf", str(val_yaml), "--model", str(model), f"output_dir={out}"], log)
    return json.loads((out / "eval.json").read_text())["success_rate"]


def sft_checkpoint(run_dir: Path) -> Path:
    """The checkpoint written at the end of the SFT stage (the last one whose manifest says sft)."""
    from ajet.trainer.checkpoint import read_state

    found = None
    for folder in sorted((run_dir / "checkpoints").glob("step-*")):
        if read_state(folder).get("extra", {}).get("stage") == "sft":
            found = folder
    if found is None:
        sys.exit(f"no SFT checkpoint in {run_dir / 'checkpoints'}")
    return found


def pipeline(name: str, n: int | None, overrides: list[str], root: Path) -> dict:
    server_overrides, val_yaml, default_n = SERVERS[name]
    n = n or default_n
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    conf = ["--conf", str(PIPELINE)]
    # the run trains on the demos (SFT) and on rl_tasks.jsonl (GRPO), as the tutorial's YAML does
    common = [*server_overrides, f"task_reader.train={out / 'rl_tasks.jsonl'}", f"sft.data={out / 'sft.jsonl'}",
              f"project=mcp-bench-{name}", *overrides]
    seconds = {
        "explore": run(["ajet", "generate", "explore", *conf, "--out", str(out / "calls.jsonl"), *common],
                       out / "explore.log"),
        "tasks": run(["ajet", "generate", "tasks", *conf, "--from-calls", str(out / "calls.jsonl"), "-n", str(n),
                      "--out", str(out / "tasks.jsonl"), *common], out / "tasks.log"),
        "demos": run(["ajet", "generate", "demos", *conf, "--tasks", str(out / "tasks.jsonl"),
                      "--out", str(out / "sft.jsonl"), *common], out / "demos.log"),
        # GRPO's tasks: the same bank phrased anew (another seed), questions the SFT demos never showed
        "rl_tasks": run(["ajet", "generate", "tasks", *conf, "--from-calls", str(out / "calls.jsonl"), "-n", str(n),
                         "--seed", "1", "--out", str(out / "rl_tasks.jsonl"), *common], out / "rl_tasks.log"),
        # SFT then GRPO, whatever the tutorial's YAML runs: both figures come from this one run
        "train": run(["ajet", *conf, "--backbone=debug", f"output_dir={out / 'run'}", "algorithm=[sft,grpo]", *common],
                     out / "train.log"),
    }
    figures = {"calls": rows(out / "calls.jsonl"), "tasks": rows(out / "tasks.jsonl"), "demos": rows(out / "sft.jsonl"),
               "sft_val_success": val_success(sft_checkpoint(out / "run"), val_yaml, out / "eval_sft.log"),
               "final_val_success": val_success(out / "run", val_yaml, out / "eval_final.log"),
               "minutes": round(sum(seconds.values()) / 60, 1), "seconds": {k: round(v) for k, v in seconds.items()}}
    print(f"{name}: {json.dumps(figures)}", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="energy,library")
    parser.add_argument("-n", type=int, default=None, help="call-first tasks per server, for SFT and again (phrased "
                        "anew) for GRPO (default: energy 180, library 360)")
    args, overrides = parser.parse_known_args()
    root = REPO / "runs" / "mcp_pipeline_bench" / time.strftime("%Y%m%d-%H%M%S")
    print(f"cpu: {cpu()}; output under {root}", flush=True)
    results = {name: pipeline(name, args.n, overrides, root) for name in args.servers.split(",")}
    energy, library = results.get("energy", {}), results.get("library", {})
    minutes = max((r["minutes"] for r in results.values()), default=0)
    print(f"energy_val_success={energy.get('sft_val_success', 'n/a')} "
          f"second_server_val_success={library.get('sft_val_success', 'n/a')} pipeline_minutes={minutes} "
          f"energy_sft_grpo={energy.get('final_val_success', 'n/a')} "
          f"second_server_sft_grpo={library.get('final_val_success', 'n/a')}")


if __name__ == "__main__":
    main()
