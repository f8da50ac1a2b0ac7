"""Seconds per single-turn GRPO step: ajet's debug trainer against TRL's `GRPOTrainer`, same work.

One RL step = sample `group_size` completions for each of `prompts` arithmetic questions with the
current weights, score them with one cheap reward (the same function for both), compute
group-normalised advantages, and make one optimizer update with the clipped-ratio loss (token-mean,
no KL). Both sides use the same model, chat template, LoRA (rank 16, alpha 32, all-linear, no
dropout), AdamW at lr 1e-5 (constant), grad clip 1.0, temperature 1 / top-p 1, float32 weights on the
CPU, the same precision (`--precision fp32`, the default, turns off the bf16 autocast that ajet's
`model.autocast: auto` would pick on a bf16-capable CPU, because TRL is told bf16=False) and the same
torch thread count.

  ajet: the real pieces of the debug backbone - `load_policy` (peft LoRA), `HFEngine` sharing that
        model object (all completions requested concurrently with asyncio.gather and batched by the
        engine), `ChatRenderer` for the prompt ids, `Sample`s with the engine's logprobs as old
        logprobs, `group_advantages`, `train_step(..., algo='grpo')` with `micro_batch_tokens` set to
        `--micro-batch` rows of the longest possible length.
  TRL:  `GRPOTrainer(model=path, peft_config=LoraConfig(...), args=GRPOConfig(...))` with
        per_device_train_batch_size = `--micro-batch` rows and gradient_accumulation_steps =
        prompts x group_size / micro-batch: one generation round of all completions feeds exactly one
        optimizer step (steps_per_generation = gradient_accumulation_steps, so TRL skips its
        old-logprob pass, as ajet does); loss_type='dapo' (token mean over the whole batch, ajet's
        loss_agg='token'); gradient checkpointing off; bf16 = (`--precision bf16`). TRL's own defaults
        (gradient checkpointing and bf16 on) are overridden so both do the same work.
  Micro-batches bound memory on this shared machine: with all 32 rows in one micro-batch the
  process grew past 11 GB under TRL and was OOM-killed.

Each side runs 1 warm-up step and then `--steps` timed steps; model loading is not timed. The steps
are interleaved (TRL step k, then ajet step k, called from TRL's `on_step_end`), so a load spike on
this shared machine hits both sides alike. TRL's step time runs from the end of ajet's step to TRL's
next `on_step_end` (everything its loop does); its generation share is timed by wrapping
`_generate_and_score_completions` (generation + reward + advantages); the rest is its training.

The machine's matmul peak (2048x2048, fp32 and bf16, best of 10 at the start and at the end) is
measured and each trainer's training throughput is shown as a fraction of it, counting the useful
FLOPs of the step:

    training FLOPs = 4 * P_base * T_in + 6 * P_lora * T_in + 4 * P_head * T_trained
      P_base: the frozen decoder's weights (embeddings excluded): forward (2) + activation grads (2);
      P_lora: the adapters: forward (2) + activation grads (2) + weight grads (2);
      P_head: the output head (tied embeddings), needed at trained positions only;
      T_in:   real input tokens (prompt + completion), T_trained: completion tokens.
    Attention score FLOPs (~4 * layers * T * hidden per token, < 5 % at ~100-token rows) are left out.
    ajet applies the head at trained positions only; TRL's fused head does so only on Triton
    devices, so on a CPU it projects every position (more work than this formula counts).

    OMP_NUM_THREADS=2 python benchmarks/grpo_vs_trl.py [--model tiny-random] [--steps 3] [--precision bf16]
Last line: `ajet_over_trl_speed=<TRL seconds per step / ajet seconds per step>` (> 1: ajet is faster).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

QUESTIONS = [(17, 25), (48, 19), (36, 57), (73, 14), (29, 66), (85, 12), (44, 38), (61, 27)]


def build_prompts(n: int) -> list[tuple[list[dict], str]]:
    """`n` single-turn chat prompts and their answers (the list repeats past 8 with larger numbers)."""
    out = []
    for i in range(n):
        a, b = QUESTIONS[i % len(QUESTIONS)]
        a += 100 * (i // len(QUESTIONS))
        question = f"What is {a} + {b}? Answer with the number only."
        out.append(([{"role": "user", "content": question}], str(a + b)))
    return out


def reward_text(text: str, answer: str) -> float:
    """1 when the answer is among the numbers in the text, minus a small length penalty.

    The length term keeps every group's rewards apart, so no group is skipped for zero variance and
    both trainers update on all samples.
    """
    return float(answer in re.findall(r"-?\d+", text)) - len(text) / 1000


def trl_reward(prompts: list, completions: list, answer: list[str], **_: object) -> list[float]:
    """TRL's signature: conversational completions are lists of messages."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [reward_text(t, a) for t, a in zip(texts, answer)]


