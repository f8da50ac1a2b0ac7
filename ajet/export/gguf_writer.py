"""Write a Hugging Face model folder of the Llama or Qwen family as one GGUF file (f16, q8_0 or q4_0).

Built on the `gguf` package (llama.cpp's own Python library): `GGUFWriter` for the file,
`get_tensor_name_map` for tensor names, `gguf.quants.quantize` for Q8_0 / Q4_0 blocks and
`SpecialVocab` for merges, special token ids and the chat template. The layout follows llama.cpp's
`convert_hf_to_gguf.py`: for `LlamaForCausalLM` (SmolLM2, Llama, Mistral-style) the Q and K
projections are permuted to llama.cpp's rotary order; `Qwen2ForCausalLM` (Qwen2.5, with Q/K/V
biases) and `Qwen3ForCausalLM` (Q/K norms, a head size of its own) rotate NeoX-style and are written
as they are. 1-D tensors (norms, biases) stay F32, `lm_head` is left out when the embeddings are
tied, and for q4_0 the token embeddings stay Q8_0 (what `llama-quantize` and the embedded SmolLM2
file do). Other architectures, and rotary scaling (llama3, yarn, ...), are refused with a message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ajet.errors import CheckpointError

GgufType = Literal["f16", "q8_0", "q4_0"]
GGUF_TYPES: tuple[str, ...] = ("f16", "q8_0", "q4_0")
# HF architecture -> (llama.cpp architecture, Q/K rows permuted to llama.cpp's rotary order)
_ARCHITECTURES = {"LlamaForCausalLM": ("llama", True), "MistralForCausalLM": ("llama", True),
                  "Qwen2ForCausalLM": ("qwen2", False), "Qwen3ForCausalLM": ("qwen3", False)}


def _qtypes(kind: GgufType):
    import gguf

    Q = gguf.GGMLQuantizationType
    table = {"f16": (Q.F16, Q.F16, gguf.LlamaFileType.MOSTLY_F16),
             "q8_0": (Q.Q8_0, Q.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
             "q4_0": (Q.Q4_0, Q.Q8_0, gguf.LlamaFileType.MOSTLY_Q4_0)}
    return table[kind]  # (2-D weights, token embeddings, file type)


def permute_qk(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's rotary layout for Q/K rows: (n_head, 2, d/2, in) -> (n_head, d/2, 2, in). (out, in)."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def write_gguf(model_dir: str | Path, out_file: str | Path, kind: GgufType, *, name: str | None = None) -> Path:
    """Convert the HF folder `model_dir` (config.json, safetensors, tokenizer) into `out_file`."""
    import gguf
    import torch
    from safetensors.torch import load_file

    model_dir, out_file = Path(model_dir), Path(out_file)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    arch = (config.get("architectures") or ["?"])[0]
    if arch not in _ARCHITECTURES:
        raise CheckpointError(f"GGUF export writes the Llama and Qwen architectures ({', '.join(_ARCHITECTURES)}); "
                              f"{model_dir} is {arch}. Use llama.cpp's convert_hf_to_gguf.py for other models")
    rope = config.get("rope_scaling") or config.get("rope_parameters") or {}
    if rope.get("rope_type", rope.get("type", "default")) not in ("default", None):
        raise CheckpointError(f"{model_dir} scales its rotary embeddings ({rope.get('rope_type', rope.get('type'))}), "
                              "which this GGUF writer does not carry; use llama.cpp's convert_hf_to_gguf.py")
    gguf_arch, permute = _ARCHITECTURES[arch]
    if kind not in GGUF_TYPES:
        raise CheckpointError(f"--gguf must be one of {', '.join(GGUF_TYPES)}, got {kind!r}")
    weight_type, embed_type, file_type = _qtypes(kind)
    n_layers, n_head = config["num_hidden_layers"], config["num_attention_heads"]
    n_kv = config.get("num_key_value_heads") or n_head
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(model_dir.glob("*.safetensors")):
        tensors.update(load_file(str(shard)))
    if not tensors:
        raise CheckpointError(f"{model_dir} has no .safetensors weights to convert")

    writer = gguf.GGUFWriter(str(out_file), gguf_arch)
    _write_metadata(writer, config, name or model_dir.name, file_type)
    _write_vocab(writer, model_dir, config)
    model_arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == gguf_arch)
    names = gguf.get_tensor_name_map(model_arch, n_layers)
    tied = config.get("tie_word_embeddings", False)
    for hf_name, tensor in tensors.items():
        if hf_name == "lm_head.weight" and tied:
            continue  # llama.cpp reuses token_embd
        if hf_name.endswith("rotary_emb.inv_freq"):
            continue
        gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise CheckpointError(f"no GGUF name for tensor {hf_name!r}; is {model_dir} really {arch}?")
        data = tensor.to(torch.float32).numpy()
        if permute and hf_name.endswith("q_proj.weight"):
            data = permute_qk(data, n_head)
        elif permute and hf_name.endswith("k_proj.weight"):
            data = permute_qk(data, n_kv)
        _add_tensor(writer, gguf_name, data, embed_type if gguf_name == "token_embd.weight" else weight_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out_file


def _add_tensor(writer: Any, name: str, data: np.ndarray, qtype: Any) -> None:
    import gguf

    Q = gguf.GGMLQuantizationType
    if data.ndim < 2:
        writer.add_tensor(name, data.astype(np.float32))  # norms stay F32, as llama.cpp keeps them
    elif qtype == Q.F16:
        writer.add_tensor(name, data.astype(np.float16))
    elif data.shape[-1] % gguf.GGML_QUANT_SIZES[qtype][0]:
        writer.add_tensor(name, data.astype(np.float16))  # rows not a whole number of blocks
    else:
        writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)


def _write_metadata(writer: Any, config: dict, name: str, file_type: Any) -> None:
    import gguf

    hidden, n_head = config["hidden_size"], config["num_attention_heads"]
    writer.add_name(name)
    writer.add_context_length(config.get("max_position_embeddings", 2048))
    writer.add_embedding_length(hidden)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(n_head)
    writer.add_head_count_kv(config.get("num_key_value_heads") or n_head)
    writer.add_rope_freq_base(float(config.get("rope_theta") or (config.get("rope_parameters") or {})
                                    .get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-5)))
    writer.add_vocab_size(config["vocab_size"])
    head_dim = config.get("head_dim") or hidden // n_head
    writer.add_rope_dimension_count(head_dim)
    if head_dim != hidden // n_head:  # Qwen3: heads wider than hidden / heads; llama.cpp reads these
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_file_type(file_type)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)


def _write_vocab(writer: Any, model_dir: Path, config: dict) -> None:
    """The BPE vocabulary as llama.cpp's gpt2 tokenizer model, plus merges, special ids, template."""
    import gguf
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    vocab = tokenizer.get_vocab()
    added = tokenizer.get_added_vocab()
    size = max(config["vocab_size"], len(vocab))
    by_id = {i: t for t, i in vocab.items()}
    special = set(tokenizer.all_special_tokens)
    tokens, types = [], []
    for i in range(size):
        token = by_id.get(i)
        if token is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif token in added:
            tokens.append(token)
            types.append(gguf.TokenType.CONTROL if token in special or _looks_special(token)
                         else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(token)
            types.append(gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(_pre_tokenizer(tokens, model_dir))
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    special_vocab = gguf.SpecialVocab(model_dir, load_merges=True, n_vocab=len(tokens))
    special_vocab.add_to_gguf(writer)
    template_file = model_dir / "chat_template.jinja"
    if template_file.is_file() and not special_vocab.chat_template:
        writer.add_chat_template(template_file.read_text(encoding="utf-8"))


def _looks_special(token: str) -> bool:
    return token.startswith("<|") and token.endswith("|>")


# Pre-tokenizer split patterns (tokenizer.json) and llama.cpp's names for them: llama.cpp and
# transformers' GGUF loader split the text by the name, so the name must be the vocabulary's own.
_SPLITS = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "qwen2",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "llama-bpe",
}


def _pre_tokenizer(tokens: list[str], model_dir: Path) -> str:
    """llama.cpp's pre-tokenizer name: the one whose split pattern the tokenizer uses (Qwen2's, Llama
    3's); SmolLM2's vocabulary is recognised ('smollm', as in the embedded GGUF); other BPE
    vocabularies get 'default' (llama.cpp's generic split)."""
    for pattern in _split_patterns(model_dir / "tokenizer.json"):
        if pattern in _SPLITS:
            return _SPLITS[pattern]
    smollm = len(tokens) == 49152 and tokens[:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    return "smollm" if smollm else "default"


def _split_patterns(tokenizer_json: Path) -> list[str]:
    try:
        pre = json.loads(tokenizer_json.read_text(encoding="utf-8")).get("pre_tokenizer") or {}
    except (OSError, ValueError):
        return []
    steps = pre.get("pretokenizers", [pre]) if isinstance(pre, dict) else []
    return [step["pattern"]["Regex"] for step in steps if isinstance(step, dict) and step.get("type") == "Split"
            and isinstance(step.get("pattern"), dict) and isinstance(step["pattern"].get("Regex"), str)]
