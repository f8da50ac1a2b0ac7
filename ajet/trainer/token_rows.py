"""Trainable embedding and output-head rows for a few tokens, beside a LoRA adapter.

A model's chat template can ask for tokens its training never taught. Qwen2.5-Coder-0.5B's template
writes tool calls between `<tool_call>` and `</tool_call>`, two added tokens whose embedding and head
rows are still at their initial values (norm 0.32, the same as the unused `<|box_start|>`; a trained
row's is 0.52): the base model gives `<tool_call>` a log-probability of -21.5 where a call should
start, and LoRA, which adapts the decoder's linears only, moved it to -8.4 in the quickstart's SFT
while every other trained token reached -0.07: the adapters reach those rows only through the decoder.
Trained beside them, the tag's log-probability after the same SFT was -0.001.

`attach(model, token_ids)` puts the input embedding and the output head of a peft LoRA model behind
thin wrappers that replace those tokens' rows with trainable copies (one copy when the model ties
its head to its embedding). Nothing else changes: every other token runs through the frozen module,
whose weight the engine still casts and lays out (`ajet.engine.precision`), and the head computes
the chosen tokens' logits as one (N, H) x (H, k) product written over its own output, so a step
copies no vocabulary-sized table. The rows start as the base rows: an attached model computes what
the base did (to float rounding: the chosen logits are summed in another order) until the first update.

Checkpoints store the rows the way peft stores its own trainable tokens (`trainable_token_indices`
in adapter_config.json, `...token_adapter.trainable_tokens_delta` tensors in the adapter file), so
`PeftModel.from_pretrained` loads an ajet adapter with its rows and `merge_and_unload` writes them
into the merged model (`ajet export --merge`, `ajet eval --model RUN`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from ajet.errors import ModelError

DELTA_KEY = "token_adapter.trainable_tokens_delta"  # peft's name for a trainable-tokens tensor


def _causal_lm(model: nn.Module) -> nn.Module:
    """The `*ForCausalLM` inside a peft model (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


class TokenRows(nn.Module):
    """The trained rows of `token_ids`: `embed` (k, H) for the input embedding, `head` (k, H) for the
    output head (the same Parameter when the model ties the two)."""

    def __init__(self, token_ids: list[int], embedding: nn.Embedding, head: nn.Linear, tied: bool):
        super().__init__()
        ids = torch.tensor(token_ids, dtype=torch.long, device=embedding.weight.device)
        self.register_buffer("token_ids", ids, persistent=False)
        slots = torch.full((embedding.num_embeddings,), -1, dtype=torch.long, device=ids.device)
        slots[ids] = torch.arange(len(token_ids), device=ids.device)
        self.register_buffer("slots", slots, persistent=False)  # vocab id -> row of `embed`, -1: not trained
        with torch.no_grad():
            self.embed = nn.Parameter(embedding.weight[ids].detach().float().clone())
            self.head = self.embed if tied else nn.Parameter(head.weight[ids].detach().float().clone())
        bias = None if head.bias is None else head.bias[ids].detach().clone()
        self.register_buffer("head_bias", bias, persistent=False)  # frozen, as the head's whole bias is
        for row in (self.embed, self.head):
            row.ajet_no_decay = True  # full row values, not deltas: decay would pull them to zero (ajet.trainer.optim)
        self.tied = tied
        self.enabled = True


class _RowWrapper(nn.Module):
    """A module around `base` (the embedding or the head) that the rows stand in for, looking like it."""

    def __init__(self, base: nn.Module, rows: TokenRows):
        super().__init__()
        self.base = base
        self.rows = rows

    @property
    def weight(self) -> torch.Tensor:
        return self.base.weight


class RowEmbedding(_RowWrapper):
    """An input embedding whose `rows.token_ids` rows come from `rows.embed`."""

    @property
    def num_embeddings(self) -> int:
        return self.base.num_embeddings

    @property
    def embedding_dim(self) -> int:
        return self.base.embedding_dim

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        out = self.base(input_ids)
        if not self.rows.enabled:
            return out
        slot = self.rows.slots[input_ids]
        hit = slot >= 0
        trained = self.rows.embed[slot.clamp(min=0)].to(out.dtype)
        return torch.where(hit.unsqueeze(-1), trained, out)


class RowHead(_RowWrapper):
    """An output head whose logits for `rows.token_ids` come from `rows.head`."""

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.base(hidden)
        if not self.rows.enabled:
            return logits
        # the engine may swap `base` for a laid-out copy (ajet.engine.precision): read nothing else off it
        bias = self.rows.head_bias
        bias = None if bias is None else bias.to(hidden.dtype)
        chosen = nn.functional.linear(hidden, self.rows.head.to(hidden.dtype), bias)
        # in place: a linear layer's backward needs its input and weight, not its output
        logits[..., self.rows.token_ids] = chosen.to(logits.dtype)
        return logits


def attach(model: nn.Module, token_ids: list[int]) -> TokenRows:
    """Train the embedding and head rows of `token_ids` in `model` (a peft LoRA model or a `*ForCausalLM`);
    returns the rows, which are then among `model.parameters()`."""
    lm = _causal_lm(model)
    embedding, head = lm.get_input_embeddings(), lm.get_output_embeddings()
    if type(embedding) is not nn.Embedding or type(head) is not nn.Linear:
        raise ModelError(f"model.lora.train_tokens needs a plain nn.Embedding and nn.Linear head; "
                         f"{type(lm).__name__} has {type(embedding).__name__} / {type(head).__name__}")
    bad = [t for t in token_ids if not 0 <= t < min(embedding.num_embeddings, head.out_features)]
    if bad:
        raise ModelError(f"model.lora.train_tokens: token ids {bad} are outside the model's vocabulary")
    tied = head.weight is embedding.weight
    rows = TokenRows(sorted(set(token_ids)), embedding, head, tied)
    lm.set_input_embeddings(RowEmbedding(embedding, rows))
    lm.set_output_embeddings(RowHead(head, rows))
    return rows


def rows_of(model: nn.Module) -> TokenRows | None:
    """The rows `attach` put in `model`, or None."""
    embedding = _causal_lm(model).get_input_embeddings()
    return embedding.rows if isinstance(embedding, RowEmbedding) else None


@contextmanager
def disabled(model: nn.Module) -> Iterator[None]:
    """The base rows for the block (the reference model of KL and DPO)."""
    rows = rows_of(model)
    if rows is None:
        yield
        return
    was, rows.enabled = rows.enabled, False
    try:
        yield
    finally:
        rows.enabled = was


# ---------------------------------------------------------------------------- peft's file format
def _module_paths(model: nn.Module) -> tuple[str, str]:
    """Where the input embedding and the head sit in the `*ForCausalLM` (e.g. 'model.embed_tokens', 'lm_head')."""
    lm = _causal_lm(model)
    embedding, head = lm.get_input_embeddings(), lm.get_output_embeddings()
    paths = {id(m): name for name, m in lm.named_modules()}
    return paths[id(embedding)], paths[id(head)]


def peft_entries(model: nn.Module, rows: TokenRows) -> tuple[dict[str, torch.Tensor], Any]:
    """The rows as peft writes trainable tokens: (adapter-file tensors, adapter_config's
    `trainable_token_indices`)."""
    embed_path, head_path = _module_paths(model)
    ids = rows.token_ids.tolist()
    tensors = {f"base_model.model.{embed_path}.{DELTA_KEY}": rows.embed.detach().contiguous().cpu()}
    if rows.tied:  # peft ties the head to the embedding's adapter itself
        return tensors, ids
    tensors[f"base_model.model.{head_path}.{DELTA_KEY}"] = rows.head.detach().contiguous().cpu()
    return tensors, {embed_path.rsplit(".", 1)[-1]: ids, head_path.rsplit(".", 1)[-1]: ids}


def load_peft_entries(model: nn.Module, rows: TokenRows, tensors: dict[str, torch.Tensor]) -> None:
    """Copy the rows of a peft adapter file (`peft_entries`' keys) into `rows`; raises ModelError when
    the file has none or other shapes."""
    wanted, _ = peft_entries(model, rows)
    embed_key = next(iter(wanted))  # peft_entries lists the embedding's rows first
    with torch.no_grad():
        for key, current in wanted.items():
            saved = tensors.get(key)
            if saved is None or tuple(saved.shape) != tuple(current.shape):
                raise ModelError(f"the adapter has no trained rows {key!r} of shape {tuple(current.shape)} "
                                 "for model.lora.train_tokens; was it trained with the same tokens?")
            target = rows.embed if key == embed_key else rows.head
            target.copy_(saved.to(target.device, target.dtype))
