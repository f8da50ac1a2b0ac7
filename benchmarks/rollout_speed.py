"""Rollout generation speed: ajet's hf engine (prefix KV cache, continuous batching) against plain
`model.generate`, on the tool-agent tutorial's episodes.

The episodes follow the tutorial's demonstrations (tutorial/example_tool_agent/sft.jsonl): its
system prompt and eight tool specs in every prompt, 2-3 LLM calls per episode, rendered by the
gateway's renderer. `--tasks` demonstrations x `--group` episodes each (a GRPO group: identical first
prompts), all running at once.

- ajet: every episode runs as a coroutine that sends its next call when the previous one returns,
  as the rollout does; sampling at temperature 1 with a seed per episode; `max_tokens` = the
  demonstration's reply length. The next prompt is the previous prompt + the reply the engine
  sampled (closed with EOS when cut) + the demonstration's tool result and next turn header: what
  the gateway sends, which splices generated turns in token for token. Also run with the cache
  off and, on a CPU, with the weights not laid out for oneDNN (`engine.pack_weights: off`), for reference.
- model.generate: the very prompts ajet was sent, one left-padded batch per turn (all episodes'
  k-th calls), the same sampling, `max_new_tokens` = `min_new_tokens` = the longest reply ajet
  produced for that turn (generate computes every row of a batch until the last one ends, so this
  is its cost for the same lengths).

Both run at the precision `model.autocast` gives on this machine (`--autocast`), on `--device` (auto: the
GPU when torch sees one, in the weights dtype training would use there, bf16 on a recent GPU).

    python benchmarks/rollout_speed.py [--model smollm2-135m-instruct] [--tasks 4] [--group 4] [--device auto]
Last line: `ajet_over_hf_generate=<seconds of model.generate / seconds of ajet>`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ajet.engine.base import SamplingParams
from ajet.engine.hf import HFEngine
from ajet.models import resolve_autocast, resolve_device, resolve_dtype, resolve_model_path
from ajet.render import ChatRenderer

DATA = Path(__file__).resolve().parent.parent / "tutorial" / "example_tool_agent" / "sft.jsonl"


def episodes(renderer: ChatRenderer, tasks: int) -> list[tuple[list[int], list[int], list[list[int]]]]:
    """Per demonstration: its first prompt, its replies' lengths, and the tokens between one reply and the
    next call (the tool result and the next turn header), rendered as the gateway renders them."""
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if sum(m["role"] == "assistant" for m in r["messages"]) >= 2][:tasks]
    out = []
    for row in rows:
        segments = renderer.encode_conversation(row["messages"], row["tools"]).segments
        first = [t for seg in segments[:next(i for i, s in enumerate(segments) if s.author == "llm")]
                 for t in seg.token_ids]
        replies, between, gap = [], [], None
        for segment in segments:
            if segment.author == "llm":
                if gap is not None:
                    between.append(gap)
                replies.append(len(segment.token_ids))
                gap = []
            elif gap is not None:
                gap += segment.token_ids
        out.append((first, replies, between))
    return out


async def run_ajet(engine: HFEngine, work, group: int, eos: int) -> list[list[tuple[list[int], int]]]:
    """Run every episode concurrently; return each episode's calls as (prompt, reply length)."""
    async def episode(first: list[int], replies: list[int], between: list[list[int]], seed: int):
        prompt, calls = first, []
        for turn, length in enumerate(replies):
            gen = await engine.generate(prompt, SamplingParams(max_tokens=length, temperature=1.0, seed=seed))
            calls.append((prompt, len(gen.token_ids)))
            if turn < len(between):
                reply = gen.token_ids if gen.token_ids[-1:] == [eos] else gen.token_ids + [eos]
                prompt = prompt + reply + between[turn]
        return calls

    jobs = [episode(*demo, seed=1000 * t + m) for t, demo in enumerate(work) for m in range(group)]
    return list(await asyncio.gather(*jobs))


