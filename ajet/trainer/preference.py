"""One DPO update (sigmoid DPO, IPO or SimPO; see `ajet.algorithm.losses.dpo_loss`): pairs of
(chosen, rejected) samples in, one optimizer step out.

The reference model (skipped for SimPO and `dpo.reference_free`) is the policy with its adapters disabled (LoRA) or the frozen copy kept by
`load_policy(reference=True)` (full fine-tuning). Pairs are processed in chunks whose padded size
stays under `trainer.micro_batch_tokens`; each chunk's loss is weighted by its share of the pairs,
so the accumulated gradient equals that of one pass over all pairs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from ajet.algorithm.losses import dpo_loss
from ajet.config.schema import DpoConfig, TrainerConfig
from ajet.samples import Sample
from ajet.trainer.logprobs import sequence_logprobs, token_logprobs
from ajet.trainer.optim import apply_update, training_call
from ajet.trainer.policy import Policy

Pair = tuple[Sample, Sample]


def _pad(samples: Sequence[Sample], pad_id: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    width = max(len(s.input_ids) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(samples), width), dtype=torch.long)
    mask = torch.zeros((len(samples), width), dtype=torch.float32)
    for r, s in enumerate(samples):
        n = len(s.input_ids)
        ids[r, :n] = torch.tensor(s.input_ids)
        attention[r, :n] = 1
        mask[r, :n] = torch.tensor(s.loss_mask, dtype=torch.float32)
    mask[:, 0] = 0
    return ids.to(device), attention.to(device), mask.to(device)


def chunk_pairs(pairs: Sequence[Pair], budget: int) -> list[list[int]]:
    """Indices of pairs per chunk: rows × longest row ≤ budget (a lone oversize pair still runs)."""
    chunks: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i, (chosen, rejected) in enumerate(pairs):
        length = max(len(chosen.input_ids), len(rejected.input_ids))
        if current and 2 * (len(current) + 1) * max(longest, length) > budget:
            chunks.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, length)
    if current:
        chunks.append(current)
    return chunks


def _chunk_logps(model, chunk: list[Pair], policy: Policy) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed completion logprobs and completion token counts, each (2P,): chosen rows first, then
    rejected rows."""
    samples = [c for c, _ in chunk] + [r for _, r in chunk]
    ids, attention, mask = _pad(samples, policy.tokenizer.pad_token_id or 0, policy.device)
    with policy.autocast():  # the precision of every other pass (ajet.models.resolve_autocast)
        logprobs = token_logprobs(model, ids, attention, mask)  # (2P, T)
    return sequence_logprobs(logprobs, mask), mask.sum(dim=1)


def needs_reference(dpo: DpoConfig) -> bool:
    """Whether the loss compares with the frozen reference (SimPO and reference-free DPO do not)."""
    return not dpo.reference_free and dpo.loss_type != "simpo"


def dpo_step(policy: Policy, optimizer: torch.optim.Optimizer, scheduler, pairs: Sequence[Pair],
             cfg: TrainerConfig, dpo: DpoConfig) -> dict[str, float]:
    """One optimizer update over `pairs` (skipped when non-finite, see `apply_update`); the scheduler
    steps once. Returns loss and reward stats."""
    started = time.perf_counter()
    lr = float(optimizer.param_groups[0]["lr"])
    chunks = chunk_pairs(pairs, cfg.micro_batch_tokens)
    total = len(pairs)
    stats: dict[str, float] = {"loss": 0.0, "reward_margin": 0.0, "reward_accuracy": 0.0,
                               "reward_chosen": 0.0, "reward_rejected": 0.0}
    tokens = 0
    with training_call(policy.model, optimizer, scheduler):
        for idx in chunks:
            chunk = [pairs[i] for i in idx]
            p = len(chunk)
            ref_chosen = ref_rejected = None
            if needs_reference(dpo):
                with torch.no_grad(), policy.base_model_context() as reference:
                    ref, _ = _chunk_logps(reference, chunk, policy)  # (2P,)
                ref_chosen, ref_rejected = ref[:p], ref[p:]
            logps, counts = _chunk_logps(policy.model, chunk, policy)  # (2P,), (2P,)
            loss, chunk_stats = dpo_loss(logps[:p], logps[p:], ref_chosen, ref_rejected, dpo.beta, dpo.label_smoothing,
                                         loss_type=dpo.loss_type, chosen_tokens=counts[:p],
                                         rejected_tokens=counts[p:], simpo_gamma=dpo.simpo_gamma)
            (loss * p / total).backward()
            stats["loss"] += float(loss.detach()) * p / total
            for key in ("reward_margin", "reward_accuracy", "reward_chosen", "reward_rejected"):
                stats[key] += chunk_stats[key] * p / total
            tokens += sum(len(c.input_ids) + len(r.input_ids) for c, r in chunk)
        stats["grad_norm"], applied = apply_update(optimizer, policy.trainable_parameters(), cfg.grad_clip,
                                                   stats["loss"])
        stats["updates"] = float(applied)
        stats["nonfinite_updates"] = stats["nonfinite_tail"] = float(not applied)
    elapsed = time.perf_counter() - started
    stats.update(lr=lr, pairs=float(total), tokens=float(tokens), tokens_per_s=tokens / elapsed if elapsed else 0.0)
    return stats
