"""The rollout-seed rule: which sampling seed each episode gets.

    batch seed    (engine.seed + 1_000_003 * step) % 2**31      step: the training step the batch is for
    episode seed  batch seed + group * group_size + member        group: the task's place in the batch

Every episode of a batch gets its own seed (a task's members differ from each other and from the
members of the other tasks), and every step its own range: a step's episodes number far fewer than
1_000_003, so two steps' seeds never meet. The seed is a function of the run's position only, so
a resumed run samples exactly what the uninterrupted run would have. Every LLM call of the episode
(and a retry of it) is sampled with the episode's seed; an explicit `seed` in a request wins.
"""

from __future__ import annotations

STEP_STRIDE = 1_000_003  # a prime larger than any batch's episode count
SEED_RANGE = 2**31


def batch_seed(engine_seed: int, step: int) -> int:
    """The seed of the rollout batch for training step `step` (1-based; 0 is the engine seed itself)."""
    return (engine_seed + STEP_STRIDE * step) % SEED_RANGE


def episode_seed(batch: int | None, group: int, member: int, group_size: int) -> int | None:
    """The seed of member `member` of group `group` (both 0-based) in a batch seeded `batch`;
    None (the engine draws one per request) when the batch is unseeded."""
    return None if batch is None else batch + group * group_size + member
