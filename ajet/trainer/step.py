"""One RL (or SFT) step of the debug trainer: samples in, `trainer.updates_per_step` optimizer updates out.

    samples ──split──▶ updates_per_step mini-batches ──pack──▶ token-budget micro-batches
    each mini-batch:  the prefix all its rows share, run once (PrefixPass, when > 1 micro-batch)
    each micro-batch: forward (logits only at trained positions) → loss / normalizer → backward
    each mini-batch:  backward through the prefix pass → clip grad norm → optimizer.step()
    each call:        scheduler.step()

Gradient accumulation is exact: every micro-batch divides its summed loss by the token (or row)
count of its whole mini-batch, so the accumulated gradient equals that of one forward over the
mini-batch, whatever `micro_batch_tokens` is.

Old logprobs. GRPO's ratio compares the trainer's logprobs with those of the policy that sampled
the tokens. `old_logprobs='engine'` (default) uses the engine's, recorded in the samples; the mean
absolute gap between them and the trainer's own first-pass logprobs (taken before the first update
of the step) is logged as `logprob_gap`: near 0 for the in-process engine, larger for a bf16 or
remote engine. `old_logprobs='recompute'` first runs a no-grad pass of the trainer over all samples
and uses those (verl's choice; costs one extra forward), still logging the gap to the engine.

PPO (`algo='ppo'`) trains the policy with the same clipped surrogate on per-token advantages (GAE over
turns, `ajet.algorithm.ppo`) and the value head (`policy.value_head`) with the clipped value loss, in
the same forward pass: loss = policy loss + ppo.value_coef x value loss.

The model is put in train() mode for the updates and back in eval() for the engine that shares it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import torch

from ajet.algorithm.losses import grpo_loss, sft_loss
from ajet.algorithm.ppo import PpoTargets, value_loss
from ajet.config.schema import GrpoConfig, PpoConfig, TrainerConfig
from ajet.samples import Sample
from ajet.trainer.batching import BatchPlan, MicroBatch, pack_micro_batches, split_mini_batches
from ajet.trainer.logprobs import PrefixPass, token_logprobs, token_outputs
from ajet.trainer.neftune import noisy_embeddings
from ajet.trainer.optim import apply_update, training_call
from ajet.trainer.policy import Policy
from ajet.trainer.trunk import TrunkCache

Algo = Literal["grpo", "sft", "ppo"]
OldLogprobs = Literal["engine", "recompute"]


@dataclass
class _Stats:
    """Sums over micro-batches, turned into means at the end."""

    losses: list[float] = field(default_factory=list)  # one per update, applied or skipped
    grad_norms: list[float] = field(default_factory=list)
    nonfinite: int = 0  # updates skipped for a non-finite loss or gradient
    nonfinite_tail: int = 0  # of those, how many in a row at the end
    weighted: dict[str, float] = field(default_factory=dict)  # stat * tokens
    stat_tokens: float = 0.0
    value_weighted: dict[str, float] = field(default_factory=dict)  # PPO critic stat * value positions
    value_positions: float = 0.0
    gap_sum: float = 0.0
    gap_max: float = 0.0
    gap_tokens: float = 0.0
    tokens: int = 0  # trained tokens
    input_tokens: int = 0  # real tokens forwarded
    padded_tokens: int = 0
    micro_batches: int = 0
    truncated: set[int] = field(default_factory=set)  # sample indices (a sample may be in several updates)
    oversize: set[int] = field(default_factory=set)
    empty: set[int] = field(default_factory=set)

    def add_gap(self, logprobs: torch.Tensor, old: torch.Tensor, mask: torch.Tensor) -> None:
        diff = ((logprobs.detach().float() - old.float()).abs() * mask).float()  # (B, T)
        self.gap_sum += float(diff.sum())
        self.gap_max = max(self.gap_max, float(diff.max()) if diff.numel() else 0.0)
        self.gap_tokens += float(mask.sum())

    def add_value_stats(self, stats: dict[str, float]) -> None:
        """PPO's critic stats, weighted by value positions (one per turn)."""
        n = stats.pop("value_positions", 0.0)
        for key, value in stats.items():
            self.value_weighted[key] = self.value_weighted.get(key, 0.0) + value * n
        self.value_positions += n

    def add_loss_stats(self, stats: dict[str, float]) -> None:
        n = stats.get("tokens", 0.0)
        for key, value in stats.items():
            if key not in ("tokens", "ratio_max"):
                self.weighted[key] = self.weighted.get(key, 0.0) + value * n
        if "ratio_max" in stats:
            self.weighted["ratio_max"] = max(self.weighted.get("ratio_max", 0.0), stats["ratio_max"])
        self.stat_tokens += n