@dataclass
class Result:
    """What one trainer did in its timed steps."""

    name: str
    step_s: list[float] = field(default_factory=list)
    gen_s: list[float] = field(default_factory=list)  # generation + reward + advantages
    prompt_tokens: int = 0
    gen_tokens: int = 0
    train_input_tokens: int = 0
    trained_tokens: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def per_step(self) -> float:
        return statistics.mean(self.step_s)

    @property
    def train_s(self) -> float:
        return sum(self.step_s) - sum(self.gen_s)


# ---------------------------------------------------------------------------------------------- ajet
class AjetSide:
    """ajet's debug-trainer pieces, set up once; `step()` runs one RL step."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        from ajet.config.schema import GrpoConfig, LoraConfig, ModelConfig, TrainerConfig
        from ajet.engine.base import SamplingParams
        from ajet.engine.hf import HFEngine
        from ajet.render import ChatRenderer
        from ajet.trainer.optim import build_optimizer, build_scheduler
        from ajet.trainer.policy import load_policy

        self.args = args
        torch.manual_seed(args.seed)
        lora = LoraConfig(rank=16, alpha=32, dropout=0.0, target_modules="all-linear")
        # off: ajet's CPU default would pick bf16. The bf16 mode trains under autocast but keeps the frozen
        # weights float32 (load_policy would keep them in bf16), so that generation stays float32 as TRL's.
        self.policy = load_policy(ModelConfig(path=args.model, dtype="float32", device="cpu", autocast="off",
                                              lora=lora))
        self.policy.autocast_dtype = torch.bfloat16 if args.precision == "bf16" else None
        self.tok = self.policy.tokenizer
        self.engine = HFEngine(self.policy.model, self.tok, max_batch_size=args.prompts * args.group_size,
                               seed=args.seed, fold_lora=args.fold_lora == "auto" and "auto")
        renderer = ChatRenderer(self.tok)
        self.prompts = build_prompts(args.prompts)
        self.prompt_ids = [renderer.encode(messages, None).token_ids for messages, _ in self.prompts]
        # The same rows per forward/backward as TRL's per_device_train_batch_size (no row is longer than this).
        budget = args.micro_batch * (max(len(ids) for ids in self.prompt_ids) + args.max_tokens)
        self.tcfg = TrainerConfig(steps=args.steps + 1, lr=1e-5, grad_clip=1.0, updates_per_step=1,
                                  micro_batch_tokens=max(budget, 64), seed=args.seed)
        self.grpo = GrpoConfig(epsilon=0.2, beta=0.0, scale_rewards=True, loss_agg="token")
        self.optimizer = build_optimizer(self.policy.model.parameters(), self.tcfg)
        self.scheduler = build_scheduler(self.optimizer, self.tcfg)
        self.sampling = SamplingParams(max_tokens=args.max_tokens, temperature=1.0, top_p=1.0)
        self.result = Result("ajet")
        self.steps_done = 0

    def step(self) -> float:
        """One RL step (the first is the warm-up, not recorded); returns its seconds."""
        import asyncio

        start = time.perf_counter()
        asyncio.run(self._step())  # one event loop per step: the engine starts its worker on it
        self.steps_done += 1
        return time.perf_counter() - start

    async def _step(self) -> None:
        import asyncio

        from ajet.algorithm.advantages import group_advantages
        from ajet.samples import Sample
        from ajet.trainer.step import train_step

        engine, args = self.engine, self.args
        start = time.perf_counter()
        requests = [(i, ids) for i, ids in enumerate(self.prompt_ids) for _ in range(args.group_size)]
        async with engine:  # all completions requested at once: the engine batches them
            gens = await asyncio.gather(*(engine.generate(ids, self.sampling) for _, ids in requests))
        samples = []
        for (i, ids), gen in zip(requests, gens):
            text = self.tok.decode(gen.token_ids, skip_special_tokens=True)
            samples.append(Sample(input_ids=ids + gen.token_ids, loss_mask=[0] * len(ids) + [1] * len(gen.token_ids),
                                  old_logprobs=[0.0] * len(ids) + list(gen.logprobs),
                                  reward=reward_text(text, self.prompts[i][1]), group_id=f"q{i}", agent="main"))
        advantages, _ = group_advantages([s.reward for s in samples], [s.group_id for s in samples], scale=True)
        generated = time.perf_counter()
        with engine.lock:  # the engine shares the model: no generation while the weights change
            stats = train_step(self.policy, self.optimizer, self.scheduler, samples, advantages, self.tcfg,
                               algo="grpo", grpo=self.grpo)
        engine.weights_version += 1
        end = time.perf_counter()
        if self.steps_done == 0:
            return  # the warm-up step
        r = self.result
        r.step_s.append(end - start)
        r.gen_s.append(generated - start)
        r.prompt_tokens += sum(len(ids) for _, ids in requests)
        r.gen_tokens += sum(len(g.token_ids) for g in gens)
        r.train_input_tokens += int(stats["input_tokens"])
        r.trained_tokens += int(stats["tokens"])
        r.notes.append(f"step {self.steps_done}: micro_batches={stats['micro_batches']:.0f} "
                       f"padded={stats['padded_tokens']:.0f} logprob_gap={stats.get('logprob_gap', float('nan')):.2e} "
                       f"loss={stats['loss']:+.4f}")

    def finish(self) -> tuple[Result, dict[str, int]]:
        stats = self.engine.stats
        self.result.notes.append(f"engine batches={stats.batches} largest={stats.largest_batch} "
                                 f"forward_passes={stats.forward_passes}")
        return self.result, param_counts(self.policy)


def param_counts(policy) -> dict[str, int]:
    """P_base (frozen decoder weights, embeddings excluded), P_lora (trainable), P_head."""
    lm = policy.causal_lm()
    embed = {id(p) for p in lm.get_input_embeddings().parameters()}
    head = lm.get_output_embeddings().weight
    base = sum(p.numel() for n, p in lm.get_decoder().named_parameters()
               if not p.requires_grad and id(p) not in embed)
    lora = sum(p.numel() for p in policy.model.parameters() if p.requires_grad)
    return {"base": base, "lora": lora, "head": head.numel()}


# ----------------------------------------------------------------------------------------------- TRL
def run_trl(args: argparse.Namespace, between: Callable[[], object] | None = None) -> Result:
    """TRL's GRPOTrainer for 1 + `args.steps` steps. `between` runs after each TRL step (ajet's step, so
    both trainers see the same machine load); its time is not counted as TRL's."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ajet.models import resolve_model_path

    result = Result("trl")
    prompts = build_prompts(args.prompts)
    rows = [{"prompt": messages, "answer": answer} for _ in range(args.steps + 1) for messages, answer in prompts]
    marks: list[tuple[float, float]] = []  # (TRL step ended, TRL resumed after `between`)
    batch = args.prompts * args.group_size
    if batch % args.micro_batch:
        raise SystemExit(f"--micro-batch {args.micro_batch} must divide prompts x group_size = {batch}")

    class StepTimer(TrainerCallback):
        def on_step_end(self, *_: object, **__: object) -> None:
            ended = time.perf_counter()
            if between is not None:
                between()
                torch.set_num_threads(args.threads)
            marks.append((ended, time.perf_counter()))

    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        config = GRPOConfig(
            output_dir=tmp, max_steps=args.steps + 1, per_device_train_batch_size=args.micro_batch,
            gradient_accumulation_steps=batch // args.micro_batch, num_generations=args.group_size,
            max_completion_length=args.max_tokens,
            learning_rate=1e-5, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
            beta=0.0, loss_type="dapo", epsilon=0.2, scale_rewards="group", temperature=1.0, top_p=1.0,
            use_vllm=False, report_to="none", use_cpu=True, bf16=args.precision == "bf16", gradient_checkpointing=False,
            logging_steps=1, save_strategy="no", disable_tqdm=True, shuffle_dataset=False, seed=args.seed,
            model_init_kwargs={"dtype": "float32"}, dataloader_num_workers=0,
        )
        peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear",
                                 task_type="CAUSAL_LM")
        trainer = GRPOTrainer(model=resolve_model_path(args.model), reward_funcs=[trl_reward], args=config,
                              train_dataset=Dataset.from_list(rows), peft_config=peft_config,
                              callbacks=[StepTimer()])
        generate = trainer._generate_and_score_completions  # timed, not changed

        def timed_generate(inputs):
            start = time.perf_counter()
            out = generate(inputs)
            gen_s = time.perf_counter() - start
            if len(marks) >= 1:  # the warm-up step has ended: this generation belongs to a timed step
                result.gen_s.append(gen_s)
                prompt_tokens = int(out["prompt_mask"].sum())
                completion_tokens = int(out["completion_mask"].sum())
                result.prompt_tokens += prompt_tokens
                result.gen_tokens += completion_tokens
                result.trained_tokens += completion_tokens
                result.train_input_tokens += prompt_tokens + completion_tokens
            return out

        trainer._generate_and_score_completions = timed_generate
        torch.set_num_threads(args.threads)  # the Trainer's setup must not have changed it
        trainer.train()
        result.notes.append(f"trl losses: {[round(h['loss'], 4) for h in trainer.state.log_history if 'loss' in h]}")
    result.step_s = [end - resumed for (_, resumed), (end, _) in zip(marks, marks[1:])]
    return result


