"""What the user writes: a `Workflow` that runs one episode of a `Task` and returns a `WorkflowOutput`."""

from __future__ import annotations

import abc
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict

from ajet.reward import Reward

if TYPE_CHECKING:
    from ajet.tuner import Tuner


class Task(BaseModel):
    """One task: a query, an optional reference answer, and anything else the workflow needs."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="Stable id; episodes of one task form a GRPO group.")
    query: str = Field(description="The user's request, as text.")
    answer: Any = Field(default=None, description="Reference answer (string, number, expected calls, ...).")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Any other fields of the row.")

    @staticmethod
    def stable_id(query: str, answer: Any = None, metadata: dict | None = None) -> str:
        """A content hash, so the same row always gets the same id and distinct rows never collide."""
        blob = json.dumps([query, answer, metadata or {}], sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:12]


class WorkflowOutput(BaseModel):
    """What an episode returns. Set `reward` to score it yourself; otherwise the judge scores it."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    answer: Any = Field(default=None, description="The agent's final answer.")
    # Strict: "0.5" or True is a bug in the workflow, not a score (pydantic would coerce them to numbers).
    reward: Annotated[float, Strict()] | Reward | None = Field(default=None, description="Set to skip the judge.")
    is_success: bool | None = Field(default=None, description="Overrides the judge's success verdict.")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="The conversation, for logs and judges.")
    tool_calls: list[dict[str, Any]] = Field(
        default_factory=list, description="Tool calls made, as {'name', 'arguments', 'result'?, 'error'?}."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form data kept in episodes.jsonl.")
    metrics: dict[str, float] = Field(default_factory=dict, description="Numbers averaged into the run's report.")


class Workflow(abc.ABC):
    """Subclass and implement `execute`. One instance serves many episodes concurrently: keep no
    per-episode state on `self`."""

    #: The folder relative paths in `workflow_args` resolve against (the YAML's); set by the loader.
    base_dir: Path | None = None

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    @abc.abstractmethod
    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        """Run one episode of `task`, calling the model only through `tuner`."""