def train_step(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    samples: Sequence[Sample],
    advantages: Sequence[float | Sequence[float]] | None,
    cfg: TrainerConfig,
    *,
    algo: Algo = "grpo",
    grpo: GrpoConfig | None = None,
    old_logprobs: OldLogprobs = "engine",
    autocast_dtype: torch.dtype | None = None,
    max_length: int | None = None,
    ppo: PpoConfig | None = None,
    ppo_targets: Sequence[PpoTargets] | None = None,
    neftune_alpha: float = 0.0,
) -> dict[str, float]:
    """Run `cfg.updates_per_step` optimizer updates on `samples`; step the scheduler once.

    advantages: one per sample for GRPO (see `ajet.algorithm.group_advantages`), a number or one per token
    (turn-level credit, `ajet.algorithm.turns`); ignored by SFT and PPO.
    grpo: clip ranges, KL beta, loss aggregation and entropy bonus (defaults: GrpoConfig()).
    ppo, ppo_targets: PPO's settings and one `PpoTargets` per sample (`ajet.algorithm.ppo.ppo_targets`);
    the policy needs its value head (`ajet.trainer.value.attach_value_head`).
    autocast_dtype: e.g. torch.bfloat16 to run forward/backward under autocast (weights stay as loaded);
    None: `policy.autocast_dtype` (set by load_policy(autocast=...)).
    max_length: cut samples to this many tokens (counted in `truncated`); None keeps them whole.
    neftune_alpha: SFT only: NEFTune noise on the input embeddings (`ajet.trainer.neftune`); 0: none.
    An update whose loss or gradient is non-finite is skipped (`nonfinite_updates`; `updates` counts
    the applied ones), see `ajet.trainer.optim.apply_update`.
    Returns plain floats: loss, grad_norm, lr, tokens, tokens_per_s, clip_fraction, kl, logprob_gap...
    """
    if algo not in ("grpo", "sft", "ppo"):
        raise ValueError(f"train_step algo must be 'grpo', 'ppo' or 'sft', got {algo!r}")
    if neftune_alpha and algo != "sft":
        raise ValueError("neftune_alpha is an SFT setting: RL's logprobs must be those of the policy that sampled")
    if algo == "grpo" and (advantages is None or len(advantages) != len(samples)):
        raise ValueError(f"grpo needs one advantage per sample: {len(samples)} samples, advantages={advantages!r:.60}")
    token_values = None
    if algo == "ppo":
        if ppo_targets is None or len(ppo_targets) != len(samples) or policy.value_head is None:
            raise ValueError("ppo needs the policy's value head and one PpoTargets per sample")
        advantages = [t.advantages for t in ppo_targets]
        token_values = {name: [getattr(t, name) for t in ppo_targets] for name in ("returns", "old_values", "value_mask")}
    grpo = grpo or GrpoConfig()
    ppo = ppo or PpoConfig()
    start = time.perf_counter()
    lr = float(optimizer.param_groups[0]["lr"])
    stats = _Stats()
    samples = list(samples)
    rl = algo != "sft"
    measure_gap_first = rl
    if rl and old_logprobs == "recompute":
        samples = _recompute_old_logprobs(policy, samples, cfg, stats, autocast_dtype, max_length)
        measure_gap_first = False

    params = policy.trainable_parameters()
    if algo == "ppo":
        params = params + list(policy.value_head.parameters())
    # SFT rows come back every epoch: the frozen layers' output of a row is kept after its first visit
    # (not under NEFTune: each visit's embeddings differ)
    trunk = policy.trunk_cache(cfg.trunk_cache_mb) if algo == "sft" and not neftune_alpha else None
    with training_call(policy.model, optimizer, scheduler):
        for update, idx in enumerate(split_mini_batches(len(samples), cfg.updates_per_step)):
            plan = pack_micro_batches(
                [samples[i] for i in idx],
                cfg.micro_batch_tokens,
                advantages=[advantages[i] for i in idx] if rl else None,
                pad_token_id=policy.tokenizer.pad_token_id or 0,
                max_length=max_length,
                token_values={k: [v[i] for i in idx] for k, v in token_values.items()} if token_values else None,
            )
            _count_plan(stats, plan, idx)
            if not plan.micro_batches:
                continue  # nothing trainable in this mini-batch: no update
            micro_batches = [mb.to(policy.device) for mb in plan.micro_batches]
            longest = max(max(mb.lengths) for mb in micro_batches)
            with noisy_embeddings(policy.model, neftune_alpha, longest):
                prefix = _prefix_pass(policy, micro_batches, autocast_dtype, checkpointed=rl) if trunk is None else None
                loss = 0.0
                value_positions = sum(float(mb.token_values["value_mask"].sum()) for mb in micro_batches) if token_values else 0.0
                for mb in micro_batches:
                    loss += _micro_step(policy, mb, plan, algo, grpo, autocast_dtype, stats,
                                        measure_gap=measure_gap_first and update == 0, trunk=trunk, prefix=prefix,
                                        ppo=ppo, value_positions=value_positions)
                if prefix is not None:
                    prefix.backward()
            norm, applied = apply_update(optimizer, params, cfg.grad_clip, loss)
            stats.losses.append(loss)
            stats.grad_norms.append(norm)
            stats.nonfinite += 0 if applied else 1
            stats.nonfinite_tail = 0 if applied else stats.nonfinite_tail + 1
    return _summary(stats, lr, time.perf_counter() - start)


