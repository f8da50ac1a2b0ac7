"""Read a saved peft LoRA adapter and check it against a model before anything touches that model.

`read_adapter(folder, model)` reads `adapter_config.json` and the weights file, then builds the
LoRA layers this config would give the model's architecture on the `meta` device (no memory, the
live model untouched) and compares: every tensor the adapter needs must be in the file, nothing
else may be, and every shape must match. So a truncated file, a tensor of the wrong shape, a config
whose rank disagrees with its weights, or weights missing from the file (which peft would fill with
fresh random values under `init_lora_weights: false`) are refused with an EngineError naming the
problem, and a load either happens whole or not at all (ajet/engine/adapters.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ajet.errors import EngineError

CHECK_NAME = "ajetcheck"  # the adapter name inside the meta copy; saved keys carry no adapter name
SAVED_PREFIX = "base_model.model."  # what a PeftModel's save_pretrained puts before module paths


@dataclass
class AdapterFiles:
    """A checked adapter: its config, its tensors by saved key, and each key's parameter path in a
    PeftModel with the adapter named CHECK_NAME (`base_model.model.<module>.lora_A.ajetcheck.weight`)."""

    config: Any
    tensors: dict[str, Any]
    paths: dict[str, str]


def read_adapter(folder: Path, model: Any) -> AdapterFiles:
    """The adapter in `folder`, checked against `model`'s architecture; EngineError naming what is wrong."""
    config = _config(folder)
    tensors = _tensors(folder)
    expected, paths = _expected(model, config)
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing:
        raise EngineError(f"the adapter's weights file lacks {len(missing)} of the {len(expected)} tensors its "
                          f"adapter_config.json asks for (first: {missing[:3]}); a partial file would leave those "
                          "layers with made-up values. Save the adapter again with peft's save_pretrained")
    if extra:
        raise EngineError(f"the adapter's weights file has {len(extra)} tensors this model has no LoRA layer for "
                          f"(first: {extra[:3]}): an adapter of another model, or one saved with embedding "
                          "weights that would overwrite the model's own")
    for key, shape in expected.items():
        got = tuple(tensors[key].shape)
        if got != shape:
            raise EngineError(f"tensor {key!r} has shape {list(got)}; this model's LoRA layer with the "
                              f"adapter_config.json (r={config.r}) needs {list(shape)}")
        if not tensors[key].is_floating_point():
            raise EngineError(f"tensor {key!r} is {tensors[key].dtype}; LoRA weights are floating point")
    return AdapterFiles(config=config, tensors=tensors, paths=paths)


def _config(folder: Path) -> Any:
    from peft import LoraConfig, PeftType

    try:
        config = LoraConfig.from_pretrained(str(folder))
    except Exception as exc:  # noqa: BLE001 - bad JSON, unknown keys, wrong types
        raise EngineError(f"adapter_config.json is not a usable LoRA config: {exc}") from None
    if config.peft_type != PeftType.LORA:
        raise EngineError(f"adapter_config.json has peft_type {config.peft_type!r}; only LORA adapters are served")
    if getattr(config, "trainable_token_indices", None):
        raise EngineError("the adapter also trains embedding rows (trainable_token_indices, ajet's "
                          "model.lora.train_tokens), which a served adapter cannot switch in and out: serve the "
                          "merged model (ajet export --merge) instead")
    return config


def _tensors(folder: Path) -> dict[str, Any]:
    import torch

    safetensors, pickled = folder / "adapter_model.safetensors", folder / "adapter_model.bin"
    try:
        if safetensors.is_file():
            from safetensors.torch import load_file

            return load_file(str(safetensors), device="cpu")
        if pickled.is_file():
            return dict(torch.load(pickled, map_location="cpu", weights_only=True))
    except Exception as exc:  # noqa: BLE001 - truncated or corrupt files raise many types
        raise EngineError(f"the adapter's weights file cannot be read ({type(exc).__name__}: {exc}); "
                          "it is truncated or corrupt: save the adapter again") from None
    raise EngineError("the folder has adapter_config.json but no weights (adapter_model.safetensors or "
                      "adapter_model.bin)")


def _expected(model: Any, config: Any) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Saved key -> shape, and saved key -> parameter path, of `config` on a meta copy of `model`."""
    import torch
    from peft import get_peft_model, get_peft_model_state_dict

    base = model.get_base_model() if callable(getattr(model, "get_base_model", None)) else model
    try:
        with torch.device("meta"):
            skeleton = type(base)._from_config(base.config)
        peft_meta = get_peft_model(skeleton, copy.deepcopy(config), adapter_name=CHECK_NAME)
        state = get_peft_model_state_dict(peft_meta, adapter_name=CHECK_NAME, save_embedding_layers=False)
    except Exception as exc:  # noqa: BLE001 - target modules the model lacks, bad ranks, ...
        raise EngineError(f"the adapter's config does not fit this model: {exc}") from None
    paths = {name.replace(f".{CHECK_NAME}", ""): name for name, _ in peft_meta.named_parameters()
             if f".{CHECK_NAME}" in name}
    return {key: tuple(value.shape) for key, value in state.items()}, paths
