"""The torch side of the `hf` engine: one model's forward passes and the state they share.

`HFEngine` (hf.py, the asyncio side: queue, batching decisions) and `Stepper` (stepper.py, one
scheduling step on the worker thread) both work on a `ModelRunner`: the model and tokenizer, the
lock a trainer takes to update weights, the prefix KV cache, the LoRA adapters, the precision the
passes run at, and the engine's counters. It lives below both so neither imports the other.

Weights: the trainer updates `model` in place while holding `lock`, and bumps `weights_version`
after. `sync_weights()` (called at the start of every step) notices either that or any in-place
change of a parameter (torch's version counters), drops the prefix cache and advances
`weights_epoch`; rows remember the epoch they started in, and KV of older weights is never cached.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from ajet.engine.adapters import AdapterSet
from ajet.engine.kv_cache import PrefixCache
from ajet.engine.precision import StepWeights, lora_layers
from ajet.errors import EngineError, ModelError
from ajet.models import avoid_cudnn_attention, eos_token_ids

# fold_lora='auto' folds when the passes run in float32 (where the folded sum equals peft's to float
# rounding) and the folded copies take at most this much: SmolLM2-135M's 210 adapted layers are 0.42 GB in
# float32; a 1.7B model's are 6.4 GB, which should not be held twice. In bfloat16 a folded weight rounds the
# small LoRA delta into the base's 8-bit mantissa: on an H100, 26 of 32 sampled completions stayed the same
# and logprobs moved by up to 0.16, for 1.7x faster generation; `fold_lora: on` takes that trade.
FOLD_AUTO_BYTES = 2**30
# pack_weights='auto' lays the weights out for oneDNN on a CPU when the laid-out copies take at most this
# much (SmolLM2-135M's linear weights, the output head included: 0.54 GB in float32).
PACK_AUTO_BYTES = 2**31


def engine_switch(value: str) -> bool | str:
    """An `engine.fold_lora` / `engine.pack_weights` config value ('auto', 'on', 'off') as the runner takes it."""
    return {"on": True, "off": False}.get(value, "auto")


@dataclass
class EngineStats:
    """Counters of an HFEngine, for tests, benchmarks and reports."""

    requests: int = 0
    batches: int = 0  # admission groups: requests prefilled together
    forward_passes: int = 0
    prompt_tokens: int = 0
    prefilled_tokens: int = 0  # prompt tokens run through the model; the rest came from the prefix cache
    generated_tokens: int = 0
    largest_batch: int = 0  # most rows decoding together
    cancelled: int = 0  # rows dropped because their caller stopped waiting
    failed: int = 0  # requests that failed inside the engine

    @property
    def cached_tokens(self) -> int:
        return self.prompt_tokens - self.prefilled_tokens


class ModelRunner:
    """A transformers causal LM's forward passes for the hf engine (see the module docstring).

    autocast_dtype: run passes under torch.autocast to this dtype (torch dtype or its name; None: the
        weights' own). prefix_cache_mb: most memory the prefix KV cache keeps (MiB; 0: off).
    build_matcher: `(guided, tokenizer, vocab_size) -> matcher` for guided decoding (None: the default).
    fold_lora: run the model's own LoRA layers folded into their base weights (`precision.StepWeights`):
        True, False (peft's own layers), or 'auto' (in float32, when the folded copies take at most
        `FOLD_AUTO_BYTES`; otherwise, with packed weights, split: the same products as peft's, less overhead).
    pack_weights: run the Linear layers from weights laid out once for oneDNN (`packed.PackedLinear`):
        True, False, or 'auto' (on a CPU, when the copies take at most `PACK_AUTO_BYTES`).
    """

    def __init__(self, model: Any, tokenizer: Any, *, autocast_dtype: Any = None, prefix_cache_mb: float = 1024,
                 build_matcher: Callable[..., Any] | None = None, fold_lora: bool | str = "auto",
                 pack_weights: bool | str = "auto"):
        check_attention_only(model)
        avoid_cudnn_attention(next(model.parameters()).device)  # a model built by the caller, not load_causal_lm
        self.model = model
        self.tokenizer = tokenizer
        self.lock = threading.RLock()  # held while a step runs; take it to update weights
        self.stats = EngineStats()
        self.eos_ids = eos_token_ids(model, tokenizer)
        self.vocab_size = int(model.get_input_embeddings().num_embeddings)
        self.max_positions = max_positions(model)
        self.pad_id = pad_id(tokenizer, self.eos_ids)
        self.prefix_cache = PrefixCache(int(prefix_cache_mb * 2**20))
        self.adapters = AdapterSet(model)
        self.build_matcher = build_matcher
        self.weights_version = 0  # the trainer bumps it after updating weights in place
        self.weights_epoch = 0  # counts weight changes seen; rows remember it (their KV is of those weights)
        self._autocast_dtype = autocast_dtype_of(autocast_dtype)
        self.fold_lora = fold_lora
        self.pack_weights = pack_weights
        self.step_weights = self._step_weights()
        self._weights_signature: tuple[int, int] | None = None
        self._params: list[Any] | None = None  # the model's parameters, listed again after modules_changed()
        self._logits_to_keep = True  # cleared if the model's forward does not take it
        self._decoder: Any = None  # the worker thread's own tokenizer copy, for stop strings and matchers

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    @property
    def autocast_dtype(self) -> Any:
        return self._autocast_dtype

    @autocast_dtype.setter
    def autocast_dtype(self, value: Any) -> None:
        with self.lock:
            self._autocast_dtype = autocast_dtype_of(value)
            self.step_weights = self._step_weights()
            self.prefix_cache.clear()  # KV computed at another precision

    def _step_weights(self) -> StepWeights:
        import torch

        weights = next(self.model.parameters()).dtype
        cast = self._autocast_dtype if self._autocast_dtype not in (None, weights) else None
        fold, split = self.fold_lora, False
        if fold == "auto":
            layers = [layer for _, _, layer in lora_layers(self.model)]
            float32 = all(p.dtype == torch.float32 for layer in layers for p in layer.parameters())
            copies_bytes = 4 * sum(layer.get_base_layer().weight.numel() for layer in layers)
            fold = cast is None and float32 and copies_bytes <= FOLD_AUTO_BYTES
            split = not fold  # unfolded, the same products as peft's layers, run with less overhead (with pack)
        pack = self.pack_weights
        if pack == "auto":
            linears = [m for m in self.model.modules() if type(m) is torch.nn.Linear]
            copies_bytes = 4 * sum(m.weight.numel() for m in linears)
            pack = self.device.type == "cpu" and copies_bytes <= PACK_AUTO_BYTES
        return StepWeights(self.model, cast, fold_lora=bool(fold), pack=bool(pack), split_lora=split)

    def modules_changed(self) -> None:
        """Adapters were added or removed: list the parameters and the modules to swap again."""
        self._params = None
        self.step_weights.weights_changed()

    def release_caches(self) -> None:
        """Drop the prefix cache, which the coming weight update makes stale, and the step's weight copies
        (folded, cast, laid out): up to `prefix_cache_mb` of KV and a copy of every linear weight would
        otherwise sit beside the update's activations. Waits for a running step."""
        with self.lock:
            self.prefix_cache.clear()
            self.step_weights.release()

    def decoder(self) -> Any:
        """The worker thread's private tokenizer copy: a fast tokenizer used from two threads at once can
        fail ("Already borrowed") when the other thread changes its padding or truncation settings."""
        if self._decoder is None:
            self._decoder = copy.deepcopy(self.tokenizer)
        return self._decoder

    def sync_weights(self) -> None:
        """Drop the prefix cache when the weights changed: `weights_version` was bumped, or a parameter was
        modified in place (every in-place op bumps a tensor's version counter: optimizer steps, loads)."""
        if self._params is None or self.weights_version != (self._weights_signature or (None,))[0]:
            # listing a peft model's parameters walks ~1,000 modules: again only when someone announced a
            # change (the trainer's version bump, an adapter load), not at every step
            self._params = list(self.model.parameters())
            self.step_weights.weights_changed()
        signature = (self.weights_version, sum(p._version for p in self._params))
        if signature != self._weights_signature:
            if self._weights_signature is not None:
                self.prefix_cache.clear()
                self.weights_epoch += 1
            self._weights_signature = signature

    @contextmanager
    def running_mode(self, adapter: str | None) -> Iterator[None]:
        """Eval mode (dropout off; the trainer's mode is restored after), the adapter, autocast, and the
        step's weights (cast copies, LoRA folded: `precision.StepWeights`)."""
        import torch

        was_training = self.model.training
        if was_training:
            self.model.eval()
        try:
            dtype, swap = self._autocast_dtype, self.step_weights
            autocast = dtype is not None and dtype != next(self.model.parameters()).dtype
            with self.adapters.scope(adapter), \
                    torch.autocast(device_type=self.device.type, dtype=dtype) if autocast else nullcontext(), \
                    swap.swapped(fold=adapter is None, epoch=self.weights_epoch) if swap.active else nullcontext():
                yield
        finally:
            if was_training:
                self.model.train()

    def forward(self, input_ids: Any, mask: Any, positions: Any, cache: Any) -> Any:
        """Logits (B, V) float32 at the last column of input_ids (B, L), after the KV in `cache`."""
        kwargs = dict(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                      past_key_values=cache, use_cache=True)
        self.stats.forward_passes += 1
        if self._logits_to_keep:
            try:
                # Only the last position's logits: a (B, L, V) prefill tensor can be gigabytes.
                return self.model(**kwargs, logits_to_keep=1).logits[:, -1, :].float()
            except TypeError:
                self._logits_to_keep = False
        return self.model(**kwargs).logits[:, -1, :].float()


def autocast_dtype_of(value: Any) -> Any:
    """A torch dtype (or None) from a dtype, its name ('bfloat16', 'float16') or None / 'off'."""
    import torch

    if value is None or value == "off":
        return None
    if isinstance(value, torch.dtype):
        return value
    table = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": None}
    if value not in table:
        raise EngineError(f"autocast_dtype {value!r} is not one of bfloat16, float16, float32, off")
    return table[value]


def check_attention_only(model: Any) -> None:
    """The engine's KV layout (batch.py) holds keys and values per token: models whose layers keep other
    state (linear attention, convolutions, indexed attention) are refused up front."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    kinds = set(getattr(config, "layer_types", None) or ["full_attention"])
    other = kinds - {"full_attention", "sliding_attention", "chunked_attention"}
    if other:
        raise ModelError(f"the hf engine runs attention-only models; this one has {sorted(other)} layers: "
                         "serve it with vLLM (engine.type: remote)")


def pad_id(tokenizer: Any, eos_ids: set[int]) -> int:
    """The token id put in padded positions."""
    pad = getattr(tokenizer, "pad_token_id", None)
    if isinstance(pad, int):
        return pad
    return min(eos_ids) if eos_ids else 0  # any id works: padded positions are masked out


def max_positions(model: Any) -> int | None:
    """The model's context length (prompt + completion), when its config says."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None
