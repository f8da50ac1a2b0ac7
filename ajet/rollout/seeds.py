"""The rollout-seed rule: which sampling seed each episode (and each of its LLM calls) gets.

    batch seed    (engine.seed + 1_000_003 * step) % 2**31        step: the training step the batch is for
    episode seed  derive_seed(batch seed, task id, repeat, attempt)
    call seed     derive_seed(episode seed, call index)            (the gateway, `EpisodeSession.call_seed`)

`derive_seed` (ajet.gateway.episodes) hashes its parts (sha256, 63 bits), so every task, repeat,
retry and call draws its own numbers, and the seeds depend on the run's position only (step, task
id, repeat, attempt): a resumed run samples exactly what the uninterrupted run would have, whatever
order the tasks come in. An explicit `seed` in a request wins.
"""

from __future__ import annotations

from ajet.gateway.episodes import derive_seed

STEP_STRIDE = 1_000_003  # a prime: the batch seeds of successive steps are far apart
SEED_RANGE = 2**31


def batch_seed(engine_seed: int, step: int) -> int:
    """The seed of the rollout batch for training step `step` (1-based; 0 is the engine seed itself)."""
    return (engine_seed + STEP_STRIDE * step) % SEED_RANGE


def episode_seed(batch: int | None, task_id: str, repeat: int, attempt: int) -> int | None:
    """The seed of attempt `attempt` of repeat `repeat` (both 0-based) of task `task_id` in a batch
    seeded `batch`; None (the engine draws one per request) when the batch is unseeded."""
    return None if batch is None else derive_seed(batch, task_id, repeat, attempt)
