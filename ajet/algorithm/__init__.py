"""Training algorithms as pure math: losses, advantages (group, turn-level, GAE), online DPO pairs, PPO's
targets and value loss. The loops that use them live in the backbones."""

from ajet.algorithm.advantages import AdvantageStats, group_advantages
from ajet.algorithm.gae import gae
from ajet.algorithm.losses import dpo_loss, grpo_loss, kl_k3, sft_loss
from ajet.algorithm.online_dpo import online_pairs
from ajet.algorithm.ppo import ppo_targets, value_loss
from ajet.algorithm.turns import turn_advantages

__all__ = ["AdvantageStats", "dpo_loss", "gae", "group_advantages", "grpo_loss", "kl_k3", "online_pairs",
           "ppo_targets", "sft_loss", "turn_advantages", "value_loss"]
