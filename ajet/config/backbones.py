"""The config sections of the backbones that need keys of their own (`ajet.backbone.<name>`).

Each backbone owns its section here; `conf/backbone/<name>.yaml` lists the same keys for users to
read, with the values these models give (a test keeps the two equal).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
    """`ajet.backbone.swift`: ms-swift's keys that ajet's own do not cover (docs/backends/swift.md maps
    every ajet key to swift's)."""

    model_type: str | None = Field(
        None, description="swift's --model_type; None: swift reads it from the model's config.json (set it "
        "for models swift does not know, e.g. 'llama' for SmolLM2).")
    template: str | None = Field(
        None, description="swift's chat --template (chatml, qwen3, llama3, ...); None: the model type's own.")
    agent_template: str = Field(
        "hermes", description="swift's --agent_template: how tools and tool calls are written into the prompt "
        "(hermes matches ajet's gateway).")
    micro_batch_size: int | None = Field(
        None, ge=1, description="Rows per device per forward pass (--per_device_train_batch_size); the rest of a "
        "batch is gradient accumulation. None: the whole batch in one pass.")
    use_vllm: bool = Field(
        False, description="GRPO: roll out with a vLLM server (`swift rollout`, server mode, GPU) at "
        "vllm_server_host:vllm_server_port instead of transformers inside the trainer; ajet prints the "
        "command that starts the server with its plugin.")
    vllm_server_host: str = Field("127.0.0.1", description="server mode: host of the `swift rollout` server.")
    vllm_server_port: int = Field(8000, ge=1, le=65535, description="server mode: port of the `swift rollout` server.")
    deepspeed: str | None = Field(
        None, description="swift's --deepspeed: zero0|zero1|zero2|zero3|zero2_offload|zero3_offload or a JSON file.")
    nproc_per_node: int = Field(1, ge=1, description="Training processes per node (NPROC_PER_NODE; >1 launches "
                                "through torchrun).")
    nnodes: int = Field(1, ge=1, description="Nodes in the job (NNODES); run the same command on each node.")
    node_rank: int = Field(0, ge=0, description="This node's rank (NODE_RANK), 0 on the master node.")
    master_addr: str = Field("127.0.0.1", description="Address of node 0 (MASTER_ADDR) for multi-node runs.")
    master_port: int = Field(29500, ge=1, le=65535, description="Port of node 0 (MASTER_PORT) for multi-node runs.")
    packages: list[str] = Field(
        default_factory=list, description="More pip requirements your workflow or judge imports, installed into "
        "the managed environment (e.g. ['sympy==1.13']); a change builds a new environment.")
    record_samples: bool = Field(
        False, description="GRPO: write the exact token ids and labels swift trains on to "
        "<run>/swift/grpo/trained_samples.jsonl (an audit trail; large on long runs).")
    idle_timeout_s: float = Field(
        1800, gt=0, description="Stop swift when it prints nothing for this long (a hang) and report its last lines.")

    @model_validator(mode="after")
    def _launch_rules(self) -> SwiftConfig:
        if self.node_rank >= self.nnodes:
            raise ValueError(f"node_rank={self.node_rank} must be below nnodes={self.nnodes}")
        return self


class LlamaFactoryConfig(ManagedEnvConfig):
    """`ajet.backbone.llamafactory`: LLaMA-Factory's keys that ajet's own do not cover."""

    render: Literal["ajet", "llamafactory"] = Field(
        "ajet", description="Who turns rows into tokens. ajet: ajet renders each row as its gateway does (the "
        "model's chat template, or model.chat_template) and LLaMA-Factory trains on those ids (a pre-tokenized "
        "dataset, its tokenized_path), so training prompts equal rollout, eval and serve prompts token for token. "
        "llamafactory: LLaMA-Factory renders the converted ShareGPT data with its template and tool_format.")
    template: str | None = Field(
        None, description="render=llamafactory: LLaMA-Factory chat template name (qwen, llama3, ...); None: "
        "parsed from the model's own chat template.")
    tool_format: str = Field(
        "qwen", description="render=llamafactory: how LLaMA-Factory writes tool specs and calls into prompts; "
        "'qwen' is the Hermes <tool_call>{json}</tool_call> form that ajet's gateway parses.")
    cutoff_len: int = Field(4096, ge=16, description="Longest tokenized conversation; longer ones are cut.")
    idle_timeout_s: float = Field(
        1800, gt=0, description="Stop LLaMA-Factory (and fail the run) when it prints nothing for this long.")
