"""NEFTune: uniform noise on the input embeddings while SFT trains (Jain et al. 2023, arXiv:2310.05914).

Each embedding gets noise drawn from U(-s, s) with s = alpha / sqrt(L * d), L the sequence length and d the
embedding width, during SFT updates only: the engine that shares the model, evaluation and exports never
see it. The noise keeps the model from fitting the exact token sequence of each demonstration, which the
paper found to help instruction tuning on small data (alpha 5 to 15). TRL, ms-swift and LLaMA-Factory
call it `neftune_noise_alpha`; ajet's `sft.neftune_alpha` is passed to them under that name.

L is the longest row of the mini-batch (transformers uses the padded length of its batch), so rows
packed apart, and a prefix run once for all rows (ajet.trainer.logprobs), get noise of one scale.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ajet.trainer.policy import unwrap_causal_lm


def neftune_scale(alpha: float, length: int, width: int) -> float:
    """The bound s of the noise U(-s, s): alpha / sqrt(length * width); 0 when alpha is 0."""
    if alpha < 0 or length < 1 or width < 1:
        raise ValueError(f"neftune needs alpha >= 0, length >= 1 and width >= 1, got {alpha}, {length}, {width}")
    return alpha / math.sqrt(length * width)


@contextmanager
def noisy_embeddings(model: nn.Module, alpha: float, length: int) -> Iterator[None]:
    """Inside the block, every forward pass of `model`'s input embeddings adds NEFTune noise for sequences of
    `length` tokens; alpha 0 leaves the model as it is. model: a `*ForCausalLM`, peft-wrapped or not."""
    if alpha == 0:
        yield
        return
    embeddings = unwrap_causal_lm(model).get_input_embeddings()
    scale = neftune_scale(alpha, length, embeddings.embedding_dim)

    def add_noise(module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        return output + torch.empty_like(output).uniform_(-scale, scale)

    handle = embeddings.register_forward_hook(add_noise)
    try:
        yield
    finally:
        handle.remove()
