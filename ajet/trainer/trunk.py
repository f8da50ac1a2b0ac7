"""The frozen trunk: the decoder layers below the lowest adapted one, run once per SFT row and reused.

With `model.lora.layers: N` only the last N decoder layers carry adapters. Everything under them (the
embeddings and the first L - N layers: the trunk) is frozen, so its output for a token sequence is the
same at every step. A training step's backward pass already stops at the lowest adapted layer (nothing
below needs a gradient); SFT, which visits every row `sft.epochs` times, can also skip the trunk's
forward pass after a row's first visit: `TrunkCache` keeps each row's trunk output and the trainer then
runs only the top N layers, forward and backward, on it.

How: a transformers decoder runs as two halves by swapping its list of layers for one part of it. The
bottom half (layers [0, k), its final norm left out) gives the trunk output of input ids; the top half
(layers [k, L)) takes that output as `inputs_embeds`, with a KV cache that numbers its layers from k,
so the shared-prefix pass of `ajet.trainer.logprobs` works on it unchanged. The first time, `check`
compares the split computation with the whole one on real rows; a model the split does not fit (one
that scales its input embeddings, say) is run whole from then on, with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from transformers import DynamicCache

# A decoder's final norm goes by one of these names (Llama, Qwen, Mistral, Gemma: norm; Phi: final_layernorm;
# GPT-2 style: ln_f). A decoder without one is run whole.
_FINAL_NORMS = ("norm", "final_layernorm", "ln_f")
HiddenStates = Callable[..., torch.Tensor]  # ajet.trainer.logprobs._hidden_states


class _OffsetCache(DynamicCache):
    """A DynamicCache for decoder layers from `offset` on, which update it under their own layer numbers."""

    def __init__(self, offset: int):
        super().__init__()
        self.offset = offset

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return super().update(key_states, value_states, layer_idx - self.offset, *args, **kwargs)


class TrunkCache:
    """Trunk outputs of the rows seen so far, up to `max_bytes`, for one decoder whose layers below `split`
    are frozen. `usable` is False when there is no frozen trunk or the split failed its check."""

    def __init__(self, decoder: nn.Module, max_bytes: int):
        self.decoder = decoder
        self.max_bytes = max_bytes
        self.rows: dict[tuple[int, ...], torch.Tensor] = {}  # token ids -> (T, H) trunk output
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.checked = False
        self._layers_attr, self._norm_attr, self.split = _layout(decoder)
        self.usable = self.split > 0
        top = {id(p) for block in list(self._blocks())[self.split:] for p in block.parameters()}
        self._trunk_params = [p for p in decoder.parameters() if id(p) not in top]  # embeddings, layers below
        self._signature = self._weights_signature()

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, min_shared_prefix: int,
                      run: HiddenStates) -> torch.Tensor:
        """Last hidden states (B, T, H) of the whole decoder, the trunk part taken from (or put in) the cache.
        `run(decoder, input_ids, attention_mask, min_shared_prefix, embeds=..., new_cache=...)` is the
        plain computation (shared-prefix aware)."""
        if self._weights_signature() != self._signature:  # someone changed the frozen weights: start over
            self.clear()
            self._signature = self._weights_signature()
        embeds = self._trunk_outputs(input_ids, attention_mask, min_shared_prefix, run)  # (B, T, H)
        with self._view(self.split, None):
            return run(self.decoder, input_ids, attention_mask, min_shared_prefix, embeds=embeds,
                       new_cache=lambda: _OffsetCache(self.split))

    def check(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, min_shared_prefix: int,
              run: HiddenStates) -> bool:
        """Compare the split computation with the whole one on two of these rows (no cache kept); remember
        and return whether it is usable. Differences come from float rounding only, so the bound is loose
        for a reduced-precision autocast and tight in float32."""
        self.checked = True
        if not self.usable:
            return False
        # two rows exercise the shared-prefix pass as well; fewer columns keep the check cheap
        input_ids, attention_mask = input_ids[:2], attention_mask[:2]
        width = int(attention_mask.sum(dim=1).max())
        input_ids, attention_mask = input_ids[:, :width], attention_mask[:, :width]
        with torch.no_grad():
            whole = run(self.decoder, input_ids, attention_mask, min_shared_prefix)
            saved, self.max_bytes = self.max_bytes, 0
            try:
                split = self.hidden_states(input_ids, attention_mask, min_shared_prefix, run)
            except Exception as exc:  # noqa: BLE001 - any failure of the swap means: run whole
                split, error = None, exc
            finally:
                self.max_bytes = saved
                self.clear()
        real = attention_mask.bool()
        if split is not None:
            scale = float(whole[real].abs().max()) or 1.0
            diff = float((split[real].float() - whole[real].float()).abs().max())
            tolerance = 1e-3 if whole.dtype == torch.float32 and not torch.is_autocast_enabled(whole.device.type) else 5e-2
            if diff <= tolerance * scale:
                return True
            error = f"the split result differs from the whole one by {diff:.3g} (scale {scale:.3g})"
        self.usable = False
        warnings.warn(f"model.lora.layers: this model's frozen layers cannot be run apart ({error}); every "
                      "step runs the whole decoder (still without gradients below the adapted layers)", stacklevel=2)
        return False

    def clear(self) -> None:
        self.rows.clear()
        self.bytes = 0

    # ------------------------------------------------------------------ internals
    def _trunk_outputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, min_shared_prefix: int,
                       run: HiddenStates) -> torch.Tensor:
        lengths = attention_mask.sum(dim=1).tolist()
        keys = [tuple(input_ids[r, :n].tolist()) for r, n in enumerate(lengths)]
        missing = [r for r, key in enumerate(keys) if key not in self.rows]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        fresh: dict[int, torch.Tensor] = {}
        if missing:
            index = torch.tensor(missing, device=input_ids.device)
            width = max(lengths[r] for r in missing)
            with torch.no_grad(), self._view(0, self.split):
                out = run(self.decoder, input_ids[index, :width], attention_mask[index, :width], min_shared_prefix)
            for j, r in enumerate(missing):
                fresh[r] = out[j, :lengths[r]]
                self._keep(keys[r], fresh[r])
        first = fresh[missing[0]] if missing else self.rows[keys[0]]
        embeds = torch.zeros((*input_ids.shape, first.shape[-1]), dtype=first.dtype, device=first.device)  # (B, T, H)
        for r, key in enumerate(keys):
            embeds[r, :lengths[r]] = fresh[r] if r in fresh else self.rows[key]
        return embeds

    def _keep(self, key: tuple[int, ...], value: torch.Tensor) -> None:
        size = value.numel() * value.element_size()
        if self.bytes + size <= self.max_bytes:  # no eviction: SFT revisits every row equally often
            self.rows[key] = value.detach().clone()
            self.bytes += size

    def _blocks(self) -> nn.ModuleList:
        return getattr(self.decoder, self._layers_attr)

    def _weights_signature(self) -> int:
        return sum(p._version for p in self._trunk_params)

    @contextmanager
    def _view(self, start: int, stop: int | None) -> Iterator[None]:
        """The decoder with only layers [start, stop); below the top (stop given), without its final norm."""
        blocks = self._blocks()
        self.decoder._modules[self._layers_attr] = nn.ModuleList(list(blocks)[start:stop])
        norm = self.decoder._modules.get(self._norm_attr) if stop is not None else None
        if norm is not None:
            self.decoder._modules[self._norm_attr] = nn.Identity()
        try:
            yield
        finally:
            self.decoder._modules[self._layers_attr] = blocks
            if norm is not None:
                self.decoder._modules[self._norm_attr] = norm


def _layout(decoder: nn.Module) -> tuple[str, str, int]:
    """(the attribute holding the decoder's layers, its final norm's, the index of the lowest layer with a
    trainable parameter); the index is 0 (no trunk) when the decoder does not fit the split."""
    config = decoder.config.get_text_config() if hasattr(decoder.config, "get_text_config") else decoder.config
    count = getattr(config, "num_hidden_layers", None)
    layers = next((name for name, m in decoder.named_children() if isinstance(m, nn.ModuleList) and len(m) == count), None)
    norm = next((name for name in _FINAL_NORMS if isinstance(getattr(decoder, name, None), nn.Module)), None)
    if layers is None or norm is None:
        return layers or "", norm or "", 0
    if any(p.requires_grad for name, p in decoder.named_parameters() if not name.startswith(f"{layers}.")):
        return layers, norm, 0  # the embeddings or the final norm train: nothing below is frozen
    blocks = getattr(decoder, layers)
    trained = [i for i, block in enumerate(blocks) if any(p.requires_grad for p in block.parameters())]
    return layers, norm, trained[0] if trained else 0
