"""The policy: one model object that the engine samples from and the trainer updates.

`load_policy(model_cfg)` resolves the model path, loads weights and tokenizer, picks device and
dtype, and wraps the model in a peft LoRA adapter unless `model.lora.enabled` is false (then every
weight trains). The engine (`ajet.engine.hf.HFEngine(policy.model, policy.tokenizer)`) and the
trainer share `policy.model`: weights are never copied, so sampling always sees the newest update.

The reference model (the frozen base used by the GRPO KL term and by DPO) comes from
`policy.base_model_context()`:
  - LoRA: the same model with its adapters disabled inside the context. No copy, no memory.
  - full fine-tuning: there are no adapters to switch off, so the base must be a separate frozen
    copy of the weights taken before training. It doubles the weight memory, so it is made only
    when asked for: `load_policy(..., reference=True)`. Without it, the context raises ModelError.

Under LoRA the embedding and head rows of a few tokens can train too (`model.lora.train_tokens`; by default
the tool-call tags a tokenizer holds as single tokens, which a model's template may use untaught:
ajet/trainer/token_rows.py).

Device and dtype follow `ajet.models` (`auto`: CUDA when available; bfloat16 on a CUDA device
that supports it, else float32), the same rule the engines use. Under LoRA, peft keeps the adapter weights
in float32 even when the base is bfloat16 (its `autocast_adapter_dtype`), so the optimizer state is
full precision either way.

Frozen weights under autocast. When a LoRA policy's passes run under autocast to another dtype (bf16
on a CPU with native bf16), the frozen linear weights are only ever used in that dtype: autocast
casts each one on every call, and the backward pass keeps each cast copy. They are therefore kept in
that dtype from the start (`_frozen_linears_in`): the passes compute the same numbers bit for bit
(the copy autocast made is the same rounding), and a step holds no copies. On the tool-agent
quickstart (SmolLM2-135M) that is ~0.2 GB of weights and ~0.5 GB of copies a step less at the peak.
The embeddings, norms and adapters stay float32. The passes run under `policy.autocast()` (the
trainer's steps, DPO, SFT curation, the engine); a pass that does not still runs, with those layers'
products in the autocast dtype and their outputs cast back (`_LowPrecisionLinear`).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from ajet.config.schema import ModelConfig
from ajet.errors import ModelError
from ajet.models import load_causal_lm, read_chat_template, resolve_autocast, resolve_model_path
from ajet.trainer import token_rows
from ajet.trainer.trunk import TrunkCache

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Policy:
    """The trained model, its tokenizer and where it lives.

    `model` is a `peft.PeftModel` under LoRA, else the transformers model itself.
    `chat_template` is the template the gateway renders with; checkpoints and exports save it with
    the tokenizer, so set it when the gateway picked one the tokenizer does not carry.
    """

    model: nn.Module
    tokenizer: object
    device: torch.device
    dtype: torch.dtype
    model_path: str
    model_cfg: ModelConfig
    chat_template: str | None = None
    reference_model: nn.Module | None = field(default=None, repr=False)
    autocast_dtype: torch.dtype | None = None  # run forward/backward under torch.autocast to this dtype
    value_head: nn.Module | None = field(default=None, repr=False)  # PPO's critic (ajet.trainer.value); saved in checkpoints
    _trunk: TrunkCache | None = field(default=None, repr=False)

    @property
    def is_lora(self) -> bool:
        return self.model_cfg.lora.enabled

    def causal_lm(self) -> nn.Module:
        """The transformers `*ForCausalLM` under any peft wrapper (LoRA layers stay injected in it)."""
        return unwrap_causal_lm(self.model)

    def autocast(self, dtype: torch.dtype | None = None) -> AbstractContextManager:
        """torch.autocast to `dtype` (default: `self.autocast_dtype`); a no-op when that is None or
        equals the weights' dtype."""
        dtype = dtype or self.autocast_dtype
        if dtype is None or dtype == self.dtype:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def trunk_cache(self, max_mb: float) -> TrunkCache | None:
        """The cache of the frozen trunk's outputs (`model.lora.layers`, ajet/trainer/trunk.py), made on first
        use; None when no decoder layer is frozen below the adapted ones, or max_mb is 0."""
        if max_mb <= 0 or not self.is_lora or self.model_cfg.lora.layers is None:
            return None
        if self._trunk is None:
            decoder = self.causal_lm().get_decoder()
            self._trunk = TrunkCache(decoder, int(max_mb * 2**20))
        self._trunk.max_bytes = int(max_mb * 2**20)
        return self._trunk if self._trunk.usable else None

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The model's trained weights (LoRA adapters, or all); the value head's are apart (`value_head`)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def num_parameters(self) -> tuple[int, int]:
        """(trainable, total) parameter counts; tied weights counted once."""
        seen: dict[int, nn.Parameter] = {id(p): p for p in self.model.parameters()}
        total = sum(p.numel() for p in seen.values())
        return sum(p.numel() for p in seen.values() if p.requires_grad), total

    @contextmanager
    def base_model_context(self) -> Iterator[nn.Module]:
        """Yield the frozen base model (for KL / DPO reference logprobs). Use under torch.no_grad().

        LoRA: `self.model` with adapters disabled for the duration of the block.
        Full fine-tuning: the frozen copy made by `load_policy(..., reference=True)`.
        """
        if self.is_lora:
            with self.model.disable_adapter(), token_rows.disabled(self.model):
                yield self.model
            return
        if self.reference_model is None:
            raise ModelError(
                "full fine-tuning has no adapters to disable, so the frozen base (KL beta > 0 or DPO) "
                "needs its own copy of the weights; load the policy with load_policy(..., reference=True) "
                "or enable LoRA (model.lora.enabled: true)"
            )
        yield self.reference_model


