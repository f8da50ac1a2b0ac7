"""SFT step time with LoRA on the last N decoder layers (`model.lora.layers`), with and without the
frozen trunk's cache, against LoRA on every layer (the default), on the tool-agent demonstrations.

Three policies of SmolLM2-135M (the tutorial's LoRA), each taking the same SFT steps of `--batch` rows
(tutorial/example_tool_agent/sft.jsonl, rendered as the trainer renders them), interleaved step by
step so a loaded machine slows all three alike:

- all: LoRA on all 30 layers (the default): forward and backward through every layer;
- last N: LoRA on the last N layers, `trainer.trunk_cache_mb=0`: the backward pass stops at the lowest
  adapted layer, the frozen layers below still run forward at every step;
- last N + cache: the same, and each row's output of the frozen layers is kept after its first visit
  (ajet/trainer/trunk.py): from the second epoch on only the adapted layers run.

Epoch 1 fills the cache; the timed steps are those of epoch 2 (`--steps` batches each epoch, the same
rows in the same order). CPU time is taken with wall time: on a loaded machine use `--threads 1` and
read the CPU figures. What it costs in learning is not measured here (docs/training.md has the val
success of the tutorial trained each way).

    python benchmarks/lora_layers.py [--layers 20] [--steps 3] [--batch 8] [--threads 1] [--autocast auto|off]
Last line: `cached_over_all=<CPU s/step of all / of last N + cache> uncached_over_all=<... / of last N>`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from ajet.config.schema import LoraConfig, ModelConfig, TrainerConfig
from ajet.render import ChatRenderer
from ajet.trainer.optim import build_optimizer
from ajet.trainer.policy import load_policy
from ajet.trainer.sft_data import load_sft_samples
from ajet.trainer.step import train_step

DATA = Path(__file__).resolve().parent.parent / "tutorial" / "example_tool_agent" / "sft.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=20, help="model.lora.layers of the two restricted policies")
    parser.add_argument("--steps", type=int, default=3, help="SFT steps per epoch (two epochs run; the second is timed)")
    parser.add_argument("--batch", type=int, default=8, help="rows per SFT step (the tutorial's sft.batch_size)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--autocast", default="auto", choices=["auto", "off", "bfloat16"],
                        help="model.autocast; off is the float32 path of a CPU without bf16 (AVX2)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    runs = {"all": (None, 0.0), f"last {args.layers}": (args.layers, 0.0),
            f"last {args.layers} + cache": (args.layers, 1024.0)}
    policies, optimizers, configs = {}, {}, {}
    for name, (layers, cache_mb) in runs.items():
        torch.manual_seed(0)
        policies[name] = load_policy(ModelConfig(path="smollm2-135m-instruct", autocast=args.autocast,
                                                 lora=LoraConfig(layers=layers)))
        configs[name] = TrainerConfig(lr=3e-4, micro_batch_tokens=2048, trunk_cache_mb=cache_mb)
        optimizers[name] = build_optimizer(policies[name].trainable_parameters(), configs[name])
    samples, _ = load_sft_samples(DATA, ChatRenderer(policies["all"].tokenizer))
    batches = [samples[i * args.batch:(i + 1) * args.batch] for i in range(args.steps)]
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for epoch in (1, 2):
        for batch in batches:
            for name in runs:
                w, c = time.perf_counter(), time.process_time()
                stats = train_step(policies[name], optimizers[name], None, batch, None, configs[name], algo="sft")
                if epoch == 2:
                    wall[name].append(time.perf_counter() - w)
                    cpu[name].append(time.process_time() - c)
                    print(f"epoch 2 {name:>18}: {wall[name][-1]:6.2f} s wall {cpu[name][-1]:6.2f} CPU-s loss "
                          f"{stats['loss']:.4f}", flush=True)
    base = statistics.mean(cpu["all"])
    trunk = policies[f"last {args.layers} + cache"]._trunk
    print(f"trunk: split at layer {trunk.split}, {len(trunk.rows)} rows kept ({trunk.bytes / 2**20:.0f} MiB), "
          f"{trunk.hits} hits")
    for name in runs:
        print(f"{name:>18}: {statistics.mean(wall[name]):.2f} s wall, {statistics.mean(cpu[name]):.2f} CPU-s a step "
              f"(threads {torch.get_num_threads()}, autocast {args.autocast})")
    cached, uncached = (statistics.mean(cpu[f"last {args.layers}{suffix}"]) for suffix in (" + cache", ""))
    print(f"cached_over_all={base / cached:.2f} uncached_over_all={base / uncached:.2f}")


if __name__ == "__main__":
    main()
