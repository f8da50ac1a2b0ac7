"""Rollout decode speed of a LoRA policy in the hf engine: peft's own layers against the split and folded
stand-ins (`ajet/engine/precision.py`), at the precision training uses on this machine.

The policy is SmolLM2-135M with the trainer's LoRA (rank 16, alpha 32, every linear layer but the head),
its B matrices drawn small and non-zero (a fresh adapter's B is zero and would hide what the adapter
costs). `--rows` countdown puzzles (tutorial/example_countdown/heldout.jsonl, chat-templated) are
decoded together for up to `--tokens` tokens each, sampled at temperature 1 with one seed per row, three
ways, interleaved round by round so a loaded machine slows all alike:

- peft: `engine.fold_lora: off`: each adapted layer runs peft's forward (the base product, then
  `B(A(x)) * scale` and an add, with peft's per-call Python and autocast's weight casts);
- split: what `fold_lora: auto` does when it does not fold (bf16 passes): the same products from
  weights laid out for oneDNN, in one small module per layer; the same tokens and logprobs as peft;
- folded: `fold_lora: on`: `W + scale * B @ A` in one product; in bf16 the sum rounds the LoRA delta,
  so tokens and logprobs drift from peft's (reported as the largest logprob difference).

    python benchmarks/lora_decode.py [--rows 16] [--tokens 128] [--rounds 3] [--autocast auto|off|bfloat16]
Last line: `split_over_peft=<tok/s of split / of peft> folded_over_peft=<...> split_same_as_peft=<True|False>`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from ajet.engine.base import Generation, SamplingParams
from ajet.engine.hf import HFEngine
from ajet.models import cpu_has_fast_bf16, resolve_model_path

PUZZLES = Path(__file__).resolve().parent.parent / "tutorial" / "example_countdown" / "heldout.jsonl"
WAYS = {"peft": False, "split": "auto", "folded": True}


def policy(model_name: str) -> tuple[torch.nn.Module, object]:
    path = resolve_model_path(model_name)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.01)
    return model, AutoTokenizer.from_pretrained(path)


async def decode(engine: HFEngine, prompts: list[list[int]], tokens: int) -> tuple[float, list[Generation]]:
    await engine.generate(prompts[0], SamplingParams(max_tokens=2))  # lays the weights out: not timed
    start = time.perf_counter()
    outs = await asyncio.gather(*(engine.generate(p, SamplingParams(max_tokens=tokens, temperature=1.0, seed=i))
                                  for i, p in enumerate(prompts)))
    seconds = time.perf_counter() - start
    await engine.close()
    return sum(len(o.token_ids) for o in outs) / seconds, outs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--rows", type=int, default=16, help="requests decoded together (engine.max_batch_size 16)")
    parser.add_argument("--tokens", type=int, default=128, help="most tokens per request")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--autocast", default="auto", choices=["auto", "off", "bfloat16"],
                        help="auto: bfloat16 where the CPU has fast bf16 (AMX), as model.autocast does; off: float32")
    args = parser.parse_args()
    dtype = {"off": None, "bfloat16": torch.bfloat16}.get(args.autocast, torch.bfloat16 if cpu_has_fast_bf16() else None)
    model, tokenizer = policy(args.model)
    rows = [json.loads(line) for line in PUZZLES.read_text().splitlines()][:args.rows]
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": r["query"]}], add_generation_prompt=True,
                                             tokenize=True, return_dict=False) for r in rows]
    speeds: dict[str, list[float]] = {way: [] for way in WAYS}
    outputs: dict[str, list[Generation]] = {}
    for _ in range(args.rounds):
        for way, fold in WAYS.items():
            engine = HFEngine(model, tokenizer, autocast_dtype=dtype, fold_lora=fold, prefix_cache_mb=0)
            tok_s, outputs[way] = asyncio.run(decode(engine, prompts, args.tokens))
            speeds[way].append(tok_s)
    print(f"{args.model}, LoRA r16 on every linear layer; {args.rows} rows x up to {args.tokens} tokens; "
          f"passes in {dtype or torch.float32}; torch threads {torch.get_num_threads()}")
    for way, values in speeds.items():
        print(f"{way:7} tok/s {statistics.median(values):7.1f}  (rounds: {', '.join(f'{v:.1f}' for v in values)})")

    def same_as_peft(way: str) -> bool:
        rows = [(x, y) for x, y in zip(outputs[way], outputs["peft"]) if x.token_ids == y.token_ids]
        gap = max((abs(a - b) for x, y in rows for a, b in zip(x.logprobs, y.logprobs)), default=0.0)
        print(f"{way:7} rows with peft's tokens {len(rows)}/{len(prompts)}; largest logprob difference on them {gap:.2e}")
        return len(rows) == len(prompts) and gap == 0.0

    split_same = same_as_peft("split")
    same_as_peft("folded")
    peft = statistics.median(speeds["peft"])
    print(f"split_over_peft={statistics.median(speeds['split']) / peft:.2f} "
          f"folded_over_peft={statistics.median(speeds['folded']) / peft:.2f} split_same_as_peft={split_same}")


if __name__ == "__main__":
    main()
