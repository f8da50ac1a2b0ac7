"""`Reward`: what a judge (or a workflow scoring itself) gives an episode.

It sits below both `ajet.workflow` (WorkflowOutput.reward) and `ajet.judge`, so neither imports
the other for it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Reward(BaseModel):
    """A scalar reward with optional named parts (kept in episodes.jsonl and averaged in reports)."""

    model_config = ConfigDict(extra="forbid")

    total: float = Field(description="The scalar the algorithm trains on.")
    parts: dict[str, float] = Field(default_factory=dict, description="Named components, for reports.")
    is_success: bool | None = Field(default=None, description="Success verdict; default total >= threshold.")
    feedback: str | None = Field(default=None, description="Free text explanation, e.g. from an LLM judge.")
    turn_rewards: list[float] | None = Field(
        default=None, description="One reward per LLM call of the trained agents, in call order, when the judge "
        "can tell which turn went right or wrong (turn-level credit: grpo.turn_reward_weight). A list whose "
        "length is not the episode's number of trained calls is dropped (counted).")

    @classmethod
    def of(cls, value: float | Reward) -> Reward:
        return value if isinstance(value, Reward) else cls(total=float(value))
