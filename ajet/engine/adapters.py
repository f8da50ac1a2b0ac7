"""LoRA adapters served by the hf engine next to the model as it is (multi-LoRA serving).

`load(name, path)` adds a saved peft adapter under `name`: on a peft model (the trainer's policy)
next to its own adapters, on a plain transformers model through transformers' peft integration,
which injects the LoRA layers into the model in place (so `engine.model` stays the same object).
A request names its adapter in `SamplingParams.adapter`; `scope(name)` activates it for one
engine step and puts back what was active before, with every parameter's `requires_grad` as it was
(peft's `set_adapter` marks the active adapter trainable, which must not leak into a trainer's
optimizer). `None` is the model as it is: a peft model's active adapter, a plain model's own weights.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ajet.errors import EngineError


class AdapterSet:
    """The adapters loaded into one model by the engine."""

    def __init__(self, model: Any):
        self.model = model
        self.loaded: dict[str, str] = {}  # name -> path
        self._is_peft = hasattr(model, "peft_config") and hasattr(model, "base_model") \
            and callable(getattr(model, "get_base_model", None))

    def own_adapters(self) -> set[str]:
        """Adapters the model came with (a trainer's), which requests may not name."""
        config = getattr(self.model, "peft_config", None) or {}
        return set(config) - set(self.loaded)

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
        if name in self.loaded:
            self.unload(name)  # a new version under the same name replaces the old one
        with self._grads_kept():
            try:
                if self._is_peft:
                    self.model.load_adapter(str(folder), adapter_name=name, is_trainable=False)
                else:
                    self.model.load_adapter(str(folder), adapter_name=name)
                    self.model.disable_adapters()  # the default stays the model as it is
            except Exception as exc:  # noqa: BLE001 - peft raises many types for a bad adapter
                raise EngineError(f"cannot load adapter {name!r} from {str(folder)!r}: {exc}") from exc
        self.loaded[name] = str(folder)

    def unload(self, name: str) -> None:
        if name not in self.loaded:
            raise EngineError(f"no adapter {name!r} is loaded; loaded: {sorted(self.loaded) or 'none'}")
        with self._grads_kept():
            self.model.delete_adapter(name)
            del self.loaded[name]
            if self.loaded and not self._is_peft:
                self.model.disable_adapters()  # peft made another adapter active: the default stays the model as is

    @contextmanager
    def scope(self, name: str | None) -> Iterator[None]:
        """Run the block with adapter `name` active (None: the model as it is)."""
        if name is None:
            yield
            return
        if name not in self.loaded:
            raise EngineError(f"adapter {name!r} was unloaded while requests for it were waiting")
        with self._grads_kept():
            if self._is_peft:
                previous = self.model.active_adapter
                self.model.set_adapter(name)
                try:
                    yield
                finally:
                    self.model.set_adapter(previous)
            else:
                self.model.enable_adapters()
                self.model.set_adapter(name)
                try:
                    yield
                finally:
                    self.model.disable_adapters()

    @contextmanager
    def _grads_kept(self) -> Iterator[None]:
        flags = [(p, p.requires_grad) for p in self.model.parameters()]
        try:
            yield
        finally:
            for param, flag in flags:
                if param.requires_grad != flag:
                    param.requires_grad_(flag)