def _micro_step(
    policy: Policy,
    mb: MicroBatch,
    plan: BatchPlan,
    algo: Algo,
    grpo: GrpoConfig,
    autocast_dtype: torch.dtype | None,
    stats: _Stats,
    measure_gap: bool,
    trunk: TrunkCache | None = None,
    prefix: PrefixPass | None = None,
    ppo: PpoConfig | None = None,
    value_positions: float = 0.0,
) -> float:
    """Forward + backward of one micro-batch; returns its share of the mini-batch loss."""
    ref = None
    if algo != "sft" and grpo.beta > 0:
        with torch.no_grad(), policy.autocast(autocast_dtype), policy.base_model_context() as base:
            ref = token_logprobs(base, mb.input_ids, mb.attention_mask, mb.loss_mask)  # (B, T)
    with policy.autocast(autocast_dtype):
        out = token_outputs(policy.model, mb.input_ids, mb.attention_mask, mb.loss_mask, trunk=trunk, prefix=prefix,
                            entropy=algo != "sft" and grpo.entropy_coef > 0,
                            value_head=policy.value_head if algo == "ppo" else None)  # (B, T) each
    logprobs = out.logprobs
    if algo == "sft":
        loss = sft_loss(logprobs, mb.loss_mask, normalizer=plan.trained_tokens)
        loss_stats = {"tokens": float(mb.loss_mask.sum())}
    else:
        normalizer = plan.trained_tokens if grpo.loss_agg == "token" else plan.sequences
        loss, loss_stats = grpo_loss(
            logprobs, mb.old_logprobs, mb.token_values.get("advantages", mb.advantages), mb.loss_mask,
            epsilon=grpo.epsilon, epsilon_high=grpo.epsilon_high, ref_logprobs=ref, beta=grpo.beta,
            agg=grpo.loss_agg, normalizer=normalizer, entropy=out.entropy, entropy_coef=grpo.entropy_coef,
        )
        if algo == "ppo":
            v = mb.token_values
            v_loss, v_stats = value_loss(out.values, v["old_values"], v["returns"], v["value_mask"],
                                         clip=ppo.value_clip, normalizer=value_positions)
            loss = loss + ppo.value_coef * v_loss
            stats.add_value_stats(v_stats)
        if measure_gap:
            stats.add_gap(logprobs, mb.old_logprobs, mb.loss_mask)
    loss.backward()
    stats.add_loss_stats(loss_stats)
    stats.micro_batches += 1
    stats.tokens += mb.trained_tokens
    stats.input_tokens += mb.num_tokens
    stats.padded_tokens += mb.padded_tokens
    return float(loss.detach())