# -------------------------------------------------------------------------------------------- report
def matmul_peak(dtype_name: str, n: int = 2048, reps: int = 10) -> float:
    """Best-of-`reps` FLOP/s of an n x n matmul at this dtype and thread count."""
    import torch

    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    torch.matmul(a, b)  # warm-up: kernel selection, page faults
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def describe(r: Result) -> str:
    """Seconds per step, its split, and tokens per second of one trainer."""
    steps, gen, train = len(r.step_s), sum(r.gen_s), max(r.train_s, 1e-9)
    return (f"{r.name:>4}: {r.per_step:7.2f} s/step (steps: {', '.join(f'{s:.2f}' for s in r.step_s)})\n"
            f"      generation+reward {gen / steps:6.2f} s/step, {r.gen_tokens / max(gen, 1e-9):7.1f} generated "
            f"tok/s ({r.gen_tokens / steps:.0f} tokens/step, prompts {r.prompt_tokens / steps:.0f})\n"
            f"      training          {r.train_s / steps:6.2f} s/step, {r.train_input_tokens / train:7.1f} "
            f"input tok/s, {r.trained_tokens / train:6.1f} trained tok/s")


def utilisation(r: Result, params: dict[str, int], peaks: dict[str, float]) -> str:
    flops = (4 * params["base"] * r.train_input_tokens + 6 * params["lora"] * r.train_input_tokens
             + 4 * params["head"] * r.trained_tokens)
    achieved = flops / max(r.train_s, 1e-9)
    shares = ", ".join(f"{achieved / peak:.1%} of {name} peak" for name, peak in peaks.items())
    return f"{r.name} training: {achieved / 1e9:.1f} GFLOP/s achieved = {shares}"


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="smollm2-135m-instruct or tiny-random")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per trainer (after 1 warm-up step)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for both trainers")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64, help="max completion tokens")
    parser.add_argument("--micro-batch", type=int, default=8,
                        help="rows per forward/backward (TRL's per_device_train_batch_size; ajet's token budget "
                        "is this many rows of the longest length); must divide prompts x group_size")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="fp32: both trainers in float32. bf16: float32 weights, training forward/backward under "
                        "bf16 autocast (ajet model.autocast=bfloat16; TRL bf16=True); generation stays fp32 on both")
    parser.add_argument("--only", choices=["both", "ajet", "trl"], default="both")
    parser.add_argument("--fold-lora", choices=["auto", "off"], default="auto",
                        help="ajet's engine.fold_lora (off: generate through peft's LoRA layers as TRL does)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import torch

    torch.set_num_threads(args.threads)
    print(f"model={args.model} prompts={args.prompts} group_size={args.group_size} max_tokens={args.max_tokens} "
          f"steps={args.steps} (+1 warm-up) threads={args.threads} precision={args.precision} "
          f"micro_batch={args.micro_batch} torch={torch.__version__}", flush=True)
    peaks = {name: matmul_peak(name) for name in ("float32", "bfloat16")}

    results: dict[str, Result] = {}
    ajet = AjetSide(args) if args.only in ("both", "ajet") else None
    if args.only == "ajet":
        for _ in range(args.steps + 1):
            ajet.step()
    else:  # TRL drives the loop; ajet's step k runs right after TRL's step k, under the same load
        results["trl"] = run_trl(args, between=ajet.step if ajet else None)
        torch.set_num_threads(args.threads)
    # Measured again at the end, the best of both kept: a busy neighbour can only make a matmul slower.
    first = dict(peaks)
    peaks = {name: max(value, matmul_peak(name)) for name, value in peaks.items()}
    print("matmul peak (2048x2048, best of start/end): " + ", ".join(
        f"{k} {v / 1e9:.1f} GFLOP/s (start {first[k] / 1e9:.1f})" for k, v in peaks.items()), flush=True)
    if ajet is not None:
        results["ajet"], params = ajet.finish()
        print(describe(results["ajet"]), flush=True)
        print(f"      params: base decoder {params['base'] / 1e6:.1f}M, lora {params['lora'] / 1e6:.2f}M, "
              f"head {params['head'] / 1e6:.1f}M", flush=True)
        for note in results["ajet"].notes:
            print(f"      {note}", flush=True)
        print(utilisation(results["ajet"], params, peaks), flush=True)
    if "trl" in results:
        print(describe(results["trl"]), flush=True)
        print("      " + "; ".join(results["trl"].notes), flush=True)
        if ajet is not None:
            print(utilisation(results["trl"], params, peaks), flush=True)
    both = " (both trainers' models in one process)" if len(results) == 2 else ""
    print(f"peak RSS {peak_rss_gb():.1f} GB{both}", flush=True)
    if len(results) == 2:
        ratio = results["trl"].per_step / results["ajet"].per_step
        print(f"ajet_over_trl_speed={ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
