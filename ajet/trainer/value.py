"""PPO's critic: a value head on the policy, and the values of a batch before its update.

The head is one linear layer from the decoder's last hidden state to a scalar, on top of the layers
the policy trains (its LoRA adapters, or every weight): the critic shares the policy's features, as in
the PPO implementations that put a value head on the language model (TRL's value-head model). It starts
at zero (weight and bias), so the first advantages are the returns themselves and the critic learns
from there. It lives on `policy.value_head`; checkpoints save it (`value_head.safetensors`), exports
leave it out (serving needs no critic).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ajet.samples import Sample
from ajet.trainer.batching import pack_micro_batches
from ajet.trainer.logprobs import token_outputs
from ajet.trainer.policy import Policy


class ValueHead(nn.Module):
    """hidden (..., H) -> value (..., 1), in float32 whatever the trunk's dtype."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=hidden.device.type, enabled=False):  # a bf16 value would round GAE's inputs
            return self.linear(hidden.float())


def attach_value_head(policy: Policy) -> ValueHead:
    """Give `policy` a value head (once; an existing one is kept) on its device."""
    if policy.value_head is None:
        config = policy.causal_lm().config
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        policy.value_head = ValueHead(config.hidden_size).to(policy.device)
    return policy.value_head


@torch.no_grad()
def sample_values(policy: Policy, samples: Sequence[Sample], micro_batch_tokens: int,
                  autocast_dtype: torch.dtype | None = None) -> list[list[float]]:
    """The value head's output at every position of each sample, before any update (V_old), as lists the
    length of each sample. A sample with no trained token gets zeros (it is not trained either)."""
    if policy.value_head is None:
        raise ValueError("the policy has no value head; call attach_value_head(policy) first")
    values = [[0.0] * len(s.input_ids) for s in samples]
    plan = pack_micro_batches(samples, micro_batch_tokens, pad_token_id=policy.tokenizer.pad_token_id or 0)
    for mb in plan.micro_batches:
        mb = mb.to(policy.device)
        with policy.autocast(autocast_dtype):  # no trained position: the vocabulary head is not run
            out = token_outputs(policy.model, mb.input_ids, mb.attention_mask, torch.zeros_like(mb.loss_mask),
                                value_head=policy.value_head)
        for row, i in enumerate(mb.indices):
            values[i] = out.values[row, : mb.lengths[row]].float().cpu().tolist()
    return values
