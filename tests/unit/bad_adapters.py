"""Broken LoRA adapter folders for tests: a real peft adapter of the tiny model saved, then damaged
the ways a client (or a crash while copying) can damage one. Each breaker edits a copy in place."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

WEIGHTS = "adapter_model.safetensors"


def save_adapter(tiny_model_path: str, folder: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=32, target_modules="all-linear",
                                                  init_lora_weights=False))  # random B: the adapter changes outputs
    peft_model.save_pretrained(folder)
    return folder


def wrong_shape(folder: Path) -> None:
    tensors = load_file(folder / WEIGHTS)
    last = sorted(tensors)[-1]
    tensors[last] = torch.zeros(tensors[last].shape[0] + 1, tensors[last].shape[1])
    save_file(tensors, folder / WEIGHTS)


def truncated(folder: Path) -> None:
    data = (folder / WEIGHTS).read_bytes()
    (folder / WEIGHTS).write_bytes(data[: len(data) // 2])


def missing_tensors(folder: Path) -> None:  # the config keeps init_lora_weights: false
    tensors = load_file(folder / WEIGHTS)
    save_file({k: v for k, v in tensors.items() if "layers.1." not in k}, folder / WEIGHTS)


def wrong_rank(folder: Path) -> None:
    config = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**config, "r": 8}))


def no_config(folder: Path) -> None:
    (folder / "adapter_config.json").unlink()


BAD = {  # how the folder is broken -> (status, a phrase of the message)
    wrong_shape: (400, "needs [32, 4]"),
    truncated: (400, "truncated or corrupt"),
    missing_tensors: (400, "lacks 14 of the 28 tensors"),
    wrong_rank: (400, "(r=8) needs [8, 64]"),
    no_config: (404, "No adapter found"),
}
