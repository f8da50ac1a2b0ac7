"""The running batch of the hf engine: the rows being decoded together and their batched KV.

Rows are right-aligned: every row's tokens end at the last column of the KV, and a row shorter
than the longest one is left-padded (masked out in `mask`). Each decode step appends one column
for all rows. New rows (already prefilled) join by left-padding whichever side is shorter;
finished or cancelled rows leave, and leading columns that only pads still use are cut then.

Keys and values grow in place (`_GrowingLayer`): transformers' DynamicCache concatenates the
whole cache with each new token, which at 16 rows x 1,000 tokens was a third of a CPU decode step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer

from ajet.engine.base import FinishReason

LayerKV = list[tuple[Any, Any]]  # per layer (keys, values)


class _GrowingLayer(DynamicLayer):
    """A DynamicLayer that appends into spare room, growing it by a quarter when full, instead of re-concatenating."""

    def fill(self, keys: Any, values: Any, spare: int = 0) -> None:
        """Hold a copy of `keys`/`values` (B, H, T, D) with room for `spare` more columns."""
        import torch

        batch, heads, length, dim = keys.shape
        key_buf = torch.empty((batch, heads, length + spare, dim), dtype=keys.dtype, device=keys.device)
        value_buf = torch.empty((batch, heads, length + spare, dim), dtype=values.dtype, device=values.device)
        key_buf[:, :, :length] = keys
        value_buf[:, :, :length] = values
        self.adopt(key_buf, value_buf, length)

    def adopt(self, key_buf: Any, value_buf: Any, length: int) -> None:
        """Use these (B, H, T_max, D) buffers, whose first `length` columns hold the cache, without copying."""
        self._keys, self._values, self._length = key_buf, value_buf, length
        self.dtype, self.device, self.is_initialized = key_buf.dtype, key_buf.device, True
        self._view()

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        new = key_states.shape[-2]
        if not self.is_initialized:
            self.fill(key_states, value_states)
            return self.keys, self.values
        if self._length + new > self._keys.shape[-2]:
            old_k, old_v = self.keys, self.values
            self.fill(old_k, old_v, spare=max(64, self._length // 4, new))
        self._keys[:, :, self._length:self._length + new] = key_states
        self._values[:, :, self._length:self._length + new] = value_states
        self._length += new
        self._view()
        return self.keys, self.values

    def _view(self) -> None:
        self.keys = self._keys[:, :, :self._length]  # (B, H, T, D), a view of the buffer
        self.values = self._values[:, :, :self._length]


class BatchCache(DynamicCache):
    """A DynamicCache of `_GrowingLayer`s, optionally starting from given keys/values (per layer (B, H, T, D))."""

    def __init__(self, past: LayerKV | None = None, spare: int = 0, length: int | None = None):
        """past: per layer (B, H, T, D) keys/values, copied with room for `spare` more columns; or, with
        `length`, buffers adopted as they are (their first `length` columns hold the cache)."""
        if not past:
            Cache.__init__(self, layer_class_to_replicate=_GrowingLayer)
            return
        layers = []
        for keys, values in past:
            layer = _GrowingLayer()
            if length is None:
                layer.fill(keys, values, spare)
            else:
                layer.adopt(keys, values, length)
            layers.append(layer)
        Cache.__init__(self, layers=layers)

    def tensors(self) -> LayerKV:
        return [(layer.keys, layer.values) for layer in self.layers]


@dataclass
class Row:
    """Decoding state of one request."""

    request: Any  # the engine's _Request
    max_tokens: int
    stop_ids: frozenset[int]
    version: int  # the engine's weights epoch when the row was prefilled (its KV is of those weights)
    generator: Any = None  # torch.Generator when sampling
    matcher: Any = None  # constrained decoding (SamplingParams.guided)
    window: int = 0  # tokens decoded to look for stop strings
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: FinishReason | None = None

    @property
    def prompt_ids(self) -> list[int]:
        return self.request.prompt_ids

    def computed_ids(self) -> list[int]:
        """The tokens whose KV exists: the prompt and every generated token but the last (not yet fed)."""
        return self.prompt_ids + self.token_ids[:-1]


class RunningBatch:
    """Rows decoding together, with their right-aligned KV (`cache`), `mask` (B, T) and next positions (B, 1)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.cache: BatchCache | None = None
        self.mask: Any = None  # (B, T) long: 1 where a row has a token
        self.positions: Any = None  # (B, 1) long: the position of each row's next input token
        self.adapter: str | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, rows: list[Row], kv: LayerKV, mask: Any) -> None:
        """Append prefilled rows: `kv` per layer (b, H, T2, D), `mask` (b, T2), both right-aligned."""
        import torch

        positions = mask.sum(dim=1, keepdim=True)  # (b, 1): a row of n tokens feeds position n next
        if not self.rows:
            self.rows, self.mask, self.positions = list(rows), mask, positions
            self.cache = BatchCache(kv, spare=max(64, mask.shape[1] // 4))
            return
        assert self.cache is not None
        old = self.cache.tensors()
        width = max(self.mask.shape[1], mask.shape[1])
        spare = max(64, width // 4)
        merged = [(_stack_right(k0, k1, width, spare), _stack_right(v0, v1, width, spare))
                  for (k0, v0), (k1, v1) in zip(old, kv)]
        self.mask = _stack_right(self.mask, mask, width)
        self.positions = torch.cat([self.positions, positions])
        self.rows += rows
        self.cache = BatchCache(merged, length=width)

    def keep(self, indices: list[int]) -> None:
        """Keep only these rows; cut leading columns no kept row uses."""
        import torch

        if not indices:
            self.rows, self.cache, self.mask, self.positions = [], None, None, None
            return
        assert self.cache is not None
        index = torch.tensor(indices, dtype=torch.long, device=self.mask.device)
        mask = self.mask[index]  # (b, T)
        start = int((mask.sum(dim=0) > 0).nonzero()[0, 0])  # first column some kept row uses
        kv = [(k[index, :, start:], v[index, :, start:]) for k, v in self.cache.tensors()]  # copies
        self.rows = [self.rows[i] for i in indices]
        self.mask, self.positions = mask[:, start:], self.positions[index]
        self.cache = BatchCache(kv, length=self.mask.shape[1])  # grows (one more copy) when next fed

    def row_kv(self, i: int, start: int, end: int) -> LayerKV:
        """Per layer (H, end - start, D): the KV of tokens start..end-1 of row i's computed tokens."""
        assert self.cache is not None
        computed = int(self.mask[i].sum())
        offset = self.mask.shape[1] - computed  # where row i's first token sits
        return [(k[i, :, offset + start:offset + end], v[i, :, offset + start:offset + end])
                for k, v in self.cache.tensors()]

    def step_inputs(self, device: Any) -> tuple[Any, Any, Any]:
        """input_ids (B, 1) of each row's last sampled token, the mask grown by that column, positions (B, 1)."""
        import torch

        ids = torch.tensor([[row.token_ids[-1]] for row in self.rows], dtype=torch.long, device=device)
        self.mask = torch.cat([self.mask, self.mask.new_ones((len(self.rows), 1))], dim=1)
        positions = self.positions
        self.positions = positions + 1
        return ids, self.mask, positions


def _stack_right(a: Any, b: Any, width: int, spare: int = 0) -> Any:
    """Rows of `a` then rows of `b` (dim 0), each right-aligned in `width` columns of the sequence dim
    (dim 1 of a (B, T) mask, dim 2 of (B, H, T, D) keys/values), zeros on the left; `spare` free
    columns after them."""
    import torch

    seq_dim = 1 if a.dim() == 2 else 2
    shape = list(a.shape)
    shape[0] = a.shape[0] + b.shape[0]
    shape[seq_dim] = width + spare
    out = torch.zeros(shape, dtype=a.dtype, device=a.device)
    if seq_dim == 1:
        out[:a.shape[0], width - a.shape[1]:width] = a
        out[a.shape[0]:, width - b.shape[1]:width] = b
    else:
        out[:a.shape[0], :, width - a.shape[2]:width] = a
        out[a.shape[0]:, :, width - b.shape[2]:width] = b
    return out
