"""SFT step time on agent data: the shared system prompt + tools run once per micro-batch, against
running every row whole.

The data is the tool-agent tutorial's demonstrations (tutorial/example_tool_agent/sft.jsonl: eight
tool signatures and a system prompt, ~449 tokens every row shares, ~620 tokens a row, ~70 trained),
rendered as the trainer renders them; the model and LoRA are the tutorial's (SmolLM2-135M, LoRA
rank 16, the default, on all linear layers) and `micro_batch_tokens` is the trainer's default, 4,096
(the tutorial sets 1,024 for memory: docs/training.md, "Memory"). Three ways to run the same SFT steps, one
`train_step(algo="sft")` of `--batch` rows each, interleaved step by step so a loaded machine
slows all three alike:

- plain: micro-batches packed by rows × longest row, every row run whole (no prefix sharing);
- shared: the same micro-batches, the prefix all rows share run once (`token_logprobs`);
- shared+packing: micro-batches packed counting the shared prefix once (`pack_micro_batches`),
  so all rows of a step fit one micro-batch and the prefix runs once per step (the default, which
  also runs it once per step when a smaller budget splits the step: `PrefixPass`).

The three give the same loss and gradients (tests/unit/test_sft_prefix.py); only time differs.

Each step's wall time and the process's CPU time are both taken: on a machine other jobs load, run
with `--threads 1` and read the CPU-time ratio, which the load barely moves.

It also counts the FLOPs the default mode really computes (the shared prefix once, every row's own
tokens, causal attention pairs, the head on trained positions only; backward as input gradients for
frozen base weights, plus weight gradients for trained ones) and measures the machine's matmul peak
in the same run: a GEMM of the model's own shape, in the dtype the forward passes run in (bf16 under
autocast, else float32), on the same threads. Achieved over peak is taken on CPU time, which a
loaded machine barely moves.

    python benchmarks/sft_step.py [--steps 4] [--batch 8] [--threads N] [--model smollm2-135m-instruct]
Last two lines: `prefix_shared_over_plain=<wall s/step of plain / of the default> cpu=<the same in CPU s>`,
then `sft_flops_share_of_peak=<x> achieved_gflops=<a> peak_gflops=<p> dtype=<float32|bfloat16|...>`.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from pathlib import Path

import torch

import ajet.trainer.step as step_module
from ajet.config.schema import ModelConfig, TrainerConfig
from ajet.render import ChatRenderer
from ajet.trainer.batching import pack_micro_batches
from ajet.trainer.logprobs import MIN_SHARED_PREFIX, shared_prefix_length, token_logprobs
from ajet.trainer.optim import build_optimizer
from ajet.trainer.policy import load_policy
from ajet.trainer.sft_data import load_sft_samples

DATA = Path(__file__).resolve().parent.parent / "tutorial" / "example_tool_agent" / "sft.jsonl"
MODES = {  # (shared_prefix counted once in packing, min_shared_prefix in token_logprobs, prefix once per step)
    "plain": (0, 0, False),
    "shared": (0, 64, False),
    "shared+packing": (64, 64, True),
}


def run_step(policy, optimizer, batch, cfg: TrainerConfig, mode: str) -> tuple[float, float, dict]:
    pack_prefix, run_prefix, once_per_step = MODES[mode]
    saved = step_module.pack_micro_batches, step_module.token_logprobs, step_module._prefix_pass
    step_module.pack_micro_batches = functools.partial(pack_micro_batches, shared_prefix=pack_prefix)
    step_module.token_logprobs = functools.partial(token_logprobs, min_shared_prefix=run_prefix)
    if not once_per_step:
        step_module._prefix_pass = lambda *args: None
    try:
        start, cpu = time.perf_counter(), time.process_time()
        stats = step_module.train_step(policy, optimizer, None, batch, None, cfg, algo="sft")
        return time.perf_counter() - start, time.process_time() - cpu, stats
    finally:
        step_module.pack_micro_batches, step_module.token_logprobs, step_module._prefix_pass = saved


def step_flops(model: torch.nn.Module, batch: list, cfg: TrainerConfig, pad_id: int) -> float:
    """FLOPs of one SFT step as the default mode computes it (see the module docstring)."""
    lm_config = model.config if hasattr(model, "config") else model.base_model.config
    layers, heads = lm_config.num_hidden_layers, lm_config.num_attention_heads
    head_dim = getattr(lm_config, "head_dim", None) or lm_config.hidden_size // heads
    linear = frozen = lora = 0
    for name, p in model.named_parameters():
        if ".layers." not in name or p.ndim != 2:
            continue
        if "lora_" in name:
            lora += p.numel()
        else:
            linear += p.numel()
            frozen += 0 if p.requires_grad else p.numel()
    head_params = lm_config.hidden_size * lm_config.vocab_size
    total = 0.0
    for mb in pack_micro_batches(batch, cfg.micro_batch_tokens, pad_token_id=pad_id).micro_batches:
        shared = shared_prefix_length(mb.input_ids, mb.attention_mask)
        shared = shared if shared >= MIN_SHARED_PREFIX else 0
        tokens = shared + sum(n - shared for n in mb.lengths)
        pairs = shared * (shared + 1) / 2 + sum((n * (n + 1) - shared * (shared + 1)) / 2 for n in mb.lengths)
        trained = float(mb.loss_mask.sum())
        attention = 4 * layers * heads * head_dim * pairs  # QK^T and PV, forward
        forward = 2 * linear * tokens + attention + 2 * head_params * trained
        backward = 2 * linear * tokens + 2 * (linear - frozen) * tokens + 2 * attention + 2 * head_params * trained
        total += forward + backward + 6 * lora * tokens
    return total


def matmul_peak_gflops(rows: int, hidden: int, inner: int, dtype: torch.dtype, seconds: float = 3.0) -> float:
    """CPU-time GFLOP/s of a (rows x hidden) @ (hidden x inner) GEMM: this machine's peak for the model's shape."""
    a, b = torch.randn(rows, hidden, dtype=dtype), torch.randn(hidden, inner, dtype=dtype)
    for _ in range(3):
        a @ b
    reps, start = 0, time.process_time()
    while time.process_time() - start < seconds:
        a @ b
        reps += 1
    return 2 * rows * hidden * inner * reps / (time.process_time() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8, help="rows per SFT step (the tutorial's sft.batch_size)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--autocast", default="auto", choices=["auto", "off", "bfloat16"],
                        help="model.autocast; off is the float32 path of a CPU without bf16 (AVX2)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path=args.model, autocast=args.autocast))
    samples, _ = load_sft_samples(DATA, ChatRenderer(policy.tokenizer))
    cfg = TrainerConfig(lr=1e-12, micro_batch_tokens=4096, updates_per_step=1)  # ~no drift between modes
    optimizer = build_optimizer(policy.trainable_parameters(), cfg)
    print(f"{len(samples)} SFT rows, {statistics.mean(len(s.input_ids) for s in samples):.0f} tokens each on average; "
          f"autocast {policy.autocast_dtype}")
    seconds: dict[str, list[float]] = {m: [] for m in MODES}
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    for step in range(args.steps + 1):  # step 0 warms up
        batch = [samples[(step * args.batch + i) % len(samples)] for i in range(args.batch)]
        for mode in MODES:
            elapsed, used, stats = run_step(policy, optimizer, batch, cfg, mode)
            if step:
                seconds[mode].append(elapsed)
                cpu[mode].append(used)
            if step == 1:
                print(f"  {mode:<15} micro-batches {stats['micro_batches']:.0f}, input tokens {stats['input_tokens']:.0f}, "
                      f"loss {stats['loss']:.5f}")
    for mode, values in seconds.items():
        print(f"{mode:<15} {statistics.median(values):6.2f} s/step wall, {statistics.median(cpu[mode]):6.2f} s/step CPU "
              f"(median of {len(values)})")
    ratio = statistics.median(seconds["plain"]) / statistics.median(seconds["shared+packing"])
    cpu_ratio = statistics.median(cpu["plain"]) / statistics.median(cpu["shared+packing"])
    print(f"prefix_shared_over_plain={ratio:.2f} cpu={cpu_ratio:.2f}")
    pad_id = policy.tokenizer.pad_token_id or 0
    flops = statistics.median(step_flops(policy.model, [samples[(s * args.batch + i) % len(samples)] for i in range(args.batch)],
                                         cfg, pad_id) for s in range(1, args.steps + 1))
    dtype = policy.autocast_dtype or policy.dtype  # what the step's matmuls ran in: autocast's, else the weights'
    lm_config = policy.model.config
    peak = matmul_peak_gflops(2048, lm_config.hidden_size, lm_config.intermediate_size, dtype)
    achieved = flops / statistics.median(cpu["shared+packing"]) / 1e9
    print(f"{flops / 1e12:.2f} TFLOP per step; achieved {achieved:.1f} GFLOP/s per thread (CPU time), "
          f"peak {peak:.1f} GFLOP/s per thread ({dtype})")
    print(f"sft_flops_share_of_peak={achieved / peak:.2f} achieved_gflops={achieved:.1f} peak_gflops={peak:.1f} "
          f"dtype={str(dtype).removeprefix('torch.')}")


if __name__ == "__main__":
    main()
