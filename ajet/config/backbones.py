"""The config sections of the backbones that need keys of their own (`ajet.backbone.<name>`).

Each backbone owns its section here; `conf/backbone/<name>.yaml` lists the same keys for users to
read, with the values these models give (a test keeps the two equal).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ManagedEnvConfig(_Section):
    python: str | None = Field(
        None, description="Python executable of an environment you built yourself; None: ajet's managed "
        "environment under ~/.cache/ajet/envs/ (created on first use, or by `ajet setup <backbone>`).")
    args: dict[str, Any] = Field(
        default_factory=dict, description="Extra arguments passed to the backend as they are (validated "
        "against the backend's own parser before launch).")


class SwiftConfig(ManagedEnvConfig):
    """`ajet.backbone.swift`: ms-swift's keys that ajet's own do not cover."""


class LlamaFactoryConfig(ManagedEnvConfig):
    """`ajet.backbone.llamafactory`: LLaMA-Factory's keys that ajet's own do not cover."""

    template: str | None = Field(
        None, description="LLaMA-Factory chat template name (qwen, llama3, ...); None: parsed from the "
        "model's own chat template, so training renders turns as the model's tokenizer does.")
    tool_format: str = Field(
        "qwen", description="How LLaMA-Factory writes tool specs and calls into prompts; 'qwen' is the Hermes "
        "<tool_call>{json}</tool_call> form that ajet's gateway parses at rollout, eval and serve time.")
    cutoff_len: int = Field(4096, ge=16, description="Longest tokenized conversation; longer ones are cut.")
    idle_timeout_s: float = Field(
        1800, gt=0, description="Stop LLaMA-Factory (and fail the run) when it prints nothing for this long.")
