"""Rollouts: run a workflow over tasks × group_size episodes and score them."""

from ajet.rollout.runner import BatchResult, RolloutRunner, RolloutSettings

__all__ = ["BatchResult", "RolloutRunner", "RolloutSettings"]
