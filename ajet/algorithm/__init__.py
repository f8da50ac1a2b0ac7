"""Training algorithms as pure math: losses and advantages. The loops that use them live in the backbones."""

from ajet.algorithm.advantages import AdvantageStats, group_advantages
from ajet.algorithm.losses import dpo_loss, grpo_loss, kl_k3, sft_loss

__all__ = ["AdvantageStats", "dpo_loss", "group_advantages", "grpo_loss", "kl_k3", "sft_loss"]