def unwrap_causal_lm(model: nn.Module) -> nn.Module:
    """Return the `*ForCausalLM` inside a peft model (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def load_policy(
    model_cfg: ModelConfig,
    *,
    for_training: bool = True,
    reference: bool = False,
    gradient_checkpointing: bool = False,
    autocast: Literal["bfloat16", "float16", "config"] | None = "config",
) -> Policy:
    """Load the model named by `model_cfg` as a trainable (or, with for_training=False, frozen) policy.

    reference: under full fine-tuning, also keep a frozen copy of the base weights for the KL / DPO
    reference (ignored under LoRA, where disabling the adapters gives the base for free).
    gradient_checkpointing: recompute activations in backward to save memory (slower).
    autocast: run the trainer's forward/backward under torch.autocast to this dtype ("config": as
    `model_cfg.autocast` resolves, see `resolve_autocast`), weights staying
    as loaded (float32 master weights). On a CPU with native bf16 (`cpu_has_fast_bf16()`) this made a
    SmolLM2 LoRA step ~1.6x faster with the loss within 1e-3 relative; on tiny models it is slower.
    """
    path = resolve_model_path(model_cfg.path)
    model, tokenizer = load_causal_lm(path, model_cfg.device, model_cfg.dtype)
    param = next(model.parameters())
    device, dtype = param.device, param.dtype
    if autocast == "config":
        autocast = resolve_autocast(model_cfg.autocast, device, dtype, sum(p.numel() for p in model.parameters()))
    chat_template = read_chat_template(model_cfg.chat_template)
    if chat_template is not None:
        tokenizer.chat_template = chat_template

    ref_model = None
    if reference and not model_cfg.lora.enabled:
        ref_model = copy.deepcopy(model).eval()
        ref_model.requires_grad_(False)

    if model_cfg.lora.enabled:
        model = _wrap_lora(model, model_cfg)
        token_ids = train_token_ids(model_cfg, tokenizer)
        if token_ids:
            token_rows.attach(model, token_ids)
    else:
        model.requires_grad_(for_training)
    if not for_training:
        model.requires_grad_(False)
    if autocast and model_cfg.lora.enabled and _DTYPES[autocast] != dtype:
        _frozen_linears_in(model, _DTYPES[autocast])
    if gradient_checkpointing and for_training:
        # use_reentrant=False works with frozen inputs (LoRA) without enable_input_require_grads.
        # config.use_cache stays as it is: the engine generates with the KV cache; the trainer's own
        # forward passes use_cache=False explicitly.
        unwrap_causal_lm(model).gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.eval()  # the step function switches to train() for its updates and back
    return Policy(
        model=model,
        tokenizer=tokenizer,
        device=device,
        dtype=dtype,
        model_path=path,
        model_cfg=model_cfg,
        chat_template=chat_template or getattr(tokenizer, "chat_template", None),
        reference_model=ref_model,
        autocast_dtype=_DTYPES[autocast] if autocast else None,
    )


def _frozen_linears_in(model: nn.Module, dtype: torch.dtype) -> None:
    """Keep the weights of the frozen `nn.Linear`s (a LoRA policy's base layers, an untied output head) in
    `dtype`, the dtype autocast would cast them to at every call (see the module docstring). A weight
    shared with the input embeddings stays: the embedding lookup reads it in its own dtype. The other
    frozen tensors are copied off the checkpoint's file mapping, so that its pages, now read by nothing
    but still resident, can go (0.2 GB for SmolLM2-135M)."""
    shared = {id(p) for p in unwrap_causal_lm(model).get_input_embeddings().parameters()}
    with torch.no_grad():
        for module in model.modules():
            weight = getattr(module, "weight", None)
            if type(module) is nn.Linear and not weight.requires_grad and id(weight) not in shared:
                weight.data = weight.data.to(dtype)
                module.forward = _LowPrecisionLinear(module)  # an instance attribute: the type stays nn.Linear
        for param in model.parameters():
            if not param.requires_grad and param.dtype != dtype:
                param.data = param.data.clone()


class _LowPrecisionLinear:
    """The forward of a linear layer whose frozen weight is kept in a lower precision: under autocast it is
    nn.Linear's own; without, the input is cast to the weight's dtype and the output back to the input's,
    so that a pass someone runs outside `policy.autocast()` works instead of failing on mixed dtypes."""

    def __init__(self, module: nn.Linear):
        self.module = module

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.module.weight, self.module.bias
        if x.dtype == weight.dtype or torch.is_autocast_enabled(x.device.type):
            return nn.functional.linear(x, weight, bias)
        return nn.functional.linear(x.to(weight.dtype), weight, None if bias is None else bias.to(weight.dtype)).to(x.dtype)


def decoder_layers(model: nn.Module) -> tuple[str, nn.ModuleList]:
    """The name and the ModuleList of a causal LM's decoder layers (the list of num_hidden_layers blocks)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    count = getattr(config, "num_hidden_layers", None)
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == count:
            return name, module
    raise ModelError(f"cannot find the {count} decoder layers of {type(model).__name__} (a ModuleList of "
                     "config.num_hidden_layers blocks); model.lora.layers needs them: leave it unset")


def _modules_in_last_layers(model: nn.Module, layers: int, target: list[str] | str) -> list[str]:
    """Full names of the Linear modules to adapt in the last `layers` decoder layers: every Linear there for
    'all-linear', else those whose name ends with one of `target`."""
    prefix, blocks = decoder_layers(model)
    first = max(len(blocks) - layers, 0)
    wanted = tuple(f"{prefix}.{i}." for i in range(first, len(blocks)))
    names = [name for name, module in model.named_modules()
             if isinstance(module, nn.Linear) and name.startswith(wanted)
             and (target == "all-linear" or any(name == t or name.endswith(f".{t}") for t in target))]
    if not names:
        raise ModelError(f"model.lora.target_modules={target!r} matches no Linear module in the last {layers} "
                         f"decoder layers ({prefix}.{first}...)")
    return names


def train_token_ids(model_cfg: ModelConfig, tokenizer: object) -> list[int]:
    """The token ids whose rows train beside the adapters (`model.lora.train_tokens`, ajet.trainer.token_rows)."""
    from ajet.tool_prompt import single_token_tags

    lora = model_cfg.lora
    if lora.train_tokens == "auto":
        return [] if lora.layers is not None else list(single_token_tags(tokenizer).values())
    if lora.train_tokens and lora.layers is not None:
        raise ModelError("model.lora.train_tokens needs the embedding trained, below model.lora.layers' frozen "
                         "trunk: set one of them")
    ids = []
    for token in lora.train_tokens:
        pieces = tokenizer.encode(token, add_special_tokens=False)
        if len(pieces) != 1:
            raise ModelError(f"model.lora.train_tokens: {token!r} is {len(pieces)} tokens of this tokenizer, "
                             "not one; name single tokens (its added tokens, e.g. a template's tags)")
        ids.append(pieces[0])
    return ids


def _wrap_lora(model: nn.Module, model_cfg: ModelConfig) -> nn.Module:
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    lora = model_cfg.lora
    target = lora.target_modules  # "all-linear" is peft's own spelling: every linear but the output head
    targets = target if target == "all-linear" else list(target)
    if lora.layers is not None:
        targets = _modules_in_last_layers(model, lora.layers, target)
    peft_cfg = PeftLoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    try:
        with warnings.catch_warnings():
            # peft reads transformers' deprecated `is_gradient_checkpointing`: a FutureWarning on every run
            # that the user can do nothing about
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            return get_peft_model(model, peft_cfg)
    except ValueError as exc:
        raise ModelError(
            f"model.lora.target_modules={target!r} does not fit this model: {exc}; "
            "use 'all-linear' or names such as ['q_proj', 'v_proj']"
        ) from exc
