"""The weights an hf engine step runs on: copies cast to the autocast dtype, with LoRA folded in,
laid out for oneDNN on a CPU.

Three costs of running a training policy as it is in a decode step are each one copy away:

- Cast. Under `torch.autocast(dtype=bfloat16)` every `nn.Linear` casts its float32 weight to bfloat16
  on each call, and autocast's own cast cache lasts one autocast region and skips frozen weights (a
  LoRA policy's base). A decode step of SmolLM2 then moved ~0.8 GB just to cast weights, for a
  16-row matmul: a bfloat16 copy made a 16-row decode step ~40% faster on a 2-core AMX CPU.
- Fold. A peft LoRA layer runs its base matmul, then `x @ A @ B * scale` and an add: five more small
  ops in each of SmolLM2's 210 adapted layers, ~30% of a float32 decode step of 32 rows on a 2-core
  CPU (benchmarks/grpo_vs_trl.py). Its folded weight `W + scale * B @ A` (summed in float32)
  gives the same sum in one matmul, computed once per weight change instead of at every step.
- Layout. On a CPU, MKL repacks a weight for every few-row product; `packed.PackedLinear` holds it laid
  out once for oneDNN (1.3-2x faster decode linears, up to 6x for the output head; packed.py).

`StepWeights.swapped()` puts the copies in place for one engine step: an `nn.Linear` gets its copy as
its weight entry (the module's own entry only: a tied embedding keeps its float32 table, and the
trainer's Parameter objects are never touched), and a foldable LoRA layer is replaced in its parent by
a plain `nn.Linear` holding the folded weight and the base bias. With `pack`, each plain Linear is
replaced in its parent by a `PackedLinear` of the weight it would have run (cast to `dtype` when there is
one), and a folded layer's stand-in is a `PackedLinear` laid out straight from its sum, which is not
kept. All are put back after. Results
equal the unswapped computation up to float rounding: autocast would have cast the same values, and
the folded sum differs from the two-matmul one in the last bits (~1e-6 in a float32 logprob).

A copy is refreshed when a weight it derives from was modified in place since (torch's version
counters): a LoRA policy's frozen base is cast once, its folded layers after each optimizer step.
Folding applies to the model's own active adapter (engine steps with `adapter=None`); a served adapter
(`SamplingParams.adapter`) and LoRA variants (DoRA, a LoRA bias) run unfolded.

- Split (`split_lora`, with `pack`, where folding is not wanted: bf16 passes, whose folded weight would
  round the LoRA delta). A plain LoRA layer is replaced by `_SplitLora`: its base, A and B laid out for
  oneDNN, run as `base(x) + B(A(x)) * scale`, the very products and dtypes autocast gives peft's layer
  (bit for bit in the cases measured), without peft's per-call Python, adapter lookups and weight casts:
  1.3x peft's decode speed for SmolLM2 on a 2-core AMX CPU, the same tokens (benchmarks/lora_decode.py).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class _Folded:
    """One LoRA layer's stand-in: where it sits, what is put there, what its weight was built from."""

    parent: Any
    name: str
    layer: Any  # the peft LoRA layer
    linear: Any  # an nn.Linear holding the folded copy, with pack a PackedLinear laid out from it, or a _SplitLora
    built_from: tuple[int, ...] = ()  # versions of the base weight and the adapter's A and B, and the scale


