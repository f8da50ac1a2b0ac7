"""Autocast for the hf engine without re-casting the weights at every step.

Under `torch.autocast(dtype=bfloat16)`, every `nn.Linear` casts its float32 weight to bfloat16 on
each call, and autocast's own cast cache lasts one autocast region and skips frozen weights (a LoRA
policy's base). A decode step of SmolLM2 then moves ~0.8 GB just to cast weights, for a 16-row
matmul: a bfloat16 copy of the weights made a 16-row decode step ~40% faster on a 2-core AMX CPU.

`CastWeights` keeps those copies and puts them in place of each `nn.Linear`'s weight for the length
of an engine step (the module's own entry only: a tied embedding keeps its float32 table, and the
trainer's Parameter objects are never touched). Autocast would have cast the same float32 values to
the same dtype, so the results are the same. A copy is refreshed when its weight was modified in
place since (torch's version counter), so a LoRA policy's frozen base is copied once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class CastWeights:
    """Copies of a model's `nn.Linear` weights (not LoRA adapter weights) in `dtype`."""

    def __init__(self, model: Any, dtype: Any):
        self.model = model
        self.dtype = dtype
        self._modules: list[Any] | None = None  # the Linear modules to cast; None: look again
        self._copies: dict[int, tuple[Any, int, Any]] = {}  # id(module) -> (weight, its version, copy)

    def weights_changed(self) -> None:
        """Look for the modules again at the next step (adapters may have been added or removed)."""
        self._modules = None

    @contextmanager
    def swapped(self) -> Iterator[None]:
        entries = self._refresh()
        for module, _, copy in entries:
            module._parameters["weight"] = copy
        try:
            yield
        finally:
            for module, weight, _ in entries:
                module._parameters["weight"] = weight

    def _refresh(self) -> list[tuple[Any, Any, Any]]:
        import torch

        if self._modules is None:
            self._modules = [m for name, m in self.model.named_modules()
                             if type(m) is torch.nn.Linear and "lora_" not in name]
            alive = {id(m) for m in self._modules}
            self._copies = {k: v for k, v in self._copies.items() if k in alive}
        entries = []
        for module in self._modules:
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
