"""PrefixCache on hand-built KV: longest-prefix lookup, edge splits, LRU eviction within the byte budget."""

from __future__ import annotations

import torch

from ajet.engine.kv_cache import PrefixCache

LAYERS, HEADS, DIM = 2, 1, 2
BYTES_PER_TOKEN = LAYERS * 2 * HEADS * DIM * 4  # keys + values, float32: 32 bytes


def kv_source(tokens: list[int]):
    """kv_of(start, end) whose keys at a position hold that position's token id (values: minus it)."""
    def kv_of(start: int, end: int):
        ids = torch.tensor(tokens[start:end], dtype=torch.float32)
        keys = ids[None, :, None].expand(HEADS, end - start, DIM)  # (H, n, D)
        return [(keys + layer, -keys - layer) for layer in range(LAYERS)]
    return kv_of


def insert(cache: PrefixCache, tokens: list[int], namespace: str = "") -> int:
    return cache.insert(namespace, tokens, kv_source(tokens))


def cached_ids(cache: PrefixCache, tokens: list[int], namespace: str = "") -> list[int]:
    """The token ids the gathered keys of the longest match hold (layer 0)."""
    found = cache.match(namespace, tokens)
    if not found.length:
        return []
    keys, values = cache.stacked([found], found.length)[1]  # (1, H, n, D)
    assert torch.equal(values, -keys)
    return (keys[0, 0, :, 0] - 1).long().tolist()


def test_longest_prefix_is_found_and_gathered_even_inside_an_edge():
    cache = PrefixCache(max_bytes=10**6)
    assert insert(cache, [1, 2, 3, 4, 5]) == 5
    assert cached_ids(cache, [1, 2, 3, 9]) == [1, 2, 3]  # ends inside the edge 1..5
    assert cached_ids(cache, [1, 2, 3, 4, 5, 6, 7]) == [1, 2, 3, 4, 5]
    assert cached_ids(cache, [7, 1, 2]) == []
    assert cache.match("other adapter", [1, 2, 3]).length == 0  # namespaces are separate trees


def test_insert_splits_an_edge_and_stores_only_new_tokens():
    cache = PrefixCache(max_bytes=10**6)
    insert(cache, [1, 2, 3, 4])
    assert insert(cache, [1, 2, 7, 8, 9]) == 3  # 1, 2 were there
    assert insert(cache, [1, 2, 3]) == 0  # already held, inside the split edge
    assert cache.tokens == 7 and cache.nbytes == 7 * BYTES_PER_TOKEN
    assert cached_ids(cache, [1, 2, 3, 4, 0]) == [1, 2, 3, 4]
    assert cached_ids(cache, [1, 2, 7, 8, 9, 10]) == [1, 2, 7, 8, 9]
    assert cached_ids(cache, [1, 2, 5]) == [1, 2]


def test_least_recently_used_leaves_go_first_and_shared_parents_stay():
    cache = PrefixCache(max_bytes=12 * BYTES_PER_TOKEN)
    system = [100, 101, 102, 103]
    insert(cache, system + [1, 1, 1])  # episode a
    insert(cache, system + [2, 2, 2])  # episode b
    cache.match("", system + [1, 1, 1, 5])  # a's next turn looked it up: b is now the least recent
    insert(cache, system + [3, 3, 3])  # 4 + 3 * 3 = 13 tokens > 12: one leaf must go
    assert cache.tokens == 10 and cache.stats.evicted_tokens == 3
    assert cached_ids(cache, system + [2, 2, 2]) == system  # b's tail went; the shared system prompt stayed
    assert cached_ids(cache, system + [1, 1, 1]) == system + [1, 1, 1]
    assert cached_ids(cache, system + [3, 3, 3]) == system + [3, 3, 3]
    assert cache.nbytes <= cache.max_bytes


def test_a_sequence_larger_than_the_budget_is_not_kept_and_nothing_is_evicted_for_it():
    cache = PrefixCache(max_bytes=4 * BYTES_PER_TOKEN)
    insert(cache, [1, 2, 3])
    assert insert(cache, [9] * 5) == 0
    assert cached_ids(cache, [1, 2, 3]) == [1, 2, 3]


def test_clear_and_a_zero_budget():
    cache = PrefixCache(max_bytes=10**6)
    insert(cache, [1, 2], "a")
    insert(cache, [1, 2], "b")
    cache.clear("a")
    assert cache.match("a", [1, 2]).length == 0 and cache.match("b", [1, 2]).length == 2
    cache.clear()
    assert cache.tokens == 0 and cache.nbytes == 0 and cache.match("b", [1, 2]).length == 0
    off = PrefixCache(max_bytes=0)
    assert not off.enabled and insert(off, [1, 2]) == 0 and off.match("", [1, 2]).length == 0


def test_stored_kv_is_a_copy_not_a_view_of_the_source():
    cache = PrefixCache(max_bytes=10**6)
    source = torch.arange(6, dtype=torch.float32).reshape(1, 3, 2)  # (H, n, D), the "batch" KV
    cache.insert("", [1, 2, 3], lambda s, e: [(source[:, s:e], source[:, s:e])])
    source.zero_()  # the batch buffer is reused
    keys, _ = cache.stacked([cache.match("", [1, 2, 3])], 3)[0]
    assert keys.flatten().tolist() == [0, 1, 2, 3, 4, 5]


def test_stacked_rows_are_right_aligned_with_zeros_before_and_spare_after():
    cache = PrefixCache(max_bytes=10**6)
    insert(cache, [1, 2, 3, 4])
    insert(cache, [1, 2, 7])
    found = [cache.match("", [1, 2, 3, 4]), cache.match("", [1, 2, 7, 9]), cache.match("", [5])]
    keys, _ = cache.stacked(found, width=4, spare=2)[0]  # layer 0: keys hold the token ids
    assert keys.shape == (3, HEADS, 6, DIM)
    assert keys[:, 0, :, 0].tolist() == [[1, 2, 3, 4, 0, 0], [0, 1, 2, 7, 0, 0], [0, 0, 0, 0, 0, 0]]
