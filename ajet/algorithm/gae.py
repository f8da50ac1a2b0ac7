"""Generalised advantage estimation (Schulman et al., 2016) over the turns of one episode.

PPO's critic values each state the policy acts from. In a merged multi-turn sample a turn is one LLM
call (one trained span, `ajet.samples.trained_spans`): its state is everything before its first
generated token, its reward is 0 until the episode's last turn, which gets the episode's reward (plus
any per-turn reward the judge gave, `grpo.turn_reward_weight`). With K turns, V_K = 0 (the episode
ends after its last turn):

    delta_k = r_k + gamma * V_{k+1} - V_k
    A_k     = delta_k + gamma * lam * A_{k+1}          (A_K = 0)
    G_k     = A_k + V_k                                 (the critic's regression target)

lam = 1 gives the Monte-Carlo return less the value; lam = 0 the one-step TD error.
"""

from __future__ import annotations

from collections.abc import Sequence


def gae(rewards: Sequence[float], values: Sequence[float], gamma: float = 1.0,
        lam: float = 1.0) -> tuple[list[float], list[float]]:
    """(advantages, returns) of one episode's turns, from its per-turn rewards and values."""
    if len(rewards) != len(values):
        raise ValueError(f"gae: {len(rewards)} rewards but {len(values)} values")
    advantages = [0.0] * len(rewards)
    running, next_value = 0.0, 0.0
    for k in reversed(range(len(rewards))):
        delta = float(rewards[k]) + gamma * next_value - float(values[k])
        running = delta + gamma * lam * running
        advantages[k] = running
        next_value = float(values[k])
    returns = [a + float(v) for a, v in zip(advantages, values)]
    return advantages, returns
