"""SFT data curation (seed 002): per-dialog metrics, coreset selection, task weights and a replay buffer.

Pure selection functions over plain numbers and words, so each strategy is checked by hand
(tests/unit/test_curation.py); the only model-dependent input is the per-dialog loss, which
`dialog_losses` computes with the policy (or a row's own `metadata.loss` gives).

    loss_topk  the highest-loss dialogs first: what the model gets most wrong (difficulty proxy)
    diversity  greedy k-center on word sets: each pick is the dialog farthest (Jaccard distance) from
               every dialog already picked, so near-duplicate demonstrations are taken once
    hybrid     half by loss_topk, the rest by diversity around those
    random     a seeded sample
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Strategy = Literal["loss_topk", "diversity", "hybrid", "random"]
_WORD = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")


@dataclass
class DialogMetrics:
    """What curation knows of one SFT row."""

    index: int
    token_length: int
    trained_tokens: int
    lexical_diversity: float  # distinct words / words of the assistant turns (1.0: none repeated)
    loss: float | None  # mean NLL per trained token: the model's difficulty with it
    category: str | None  # metadata.category, for task weights
    words: frozenset[str] = field(repr=False, default=frozenset())  # every word of the dialog


def words_of(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def lexical_diversity(text: str) -> float:
    words = words_of(text)
    return len(set(words)) / len(words) if words else 0.0


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def conversation_words(messages: Sequence[dict[str, Any]]) -> tuple[frozenset[str], str]:
    """(every word of the dialog, the assistant turns' text including their tool calls)."""
    every, assistant = [], []
    for message in messages:
        text = _text(message.get("content"))
        calls = message.get("tool_calls") or []
        if calls:
            text += " " + json.dumps(calls, ensure_ascii=False, sort_keys=True)
        every.append(text)
        if message.get("role") == "assistant":
            assistant.append(text)
    return frozenset(words_of(" ".join(every))), " ".join(assistant)


def jaccard_distance(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return 1.0 - len(a & b) / union if union else 0.0


def select_coreset(metrics: Sequence[DialogMetrics], strategy: Strategy, target_size: int,
                   seed: int = 0) -> list[int]:
    """Indices (into `metrics`, in selection order) of at most `target_size` dialogs."""
    k = min(target_size, len(metrics))
    if k <= 0:
        return []
    if strategy == "random":
        return random.Random(seed).sample(range(len(metrics)), k)
    if strategy in ("loss_topk", "hybrid") and any(m.loss is None for m in metrics):
        raise ValueError(f"coreset strategy {strategy!r} needs a loss for every dialog")
    by_loss = sorted(range(len(metrics)), key=lambda i: (-(metrics[i].loss or 0.0), i))
    if strategy == "loss_topk":
        return by_loss[:k]
    if strategy == "diversity":
        return _k_center(metrics, [], k)
    if strategy == "hybrid":
        return _k_center(metrics, by_loss[:math.ceil(k / 2)], k)
    raise ValueError(f"unknown coreset strategy {strategy!r} (loss_topk, diversity, hybrid, random)")


def _k_center(metrics: Sequence[DialogMetrics], start: list[int], k: int) -> list[int]:
    """Greedy farthest-point picks until `k`; with no start, the most lexically diverse dialog first."""
    chosen = list(start)
    if not chosen:
        chosen.append(max(range(len(metrics)), key=lambda i: (metrics[i].lexical_diversity, -i)))
    # distance of every dialog to its nearest chosen one, updated as picks are added
    nearest = [min(jaccard_distance(m.words, metrics[c].words) for c in chosen) for m in metrics]
    for c in chosen:
        nearest[c] = -1.0
    while len(chosen) < k:
        pick = max(range(len(metrics)), key=lambda i: (nearest[i], -i))
        chosen.append(pick)
        nearest[pick] = -1.0
        for i, m in enumerate(metrics):
            if nearest[i] >= 0:
                nearest[i] = min(nearest[i], jaccard_distance(m.words, metrics[pick].words))
    return chosen


def weighted_mix(categories: Sequence[str | None], weights: dict[str, float], size: int,
                 seed: int = 0) -> tuple[list[int], dict[str, int]]:
    """`size` row indices drawn by category shares: category c gets round(size * w_c / sum w) rows,
    its own rows first in a seeded order, repeated when its share is larger than its rows. Rows whose
    category has no weight are left out. Returns (indices, rows taken per category)."""
    total = sum(w for w in weights.values() if w > 0)
    if total <= 0:
        raise ValueError("task_weights: give at least one category a positive weight")
    rng = random.Random(seed)
    picked: list[int] = []
    taken: dict[str, int] = {}
    for category, weight in weights.items():
        rows = [i for i, c in enumerate(categories) if c == category]
        quota = round(size * weight / total) if weight > 0 else 0
        if not rows or not quota:
            taken[category] = 0
            continue
        order = rows[:]
        rng.shuffle(order)
        picked += [order[n % len(order)] for n in range(quota)]
        taken[category] = quota
    return picked, taken


class ReplayBuffer:
    """A rehearsal buffer of SFT rows kept in a JSONL file across runs and stages (reservoir sampling
    keeps it at most `capacity` rows, every row ever added equally likely to stay)."""

    def __init__(self, path: str | Path, capacity: int) -> None:
        self.path = Path(path)
        self.capacity = capacity
        self.rows: list[dict[str, Any]] = []
        self.seen = 0
        if self.path.is_file():
            lines = self.path.read_text(encoding="utf-8").splitlines()
            if lines and lines[0].startswith('{"ajet_replay_buffer"'):
                self.seen = int(json.loads(lines[0])["ajet_replay_buffer"]["seen"])
                lines = lines[1:]
            self.rows = [json.loads(line) for line in lines if line.strip()]
            self.seen = max(self.seen, len(self.rows))

    def sample(self, n: int, seed: int = 0) -> list[dict[str, Any]]:
        """`n` rows (fewer when the buffer holds fewer), seeded."""
        return random.Random(seed).sample(self.rows, min(n, len(self.rows)))

    def add(self, rows: Sequence[dict[str, Any]], seed: int = 0) -> None:
        rng = random.Random(seed + self.seen)
        for row in rows:
            self.seen += 1
            if len(self.rows) < self.capacity:
                self.rows.append(row)
            else:
                slot = rng.randrange(self.seen)
                if slot < self.capacity:
                    self.rows[slot] = row

    def save(self) -> None:
        """Atomic write: a crash leaves the old buffer or the new one, never half of one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        header = json.dumps({"ajet_replay_buffer": {"seen": self.seen, "capacity": self.capacity}})
        tmp.write_text("\n".join([header, *(json.dumps(r, ensure_ascii=False) for r in self.rows)]) + "\n",
                       encoding="utf-8")
        tmp.replace(self.path)
