"""The prefix KV cache of the hf engine: attention keys/values of token prefixes already computed.

A radix tree per namespace (one per LoRA adapter: the same tokens give different KV under another
adapter). Each edge holds a run of tokens and, per layer, their keys and values `(H, n, D)`. A
lookup walks the tree along a prompt and returns the longest cached prefix (it may end inside an
edge: the KV of a prefix depends on the prefix alone, so part of an edge is as good as all of it).
An insert walks the same way and stores only the tokens not yet in the tree, splitting an edge
where a new sequence parts from it (as SGLang's radix attention does).

What is kept is bounded by bytes. When an insert goes over the budget, the least recently used
leaves go first (a leaf's parent is touched whenever the leaf is, so parents outlive their
children and the shared system prompt outlives each episode's tail; vLLM's automatic prefix
caching likewise frees the end of the least recently used prefix first). Lookups copy what they
return, so evicting never pulls KV from under a running request.

Everything here runs on the engine's worker thread, under the engine lock: no locking of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

LayerKV = list[tuple[Any, Any]]  # per layer (keys, values), each (H, n, D)


@dataclass(eq=False)
class _Node:
    tokens: tuple[int, ...]  # the edge from the parent
    kv: LayerKV
    parent: _Node | None
    children: dict[int, _Node] = field(default_factory=dict)
    last_used: int = 0
    nbytes: int = 0


@dataclass
class PrefixMatch:
    """The longest cached prefix of a sequence: `length` tokens, held by `pieces` (node, tokens used)."""

    length: int = 0
    pieces: list[tuple[_Node, int]] = field(default_factory=list)


@dataclass
class PrefixCacheStats:
    lookups: int = 0
    hit_tokens: int = 0  # tokens served from the cache
    inserted_tokens: int = 0
    evicted_tokens: int = 0
    clears: int = 0


class PrefixCache:
    """Radix tree of computed prefixes, bounded to `max_bytes` of keys and values."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max(0, int(max_bytes))
        self.nbytes = 0
        self.tokens = 0
        self.stats = PrefixCacheStats()
        self._roots: dict[str, _Node] = {}
        self._clock = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def match(self, namespace: str, tokens: Sequence[int]) -> PrefixMatch:
        """The longest prefix of `tokens` in the cache (marks it used)."""
        found = PrefixMatch()
        node = self._roots.get(namespace)
        if node is None or not self.enabled:
            return found
        self.stats.lookups += 1
        i = 0
        while i < len(tokens):
            child = node.children.get(tokens[i])
            if child is None:
                break
            n = _common_length(child.tokens, tokens, i)
            found.pieces.append((child, n))
            i += n
            if n < len(child.tokens):
                break
            node = child
        found.length = i
        if found.pieces:
            self._touch(found.pieces[-1][0])
        self.stats.hit_tokens += i
        return found

    def stacked(self, matches: list[PrefixMatch], width: int, spare: int = 0) -> LayerKV:
        """Per layer (b, H, width + spare, D) buffers holding match r's prefix in row r, right-aligned in the
        first `width` columns; zeros elsewhere. Copied straight from the tree, once."""
        template = next(m for m in matches if m.length).pieces[0][0].kv
        out = [(k.new_zeros((len(matches), k.shape[0], width + spare, k.shape[2])),
                v.new_zeros((len(matches), v.shape[0], width + spare, v.shape[2]))) for k, v in template]
        for r, found in enumerate(matches):
            position = width - found.length
            for node, n in found.pieces:
                for (keys, values), (k, v) in zip(out, node.kv):
                    keys[r, :, position:position + n] = k[:, :n]
                    values[r, :, position:position + n] = v[:, :n]
                position += n
        return out

    def insert(self, namespace: str, tokens: Sequence[int], kv_of: Callable[[int, int], LayerKV]) -> int:
        """Store `tokens`, taking the KV of the part not yet cached from `kv_of(start, end)` (per layer
        `(H, end - start, D)`; copied here). Returns the number of tokens added."""
        if not self.enabled or not tokens:
            return 0
        node = self._roots.setdefault(namespace, _Node((), [], None))
        i = 0
        while i < len(tokens):
            child = node.children.get(tokens[i])
            if child is None:
                return self._add_leaf(node, tokens, i, kv_of)
            n = _common_length(child.tokens, tokens, i)
            if n < len(child.tokens):
                child = self._split(child, n)
            i += n
            node = child
        self._touch(node)
        return 0

    def clear(self, namespace: str | None = None) -> None:
        """Forget every prefix (of one namespace, or all): the weights they were computed with changed."""
        names = list(self._roots) if namespace is None else [namespace]
        for name in names:
            root = self._roots.pop(name, None)
            if root is not None:
                for node in _walk(root):
                    self.nbytes -= node.nbytes
                    self.tokens -= len(node.tokens)
        self.stats.clears += 1

    # ------------------------------------------------------------------ internals
    def _add_leaf(self, parent: _Node, tokens: Sequence[int], start: int, kv_of: Callable[[int, int], LayerKV]) -> int:
        added = len(tokens) - start
        kv = [(k.clone(), v.clone()) for k, v in kv_of(start, len(tokens))]  # own storage, not a view of a batch
        nbytes = sum(k.nbytes + v.nbytes for k, v in kv)
        if nbytes > self.max_bytes:
            return 0  # would evict everything, itself included
        leaf = _Node(tuple(tokens[start:]), kv, parent, nbytes=nbytes)
        parent.children[tokens[start]] = leaf
        self._touch(leaf)
        self.nbytes += nbytes
        self.tokens += added
        self.stats.inserted_tokens += added
        self._evict()
        return added

    def _split(self, node: _Node, n: int) -> _Node:
        """Cut `node`'s edge after `n` tokens; return the new upper node (the old one hangs below it)."""
        upper_kv = [(k[:, :n].clone(), v[:, :n].clone()) for k, v in node.kv]
        lower_kv = [(k[:, n:].clone(), v[:, n:].clone()) for k, v in node.kv]
        upper = _Node(node.tokens[:n], upper_kv, node.parent, last_used=node.last_used,
                      nbytes=sum(k.nbytes + v.nbytes for k, v in upper_kv))
        assert node.parent is not None  # the root is never split: its edge is empty
        node.parent.children[node.tokens[0]] = upper
        node.tokens, node.kv, node.parent = node.tokens[n:], lower_kv, upper
        node.nbytes -= upper.nbytes
        upper.children[node.tokens[0]] = node
        return upper

    def _touch(self, node: _Node | None) -> None:
        self._clock += 1
        while node is not None:
            node.last_used = self._clock
            node = node.parent

    def _evict(self) -> None:
        while self.nbytes > self.max_bytes:
            leaves = [n for root in self._roots.values() for n in _walk(root)
                      if not n.children and n.parent is not None]
            if not leaves:
                return
            victim = min(leaves, key=lambda n: n.last_used)
            assert victim.parent is not None
            del victim.parent.children[victim.tokens[0]]
            self.nbytes -= victim.nbytes
            self.tokens -= len(victim.tokens)
            self.stats.evicted_tokens += len(victim.tokens)


def _common_length(edge: tuple[int, ...], tokens: Sequence[int], start: int) -> int:
    n = 0
    limit = min(len(edge), len(tokens) - start)
    while n < limit and edge[n] == tokens[start + n]:
        n += 1
    return n


def _walk(root: _Node):
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children.values())