class StepWeights:
    """Cast copies of a model's `nn.Linear` weights (not adapter weights) in `dtype` (None: their own dtype,
    nothing to cast), with `fold_lora` its LoRA layers folded into plain Linears, and with `pack` every
    Linear the step runs laid out for oneDNN instead (`packed.PackedLinear`)."""

    def __init__(self, model: Any, dtype: Any, *, fold_lora: bool = False, pack: bool = False,
                 split_lora: bool = False):
        """split_lora (with pack, without fold_lora): run the plain LoRA layers as `_SplitLora` stand-ins."""
        self.model = model
        self.dtype = dtype
        self.fold_lora = fold_lora
        self.split_lora = split_lora and pack and not fold_lora
        self.pack = pack
        self._linears: list[tuple[Any, str, Any]] | None = None  # (parent, name, plain Linear); None: look again
        self._folds: list[_Folded] = []
        self._copies: dict[int, tuple[Any, int, Any]] = {}  # id(module) -> (weight, its version, copy)
        self._packs: dict[int, tuple[Any, int, Any]] = {}  # id(module) -> (weight, its version, PackedLinear)
        self._entries: tuple[list[Any], list[_Folded], list[Any]] = ([], [], [])  # what the last step swapped in
        self._last_key: tuple[Any, ...] | None = None

    def weights_changed(self) -> None:
        """Look for the modules again at the next step (adapters may have been added or removed)."""
        self._linears = None
        self._last_key = None

    def release(self) -> None:
        """Drop every copy: the folded ones derive from the adapter, which the next update changes, and
        the cast and laid-out ones are made again at the next step that runs (laying out SmolLM2-135M's
        weights takes 0.24 CPU-seconds, Qwen2.5-0.5B's 1.7: a trainer's update sets the pace, not this)."""
        for f in self._folds:
            f.linear, f.built_from = None, ()
        self._copies.clear()
        self._packs.clear()
        self._entries = ([], [], [])
        self._last_key = None

    @property
    def active(self) -> bool:
        """Whether a step needs `swapped()` at all."""
        return self.dtype is not None or self.fold_lora or self.pack  # split_lora needs pack

    @contextmanager
    def swapped(self, fold: bool = True, epoch: int | None = None) -> Iterator[None]:
        """The copies in place for the block. fold=False: cast only (a served adapter is in scope).

        epoch: the caller's count of weight changes (`ModelRunner.weights_epoch`); while it and the
        adapters' state stay the same, the copies of the last step are reused without checking each one.
        """
        key = (epoch, fold, self._adapter_state())
        if epoch is None or key != self._last_key or self._linears is None:
            self._entries = self._build(fold)
            self._last_key = key
        casts, folds, packs = self._entries
        for module, _, copy in casts:
            module._parameters["weight"] = copy
        for f in folds:
            f.parent._modules[f.name] = f.linear
        for parent, name, _, packed in packs:
            parent._modules[name] = packed
        try:
            yield
        finally:
            for parent, name, module, _ in packs:
                parent._modules[name] = module
            for f in folds:
                f.parent._modules[f.name] = f.layer
            for module, weight, _ in casts:
                module._parameters["weight"] = weight

    # ------------------------------------------------------------------ internals
    def _build(self, fold: bool) -> tuple[list[tuple[Any, Any, Any]], list[_Folded], list[Any]]:
        """Refresh what changed; the (module, weight, copy) casts, the folds and the
        (parent, name, module, PackedLinear) stand-ins of one step."""
        self._scan()
        folds = [f for f in self._folds if fold and self._foldable(f.layer)
                 and (not self.split_lora or self._splittable(f.layer))]
        skip = {id(f.layer.get_base_layer()) for f in folds}  # replaced whole: their base needs no cast copy
        for f in folds:
            self._refresh_fold(f)
        packs = self._pack_entries(skip) if self.pack else []
        skip |= {id(module) for _, _, module, _ in packs}  # packed from the weight itself: no cast copy either
        casts = [] if self.dtype is None else self._cast_entries(skip)
        return casts, folds, packs

    def _adapter_state(self) -> tuple[Any, ...]:
        """What decides folding besides the weights (peft's switches), read off the first LoRA layer."""
        if not self._folds:
            return ()
        layer = self._folds[0].layer
        return tuple(layer.active_adapters), layer.disable_adapters, layer.merged

    def _scan(self) -> None:
        import torch

        if self._linears is not None:
            return
        self._linears = [(parent, name, child) for path, parent in self.model.named_modules()
                         for name, child in parent.named_children()
                         if type(child) is torch.nn.Linear and "lora_" not in f"{path}.{name}"]
        old = {id(f.layer): f for f in self._folds}
        self._folds = [old.get(id(layer)) or _Folded(parent, name, layer, None)
                       for parent, name, layer in (lora_layers(self.model) if self.fold_lora or self.split_lora else [])]
        alive = {id(m) for _, _, m in self._linears}
        self._copies = {k: v for k, v in self._copies.items() if k in alive}
        self._packs = {k: v for k, v in self._packs.items() if k in alive}

    def _cast_entries(self, skip: set[int]) -> list[tuple[Any, Any, Any]]:
        import torch

        entries = []
        for _, _, module in self._linears or []:
            if id(module) in skip:
                continue
            weight = module._parameters.get("weight")
            if weight is None or weight.dtype == self.dtype or not weight.is_floating_point():
                continue
            cached = self._copies.get(id(module))
            if cached is None or cached[0] is not weight or cached[1] != weight._version:
                with torch.no_grad():
                    cached = (weight, weight._version, weight.detach().to(self.dtype))
                self._copies[id(module)] = cached
            entries.append((module, weight, cached[2]))
        return entries

    def _pack_entries(self, skip: set[int]) -> list[tuple[Any, str, Any, Any]]:
        """(parent, name, module, PackedLinear) for each plain Linear the step runs (not folded away:
        a folded layer is laid out as it is folded); a stand-in is laid out again when its weight changed."""
        from ajet.engine.packed import PackedLinear, packable

        entries = []
        for parent, name, module in self._linears or []:
            if id(module) in skip:
                continue
            weight, bias = module._parameters.get("weight"), module.bias
            if not packable(weight, self.dtype):
                continue
            version = weight._version + (0 if bias is None else bias._version)  # both only grow
            cached = self._packs.get(id(module))
            if cached is None or cached[0] is not weight or cached[1] != version:
                cached = (weight, version, PackedLinear(weight, bias, self.dtype or weight.dtype))
                self._packs[id(module)] = cached
            entries.append((parent, name, module, cached[2]))
        return entries

    @staticmethod
    def _foldable(layer: Any) -> bool:
        """A plain LoRA over an nn.Linear, adapters on and not merged, one active adapter it holds."""
        import torch

        if layer.disable_adapters or layer.merged or type(layer.get_base_layer()) is not torch.nn.Linear:
            return False
        active = [a for a in layer.active_adapters if a in layer.lora_A]
        if len(active) != 1 or active[0] in getattr(layer, "lora_variant", {}):
            return False
        return getattr(layer.lora_B[active[0]], "bias", None) is None

    def _refresh_fold(self, f: _Folded) -> None:
        import torch

        from ajet.engine.packed import PackedLinear, packable

        layer = f.layer
        adapter = next(a for a in layer.active_adapters if a in layer.lora_A)
        base = layer.get_base_layer()
        a, b = layer.lora_A[adapter].weight, layer.lora_B[adapter].weight
        built_from = (id(base.weight), base.weight._version, id(a), a._version, id(b), b._version,
                      hash((adapter, float(layer.scaling[adapter]))))
        if f.linear is not None and f.built_from == built_from:
            return
        if self.split_lora:
            f.linear = self._split(f, base, a, b, float(layer.scaling[adapter]), built_from)
            f.built_from = built_from
            return
        # Not peft's get_delta_weight: for bf16 adapters on a CPU it replaces the adapter's .data with new
        # tensors (made in this inference-mode step, they would break the trainer). The plain LoRA delta,
        # scale * B @ A (transposed for fan_in_fan_out layers), summed in float32; the copy is an ordinary
        # tensor, so whoever reads it (its version, a backward pass) may.
        with torch.inference_mode(False), torch.no_grad():
            delta = (b.detach().float() @ a.detach().float()) * float(layer.scaling[adapter])
            if getattr(layer, "fan_in_fan_out", False):
                delta = delta.T
            folded = base.weight.detach().float() + delta
            dtype = self.dtype or base.weight.dtype
            if self.pack and packable(folded, dtype):
                # laid out straight from the sum, which is then freed: no second folded copy is held
                f.linear = PackedLinear(folded, base.bias, dtype, shown=base.weight)
            else:
                if f.linear is None:
                    f.linear = torch.nn.Linear(base.in_features, base.out_features, bias=False, device="meta")
                held = f.linear._parameters.get("weight")
                if held is not None and held.shape == folded.shape and held.dtype == dtype and held.device == folded.device:
                    held.copy_(folded)  # into last step's copy: no new allocation
                else:
                    f.linear._parameters["weight"] = folded.to(dtype)
                f.linear._parameters["bias"] = base.bias
        f.built_from = built_from

    def _split(self, f: _Folded, base: Any, a: Any, b: Any, scale: float, built_from: tuple[int, ...]) -> Any:
        """`f`'s _SplitLora. Its base is laid out again only when the base weight changed (a LoRA policy's
        base is frozen) or `release()` dropped it with every other copy; A and B after each update."""
        from ajet.engine.packed import PackedLinear

        dtype = self.dtype or base.weight.dtype
        same_base = f.linear is not None and f.built_from[:2] == built_from[:2]
        packed_base = f.linear.base if same_base else PackedLinear(base.weight, base.bias, dtype)
        return _split_lora_class()(packed_base, PackedLinear(a, None, dtype), PackedLinear(b, None, dtype),
                                   scale, shown=base)

    def _splittable(self, layer: Any) -> bool:
        """Whether a plain LoRA layer's base, A and B can all be laid out for oneDNN in this step's dtype."""
        from ajet.engine.packed import packable

        adapter = next(a for a in layer.active_adapters if a in layer.lora_A)
        weights = (layer.get_base_layer().weight, layer.lora_A[adapter].weight, layer.lora_B[adapter].weight)
        return all(packable(w, self.dtype) for w in weights)


@functools.cache
def _split_lora_class() -> type:
    """_SplitLora, made on first use (torch is imported lazily here)."""
    import torch

    class _SplitLora(torch.nn.Module):
        """A plain LoRA layer for one engine step: `base(x) + B(A(x)) * scale` from laid-out weights."""

        def __init__(self, base: Any, a: Any, b: Any, scale: float, shown: Any):
            super().__init__()
            self.base, self.lora_a, self.lora_b, self.scale = base, a, b, scale
            object.__setattr__(self, "weight", shown.weight)  # read by code that asks a layer its dtype
            object.__setattr__(self, "bias", shown.bias)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + self.lora_b(self.lora_a(x)) * self.scale

    return _SplitLora


def lora_layers(model: Any) -> list[tuple[Any, str, Any]]:
    """(parent, attribute name, layer) of each peft LoRA Linear in `model`."""
    try:
        from peft.tuners.lora.layer import Linear as LoraLinear
    except ImportError:  # no peft installed: no LoRA layers either
        return []
    return [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
            if isinstance(child, LoraLinear)]
