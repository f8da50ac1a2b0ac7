"""LoRA adapters served by the hf engine next to the model as it is (multi-LoRA serving).

`load(name, path)` adds a saved peft adapter under `name`: on a peft model (the trainer's policy)
next to its own adapters, on a plain transformers model by injecting peft's LoRA layers into the
model in place (so `engine.model` stays the same object). A load is all or nothing: the adapter is
read and checked against the model's architecture first (ajet/engine/adapter_check.py), and if
putting it in still fails, what was added is taken out again, so the model as it is and every other
adapter answer exactly as before. Each load gets a fresh internal peft name (`ajet_<n>`), so loading
again under a served name builds the new version beside the old one and swaps only when it worked.

A request names its adapter in `SamplingParams.adapter`; `scope(name)` activates it for one engine
step and puts back what was active before, with every parameter's `requires_grad` as it was (peft's
`set_adapter` marks the active adapter trainable, which must not leak into a trainer's optimizer).
`None` is the model as it is: a peft model's active adapter, a plain model's own weights.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ajet.engine.adapter_check import CHECK_NAME, SAVED_PREFIX, AdapterFiles, read_adapter
from ajet.errors import EngineError

_ABSENT = object()


class AdapterSet:
    """The adapters loaded into one model by the engine."""

    def __init__(self, model: Any):
        self.model = model
        self.loaded: dict[str, str] = {}  # name -> path
        self._internal: dict[str, str] = {}  # name -> peft adapter name inside the model
        self._counter = itertools.count(1)
        self._layer_cache: list[Any] | None = None  # peft's LoRA layers in the model, found again after loads
        self._is_peft = hasattr(model, "peft_config") and hasattr(model, "base_model") \
            and callable(getattr(model, "get_base_model", None))

    def own_adapters(self) -> set[str]:
        """Adapters the model came with (a trainer's), which requests may not name."""
        if not self._is_peft:
            return set()
        return set(getattr(self.model, "peft_config", None) or {}) - set(self._internal.values())

    def load(self, name: str, path: str | Path) -> None:
        if not isinstance(name, str) or not name.strip():
            raise EngineError(f"an adapter name must be a non-empty string, got {name!r}")
        if name in self.own_adapters():
            raise EngineError(f"adapter name {name!r} is one of the model's own adapters (the one being trained); "
                              "load under another name")
        folder = Path(path)
        if not (folder / "adapter_config.json").is_file():
            raise EngineError(f"{str(folder)!r} is not a saved LoRA adapter (no adapter_config.json there); "
                              "save one with peft's model.save_pretrained(folder)")
        try:
            files = read_adapter(folder, self.model)
        except EngineError as exc:
            raise EngineError(f"cannot load adapter {name!r} from {str(folder)!r}: {exc}") from None
        internal = self._fresh_name()
        with self._grads_kept():
            try:
                self._put_in(internal, files)
            except Exception as exc:  # noqa: BLE001 - peft raises many types; the model must not keep a half
                self._take_out(internal)
                raise EngineError(f"cannot load adapter {name!r} from {str(folder)!r}: {exc}") from exc
            old = self._internal.get(name)
            if old is not None:  # a new version under the same name replaces the old one, now that it loaded
                self._take_out(old)
        self._internal[name] = internal
        self.loaded[name] = str(folder)

    def unload(self, name: str) -> None:
        if name not in self.loaded:
            raise EngineError(f"no adapter {name!r} is loaded; loaded: {sorted(self.loaded) or 'none'}")
        with self._grads_kept():
            self._take_out(self._internal.pop(name))
            del self.loaded[name]

    @contextmanager
    def scope(self, name: str | None) -> Iterator[None]:
        """Run the block with adapter `name` active (None: the model as it is)."""
        if name is None:
            yield
            return
        if name not in self.loaded:
            raise EngineError(f"adapter {name!r} was unloaded while requests for it were waiting")
        internal = self._internal[name]
        with self._grads_kept():
            if self._is_peft:
                previous = self.model.active_adapter
                self.model.set_adapter(internal)
                try:
                    yield
                finally:
                    self.model.set_adapter(previous)
            else:
                for layer in self._layers():
                    layer.enable_adapters(True)
                    layer.set_adapter(internal)
                try:
                    yield
                finally:
                    for layer in self._layers():
                        layer.enable_adapters(False)

    # ------------------------------------------------------------------ internals
    def _fresh_name(self) -> str:
        taken = set(getattr(self.model, "peft_config", None) or {})
        return next(n for n in (f"ajet_{i}" for i in self._counter) if n not in taken)

    def _put_in(self, internal: str, files: AdapterFiles) -> None:
        """Add peft's LoRA layers for `files.config` under `internal`, then copy in the tensors the check
        already read: the folder is read once per load. (peft's and transformers' own `load_adapter`
        would read it again, and peft's also switches a trainer's model to eval mode; transformers' needs a
        newer peft than some installs have and leaves a failed adapter active in the model.)"""
        import torch

        self._layer_cache = None
        if self._is_peft:
            files.config.inference_mode = True  # served, never trained: its weights stay frozen
            self.model.add_adapter(internal, files.config)
        else:  # a plain model: the layers injected in place
            from peft import inject_adapter_in_model

            previous_config = getattr(self.model, "peft_config", _ABSENT)
            try:
                inject_adapter_in_model(files.config, self.model, adapter_name=internal)
            finally:  # peft sets `model.peft_config`; a plain model keeps no record of its served adapters
                if previous_config is _ABSENT:
                    self.model.__dict__.pop("peft_config", None)
                else:
                    self.model.peft_config = previous_config
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for key, tensor in files.tensors.items():
                target = files.paths[key].replace(f".{CHECK_NAME}", f".{internal}")
                if not self._is_peft:  # the paths are a PeftModel's; a plain model is what it wraps
                    target = target.removeprefix(SAVED_PREFIX)
                if target not in params:
                    raise EngineError(f"the model has no parameter {target!r} for the adapter's tensor {key!r}")
                params[target].copy_(tensor)
                params[target].requires_grad_(False)
        if not self._is_peft:
            for layer in self._layers():
                layer.enable_adapters(False)  # the default stays the model as it is

    def _take_out(self, internal: str) -> None:
        """Remove peft adapter `internal` wherever it got (a failed load may have left it half in)."""
        self._layer_cache = None
        if self._is_peft:
            if internal in (getattr(self.model, "peft_config", None) or {}):
                self.model.delete_adapter(internal)
            for layer in self._layers():  # a load that failed before peft recorded its config
                if internal in getattr(layer, "lora_A", {}):
                    layer.delete_adapter(internal)
            return
        for layer in self._layers():
            if any(internal in getattr(layer, attr, {}) for attr in layer.adapter_layer_names):
                layer.delete_adapter(internal)
            layer.enable_adapters(False)

    def _layers(self) -> list[Any]:
        from peft.tuners.tuners_utils import BaseTunerLayer

        if self._layer_cache is None:
            self._layer_cache = [m for m in self.model.modules() if isinstance(m, BaseTunerLayer)]
        return self._layer_cache

    @contextmanager
    def _grads_kept(self) -> Iterator[None]:
        flags = [(p, p.requires_grad) for p in self.model.parameters()]
        try:
            yield
        finally:
            for param, flag in flags:
                if param.requires_grad != flag:
                    param.requires_grad_(flag)
