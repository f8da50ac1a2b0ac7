"""BM25 (Okapi) over each tool's text: the lexical baseline, pure Python, no dependencies."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from ajet.retrieval.base import Retriever, check_tools, tool_text, words


class BM25Retriever(Retriever):
    """Okapi BM25 with the usual k1=1.5, b=0.75; idf = ln(1 + (N - df + 0.5) / (df + 0.5)), never negative."""

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.names: list[str] = []

    def index(self, tools: list[dict[str, Any]]) -> None:
        self.names = check_tools(tools)
        docs = [words(tool_text(t)) for t in tools]
        self._lengths = [len(d) for d in docs]
        self._avg = sum(self._lengths) / len(docs) or 1.0
        # word -> [(doc index, term frequency)]: a query touches only the tools sharing its words
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for i, doc in enumerate(docs):
            for word, tf in Counter(doc).items():
                self._postings.setdefault(word, []).append((i, tf))
        n = len(docs)
        self._idf = {w: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for w, p in self._postings.items()}

    def scores(self, query: str) -> list[float]:
        out = [0.0] * len(self.names)
        for word in set(words(query)):
            idf = self._idf.get(word)
            if idf is None:
                continue
            for i, tf in self._postings[word]:
                norm = tf + self.k1 * (1 - self.b + self.b * self._lengths[i] / self._avg)
                out[i] += idf * tf * (self.k1 + 1) / norm
        return out
