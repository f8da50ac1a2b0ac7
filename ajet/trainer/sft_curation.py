"""The SFT stage's data with curation applied (`sft.task_weights`, `sft.coreset`, `sft.replay`).

Order: read and render every row -> mix by task weights -> select the coreset -> add replayed rows
from the buffer -> add this run's selected rows to the buffer. The choice is written to the run
folder (`sft_curation.json`: per-dialog metrics, what was kept and why), and a resumed run reads it
back instead of choosing again, so a resume trains on the same rows and the buffer is fed once.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ajet.config.schema import SftConfig
from ajet.render import ChatRenderer
from ajet.samples import Sample
from ajet.trainer.curation import (DialogMetrics, ReplayBuffer, conversation_words, lexical_diversity,
                                   select_coreset, weighted_mix)
from ajet.trainer.logprobs import token_logprobs
from ajet.trainer.sft_data import Conversation, LoadReport, conversation_sample, parse_conversation, read_jsonl

REPORT = "sft_curation.json"
LossFn = Callable[[Sequence[Sample]], list[float]]


class _Row(NamedTuple):
    """One usable SFT row: as read (kept for the replay buffer), parsed, and rendered."""

    raw: dict[str, Any]
    conv: Conversation
    sample: Sample


def sample_losses(model: torch.nn.Module, pad_id: int,
                  autocast: Callable[[], AbstractContextManager] = nullcontext) -> LossFn:
    """Mean NLL per trained token of each sample under `model` (one row at a time: no padding waste),
    each pass under `autocast()` (a policy's: `policy.autocast`)."""

    def losses(samples: Sequence[Sample]) -> list[float]:
        out = []
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        with torch.no_grad(), autocast():
            for s in samples:
                ids = torch.tensor([s.input_ids], device=device)
                mask = torch.tensor([s.loss_mask], dtype=torch.float32, device=device)
                mask[:, 0] = 0
                lp = token_logprobs(model, ids, torch.ones_like(ids), mask)
                out.append(float(-(lp * mask).sum() / mask.sum().clamp_min(1.0)))
        model.train(was_training)
        return out

    return losses


def curated_sft_samples(sft: SftConfig, renderer: ChatRenderer, run_dir: Path, seed: int,
                        loss_fn: LossFn | None) -> tuple[list[Sample], LoadReport, dict[str, Any]]:
    """The samples the SFT stage trains on, the load report, and the curation report."""
    saved = run_dir / REPORT
    rows, report = read_jsonl(sft.data, lambda row: (row, parse_conversation(row)))
    rendered: list[_Row] = []
    for i, (row, conv) in enumerate(rows):
        try:
            rendered.append(_Row(row, conv, conversation_sample(renderer, conv, i)))
        except Exception as exc:  # a template that cannot render this row: skip it, say so
            report.skipped.append(f"{sft.data}: conversation {i}: cannot render: {exc}")
    if saved.is_file():  # a resumed run: the rows chosen when it started
        curation = json.loads(saved.read_text(encoding="utf-8"))
        replayed = [_render(renderer, r, n) for n, r in enumerate(curation["replayed_rows"])]
        return [rendered[i].sample for i in curation["selected"]] + replayed, report, curation

    metrics = _metrics(rendered, loss_fn if _needs_loss(sft, rendered) else None)
    pool = list(range(len(rendered)))
    mix: dict[str, int] = {}
    if sft.task_weights:
        pool, mix = weighted_mix([m.category for m in metrics], sft.task_weights, len(rendered), seed)
    selected = pool
    if sft.coreset:
        unique = list(dict.fromkeys(pool))  # a repeated row (an oversampled category) is one candidate
        chosen = select_coreset([metrics[i] for i in unique], sft.coreset.strategy, sft.coreset.target_size, seed)
        selected = [unique[j] for j in chosen]
    replayed_rows: list[dict[str, Any]] = []
    if sft.replay:
        buffer = ReplayBuffer(sft.replay.buffer, sft.replay.buffer_size)
        replayed_rows = buffer.sample(round(sft.replay.ratio * len(selected)), seed)
        buffer.add([rendered[i].raw for i in dict.fromkeys(selected)], seed)
        buffer.save()
    chosen = set(selected)
    curation = {
        "rows": len(rendered), "selected": selected, "replayed": len(replayed_rows), "task_mix": mix,
        "strategy": sft.coreset.strategy if sft.coreset else None, "replayed_rows": replayed_rows,
        "summary": {"all": _summary(metrics), "selected": _summary([metrics[i] for i in selected])},
        "dialogs": [{k: v for k, v in vars(m).items() if k != "words"} | {"selected": m.index in chosen}
                    for m in metrics],
    }
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = saved.with_name(saved.name + ".tmp")
    tmp.write_text(json.dumps(curation, ensure_ascii=False, indent=1), encoding="utf-8")
    tmp.replace(saved)
    replayed = [_render(renderer, r, n) for n, r in enumerate(replayed_rows)]
    return [rendered[i].sample for i in selected] + replayed, report, curation


def describe(curation: dict[str, Any]) -> str:
    """One line for the console: what the stage trains on."""
    parts = [f"{len(curation['selected'])} of {curation['rows']} rows"]
    if curation["strategy"]:
        parts.append(f"coreset {curation['strategy']}")
    if curation["task_mix"]:
        parts.append("mix " + ", ".join(f"{k} {v}" for k, v in curation["task_mix"].items()))
    if curation["replayed"]:
        parts.append(f"+{curation['replayed']} replayed")
    return "SFT data: " + "; ".join(parts) + f" (details: {REPORT})"


def _needs_loss(sft: SftConfig, rendered: list[_Row]) -> bool:
    needs = bool(sft.coreset and sft.coreset.strategy in ("loss_topk", "hybrid"))
    return needs and any(_metadata_loss(r.raw) is None for r in rendered)


def _metadata_loss(row: dict[str, Any]) -> float | None:
    meta = row.get("metadata")
    value = meta.get("loss") if isinstance(meta, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _metrics(rendered: list[_Row], loss_fn: LossFn | None) -> list[DialogMetrics]:
    missing = [i for i, r in enumerate(rendered) if _metadata_loss(r.raw) is None]
    computed = dict(zip(missing, loss_fn([rendered[i].sample for i in missing]))) if loss_fn and missing else {}
    metrics = []
    for i, (row, conv, sample) in enumerate(rendered):
        words, assistant = conversation_words(conv.messages)
        meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        loss = _metadata_loss(row)  # a loss the row already carries is respected
        metrics.append(DialogMetrics(
            index=i, token_length=len(sample.input_ids), trained_tokens=sum(sample.loss_mask),
            lexical_diversity=lexical_diversity(assistant), loss=loss if loss is not None else computed.get(i),
            category=meta.get("category") if isinstance(meta.get("category"), str) else None, words=words))
    return metrics


def _summary(metrics: Sequence[DialogMetrics]) -> dict[str, float]:
    if not metrics:
        return {}
    losses = [m.loss for m in metrics if m.loss is not None]
    out = {"dialogs": float(len(metrics)), "tokens": float(sum(m.token_length for m in metrics)),
           "trained_tokens": float(sum(m.trained_tokens for m in metrics)),
           "lexical_diversity": statistics.fmean(m.lexical_diversity for m in metrics),
           "distinct_words": float(len(frozenset().union(*(m.words for m in metrics))))}
    if losses:
        out["loss"] = statistics.fmean(losses)
    return out


def _render(renderer: ChatRenderer, row: dict[str, Any], n: int) -> Sample:
    sample = conversation_sample(renderer, parse_conversation(row), n)
    sample.group_id = sample.task_id = f"replay-{n}"
    return sample
