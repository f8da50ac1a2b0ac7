"""Training algorithms as pure math: losses, advantages, online DPO pairs. The loops that use them live in the
backbones."""

from ajet.algorithm.advantages import AdvantageStats, group_advantages
from ajet.algorithm.losses import dpo_loss, grpo_loss, kl_k3, sft_loss
from ajet.algorithm.online_dpo import online_pairs

__all__ = ["AdvantageStats", "dpo_loss", "group_advantages", "grpo_loss", "kl_k3", "online_pairs", "sft_loss"]
