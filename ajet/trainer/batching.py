"""Packing samples into padded micro-batches under a token budget.

A micro-batch is what one forward/backward pass sees. Its cost is its padded size, rows × longest
row, and `micro_batch_tokens` bounds that, so memory is set by the config and not by how long an
episode happened to be. Samples are sorted by length (longest first) before packing, which keeps
rows of a micro-batch close in length and the padding small.

Rules that never lose data silently:
  - a sample longer than the budget gets a micro-batch of its own (over budget; counted in
    `BatchPlan.oversize`) rather than being dropped;
  - `max_length`, when given, cuts a sample to its first `max_length` tokens; trained tokens past the
    cut are lost, so the sample is listed in `BatchPlan.truncated` and its lost tokens counted;
  - samples with no trained token are not packed (they carry no gradient) and are listed in
    `BatchPlan.empty`.
Position 0 has no preceding token and so no logprob: its loss_mask bit is cleared (a well-formed
sample never sets it).

Padding is on the right: position ids 0..len-1 stay correct without passing them explicitly.

A prefix every row of a micro-batch shares (an agent's system prompt and tool specs, a GRPO group's
prompt; at least `shared_prefix` tokens) runs once (`ajet.trainer.logprobs.token_logprobs`), so it
is counted once: a micro-batch costs P + rows × (longest row − P) tokens for a shared prefix of P.
Eight tool-agent SFT rows of ~620 tokens sharing 449 then fit one 4,096-token micro-batch instead
of two. When a mini-batch still takes several micro-batches, `train_step` runs the prefix all of
them share once for the lot (`ajet.trainer.logprobs.PrefixPass`); packing does not count on that,
so the budget stays an upper bound of what a micro-batch runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ajet.samples import Sample
from ajet.trainer.logprobs import MIN_SHARED_PREFIX


@dataclass
class MicroBatch:
    """Padded tensors of a few samples. Row r holds `samples[indices[r]]`."""

    input_ids: torch.Tensor  # (B, T) long, right-padded with the pad id
    attention_mask: torch.Tensor  # (B, T) long, 1 on real tokens
    loss_mask: torch.Tensor  # (B, T) float32, 1 on trained tokens (never on padding or position 0)
    old_logprobs: torch.Tensor  # (B, T) float32, engine logprobs on trained tokens, 0 elsewhere
    advantages: torch.Tensor  # (B,) float32, one per row (0 when none were given, or given per token)
    indices: list[int]  # row -> index into the packed sample list
    lengths: list[int]  # real (possibly truncated) length of each row
    token_values: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> (B, T) float32, 0 on padding

    @property
    def rows(self) -> int:
        return len(self.indices)

    @property
    def num_tokens(self) -> int:
        """Real tokens (padding excluded)."""
        return sum(self.lengths)

    @property
    def padded_tokens(self) -> int:
        return self.input_ids.numel()

    @property
    def trained_tokens(self) -> int:
        return int(self.loss_mask.sum().item())

    def to(self, device: torch.device | str) -> MicroBatch:
        return MicroBatch(
            input_ids=self.input_ids.to(device),
            attention_mask=self.attention_mask.to(device),
            loss_mask=self.loss_mask.to(device),
            old_logprobs=self.old_logprobs.to(device),
            advantages=self.advantages.to(device),
            indices=self.indices,
            lengths=self.lengths,
            token_values={k: v.to(device) for k, v in self.token_values.items()},
        )


@dataclass
class BatchPlan:
    """The micro-batches of one mini-batch and what happened to each sample on the way."""

    micro_batches: list[MicroBatch]
    trained_tokens: int  # all trained tokens: the normalizer of token-mean losses
    sequences: int  # rows with at least one trained token: the normalizer of sequence-mean losses
    oversize: list[int] = field(default_factory=list)  # samples alone in an over-budget micro-batch
    truncated: list[int] = field(default_factory=list)  # samples cut to max_length
    truncated_trained_tokens: int = 0  # trained tokens lost to truncation
    empty: list[int] = field(default_factory=list)  # samples with no trained token, not packed

    @property
    def num_tokens(self) -> int:
        return sum(mb.num_tokens for mb in self.micro_batches)

    @property
    def padded_tokens(self) -> int:
        return sum(mb.padded_tokens for mb in self.micro_batches)


def pack_micro_batches(
    samples: Sequence[Sample],
    micro_batch_tokens: int,
    *,
    advantages: Sequence[float | Sequence[float]] | None = None,
    pad_token_id: int = 0,
    max_length: int | None = None,
    shared_prefix: int = MIN_SHARED_PREFIX,
    token_values: Mapping[str, Sequence[Sequence[float]]] | None = None,
) -> BatchPlan:
    """Group `samples` into right-padded micro-batches of at most `micro_batch_tokens` tokens: rows ×
    longest row, less (rows − 1) × the prefix all rows share when it is at least `shared_prefix`
    tokens long (it runs once; 0: never counted once).

    advantages: one per sample (GRPO), a number or one per token (turn-level credit, PPO: then they go to
    `token_values["advantages"]`); None gives zeros (SFT ignores them).
    token_values: name -> one list per sample, one value per token (PPO's returns and old values), packed
    into `MicroBatch.token_values[name]` (B, T) alongside the tokens (cut with them).
    Indices in the plan refer to positions in `samples`.
    """
    if micro_batch_tokens < 1:
        raise ValueError(f"micro_batch_tokens must be >= 1, got {micro_batch_tokens}")
    if advantages is not None and len(advantages) != len(samples):
        raise ValueError(f"{len(samples)} samples but {len(advantages)} advantages")
    if max_length is not None and max_length < 2:
        raise ValueError(f"max_length must be >= 2 (one context token and one trained token), got {max_length}")
    token_values = dict(token_values or {})
    if advantages is not None and any(isinstance(a, Sequence) for a in advantages):
        token_values["advantages"] = [a if isinstance(a, Sequence) else [float(a)] * len(s.input_ids)
                                      for a, s in zip(advantages, samples)]
        advantages = [0.0] * len(samples)
    for name, per_sample in token_values.items():
        if len(per_sample) != len(samples) or any(len(v) != len(s.input_ids) for v, s in zip(per_sample, samples)):
            raise ValueError(f"token_values[{name!r}] must hold one value per token of each sample")

    rows: list[tuple[int, list[int], list[float], list[float]]] = []  # (index, ids, mask, old)
    plan = BatchPlan(micro_batches=[], trained_tokens=0, sequences=0)
    for i, sample in enumerate(samples):
        ids, mask, old = list(sample.input_ids), [float(m) for m in sample.loss_mask], list(sample.old_logprobs)
        if mask:
            mask[0] = 0.0  # no logprob exists for the first token
        if max_length is not None and len(ids) > max_length:
            plan.truncated.append(i)
            plan.truncated_trained_tokens += int(sum(mask[max_length:]))
            ids, mask, old = ids[:max_length], mask[:max_length], old[:max_length]
        if sum(mask) == 0:
            plan.empty.append(i)
            continue
        rows.append((i, ids, mask, old))
        plan.trained_tokens += int(sum(mask))
        plan.sequences += 1

    # Longest first; ties keep sample order so packing is deterministic.
    rows.sort(key=lambda r: (-len(r[1]), r[0]))
    group: list[tuple[int, list[int], list[float], list[float]]] = []
    common = 0  # tokens every row of `group` shares
    for row in rows:
        width = len(group[0][1]) if group else len(row[1])  # sorted: the first row is the longest
        if group:
            joined = min(common, len(os.path.commonprefix([group[0][1][:common], row[1][:common]])))
            if _cost(width, len(group) + 1, joined, shared_prefix) > micro_batch_tokens:
                plan.micro_batches.append(_pad(group, advantages, pad_token_id, token_values))
                group, joined = [], len(row[1])
        else:
            joined = len(row[1])
        group.append(row)
        common = joined
        if len(group) == 1 and len(row[1]) > micro_batch_tokens:
            plan.oversize.append(row[0])
    if group:
        plan.micro_batches.append(_pad(group, advantages, pad_token_id, token_values))
    return plan


def _cost(width: int, rows: int, common: int, shared_prefix: int) -> int:
    """Tokens a micro-batch runs: its padded size, with a shared prefix counted once. Identical rows
    (common == width) run whole in `token_logprobs`, so they are counted whole."""
    if rows < 2 or shared_prefix <= 0 or common < shared_prefix or common >= width:
        return width * rows
    return common + rows * (width - common)


def _pad(group, advantages: Sequence[float] | None, pad_token_id: int,
         token_values: Mapping[str, Sequence[Sequence[float]]]) -> MicroBatch:
    width = max(len(r[1]) for r in group)
    n = len(group)
    input_ids = torch.full((n, width), pad_token_id, dtype=torch.long)  # (B, T)
    attention_mask = torch.zeros((n, width), dtype=torch.long)  # (B, T)
    loss_mask = torch.zeros((n, width), dtype=torch.float32)  # (B, T)
    old = torch.zeros((n, width), dtype=torch.float32)  # (B, T)
    adv = torch.zeros((n,), dtype=torch.float32)  # (B,)
    extra = {name: torch.zeros((n, width), dtype=torch.float32) for name in token_values}  # (B, T) each
    for r, (i, ids, mask, old_lp) in enumerate(group):
        length = len(ids)
        input_ids[r, :length] = torch.tensor(ids, dtype=torch.long)
        attention_mask[r, :length] = 1
        loss_mask[r, :length] = torch.tensor(mask, dtype=torch.float32)
        old[r, :length] = torch.tensor(old_lp, dtype=torch.float32) * loss_mask[r, :length]
        if advantages is not None:
            adv[r] = float(advantages[i])
        for name, per_sample in token_values.items():
            extra[name][r, :length] = torch.tensor(per_sample[i][:length], dtype=torch.float32)
    return MicroBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        loss_mask=loss_mask,
        old_logprobs=old,
        advantages=adv,
        indices=[r[0] for r in group],
        lengths=[len(r[1]) for r in group],
        token_values=extra,
    )


def split_mini_batches(n: int, updates: int) -> list[list[int]]:
    """Indices of `updates` mini-batches over n samples: one optimizer update each.

    n >= updates: contiguous, near-equal slices (sizes differ by at most one), so every sample is
    used exactly once. n < updates: every update sees all n samples (several passes over a small
    batch, as PPO epochs do), so the number of updates never depends on the sample count.
    """
    if updates < 1:
        raise ValueError(f"updates must be >= 1, got {updates}")
    if n == 0:
        return []
    if n < updates:
        return [list(range(n)) for _ in range(updates)]
    base, extra = divmod(n, updates)
    out, start = [], 0
    for u in range(updates):
        size = base + (1 if u < extra else 0)
        out.append(list(range(start, start + size)))
        start += size
    return out