def run_generate(model, tokenizer, calls: list[list[tuple[list[int], int]]], autocast, device) -> int:
    """Turn by turn, one batch of every episode's k-th call; return the tokens generated."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    generated = 0
    for turn in range(max(len(c) for c in calls)):
        rows = [c[turn] for c in calls if turn < len(c)]
        longest = max(len(p) for p, _ in rows)
        ids = torch.full((len(rows), longest), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, (prompt, _) in enumerate(rows):
            ids[i, longest - len(prompt):] = torch.tensor(prompt)
            mask[i, longest - len(prompt):] = 1
        new = max(n for _, n in rows)
        with torch.inference_mode(), autocast:
            out = model.generate(ids.to(device), attention_mask=mask.to(device), do_sample=True, temperature=1.0,
                                 top_p=1.0, top_k=0, max_new_tokens=new, min_new_tokens=new, pad_token_id=pad)
        generated += (out.shape[1] - longest) * len(rows)
    return generated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--tasks", type=int, default=4, help="demonstrations (tasks) to run")
    parser.add_argument("--group", type=int, default=4, help="episodes per task (GRPO group)")
    parser.add_argument("--autocast", choices=["auto", "off", "bfloat16"], default="auto",
                        help="model.autocast for both sides (auto: what training would use here)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: the GPU when torch sees one (model.device)")
    args = parser.parse_args()
    device = resolve_device(args.device)
    weights = resolve_dtype("auto", device)

    path = resolve_model_path(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=weights).to(device).eval()
    resolved = resolve_autocast(args.autocast, device, weights,
                                sum(p.numel() for p in model.parameters()))
    dtype = torch.bfloat16 if resolved else None
    autocast = torch.autocast(device.type, dtype=dtype) if dtype else nullcontext()
    work = episodes(ChatRenderer(tokenizer), args.tasks)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"model {args.model} · {where} · weights {str(weights).removeprefix('torch.')} "
          f"· autocast {resolved or 'off'}")
    print(f"{len(work)} tasks x {args.group} episodes, {sum(len(r) for _, r, _ in work) * args.group} LLM calls "
          f"(first prompt {len(work[0][0])} tokens)")

    warm = HFEngine(model, tokenizer, prefix_cache_mb=0, autocast_dtype=dtype)
    asyncio.run(warm.generate(work[0][0][:64], SamplingParams(max_tokens=4)))  # first-call costs out of the timing
    with torch.inference_mode(), autocast:
        model.generate(torch.tensor([work[0][0][:64]], device=device), max_new_tokens=4, do_sample=False)

    results = {}
    runs = [("ajet", 1024, "auto"), ("ajet, cache off", 0, "auto")]
    if device.type == "cpu":
        runs.append(("ajet, packing off", 1024, False))  # MKL's matmul instead of weights laid out for oneDNN
    for label, cache_mb, pack in runs:
        engine = HFEngine(model, tokenizer, prefix_cache_mb=cache_mb, autocast_dtype=dtype, pack_weights=pack)
        start = time.perf_counter()
        calls = asyncio.run(run_ajet(engine, work, args.group, tokenizer.eos_token_id))
        seconds = time.perf_counter() - start
        results[label] = (seconds, calls)
        s = engine.stats
        print(f"{label:17s} {seconds:7.1f} s · prefilled {s.prefilled_tokens} of {s.prompt_tokens} prompt tokens "
              f"· {s.generated_tokens} generated · {s.forward_passes} forward passes "
              f"· largest batch {s.largest_batch}")
    ajet_seconds, calls = results["ajet"]
    start = time.perf_counter()
    generated = run_generate(model, tokenizer, calls, autocast, device)
    hf_seconds = time.perf_counter() - start
    prompt_tokens = sum(len(p) for c in calls for p, _ in c)
    print(f"{'model.generate':17s} {hf_seconds:7.1f} s · prefilled {prompt_tokens} prompt tokens · "
          f"{generated} generated (every row to its turn's longest reply)")
    print(f"cache off vs model.generate: {hf_seconds / results['ajet, cache off'][0]:.2f}x")
    print(f"ajet_over_hf_generate={hf_seconds / ajet_seconds:.2f}")


if __name__ == "__main__":
    main()