def _prefix_pass(policy: Policy, micro_batches: list[MicroBatch], autocast_dtype: torch.dtype | None, *,
                 checkpointed: bool) -> PrefixPass | None:
    """The prefix every row of a mini-batch shares (an agent's system prompt and tools), run once for all
    its micro-batches; None when there is no such prefix, or one micro-batch that is not `checkpointed`
    (it shares its prefix itself).

    checkpointed (RL updates): an RL update runs beside what the rollout left and is a run's memory peak,
    and a fifth of a step's time; recomputing the prefix in backward keeps its activations apart from
    the rows', one micro-batch or several (docs/training.md, Memory). An SFT step is all compute, and
    the recomputation made it 12-20% slower."""
    if len(micro_batches) < 2 and not checkpointed:
        return None
    with policy.autocast(autocast_dtype):
        return PrefixPass.shared_by(policy.model, [mb.input_ids for mb in micro_batches],
                                    [mb.lengths for mb in micro_batches], checkpointed=checkpointed)


@torch.no_grad()
def _recompute_old_logprobs(
    policy: Policy,
    samples: list[Sample],
    cfg: TrainerConfig,
    stats: _Stats,
    autocast_dtype: torch.dtype | None,
    max_length: int | None,
) -> list[Sample]:
    """Replace each sample's old_logprobs by the trainer's own (no grad), logging the engine gap."""
    plan = pack_micro_batches(samples, cfg.micro_batch_tokens, pad_token_id=policy.tokenizer.pad_token_id or 0,
                              max_length=max_length)
    new = list(samples)
    for mb in plan.micro_batches:
        mb = mb.to(policy.device)
        with policy.autocast(autocast_dtype):
            lp = token_logprobs(policy.model, mb.input_ids, mb.attention_mask, mb.loss_mask)  # (B, T)
        stats.add_gap(lp, mb.old_logprobs, mb.loss_mask)
        for row, i in enumerate(mb.indices):
            length = len(samples[i].input_ids)
            values = lp[row].float().cpu().tolist()
            values = values[:length] + [0.0] * (length - len(values))  # truncated rows keep their length
            new[i] = replace(samples[i], old_logprobs=values)
    return new


def _count_plan(stats: _Stats, plan: BatchPlan, idx: list[int]) -> None:
    stats.truncated.update(idx[i] for i in plan.truncated)
    stats.oversize.update(idx[i] for i in plan.oversize)
    stats.empty.update(idx[i] for i in plan.empty)


def _summary(stats: _Stats, lr: float, elapsed: float) -> dict[str, float]:
    out: dict[str, float] = {
        "loss": sum(stats.losses) / len(stats.losses) if stats.losses else 0.0,
        "grad_norm": sum(stats.grad_norms) / len(stats.grad_norms) if stats.grad_norms else 0.0,
        "grad_norm_max": max(stats.grad_norms, default=0.0),
        "lr": lr,
        "updates": float(len(stats.losses) - stats.nonfinite),  # applied
        "nonfinite_updates": float(stats.nonfinite),
        "nonfinite_tail": float(stats.nonfinite_tail),
        "micro_batches": float(stats.micro_batches),
        "tokens": float(stats.tokens),
        "input_tokens": float(stats.input_tokens),
        "padded_tokens": float(stats.padded_tokens),
        "tokens_per_s": stats.input_tokens / elapsed if elapsed > 0 else 0.0,
        "time_s": elapsed,
        "truncated": float(len(stats.truncated)),
        "oversize": float(len(stats.oversize)),
        "empty": float(len(stats.empty)),
    }
    for key, value in stats.weighted.items():
        out[key] = value if key == "ratio_max" else value / max(stats.stat_tokens, 1.0)
    for key, value in stats.value_weighted.items():
        out[key] = value / max(stats.value_positions, 1.0)
    if stats.gap_tokens:
        out["logprob_gap"] = stats.gap_sum / stats.gap_tokens
        out["logprob_gap_max"] = stats.gap_max
    return out
