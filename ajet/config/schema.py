"""The validated configuration tree. One description per field: `docs/configuration.md` and
`ajet --help-config` are generated from these models (see `ajet.config.reference`).

Fields typed `FilePath` (or plugin references, `PluginRef`) that come from a YAML file are resolved
against that file's folder by the loader (values from the command line: against the current
directory), so a run works from any directory. A `FilePath` value is treated as a path only when it
names something that exists there or has a file suffix (`.jsonl`, `.jinja`, ...): split names,
dataset builder names and hub ids pass through unchanged. A `PluginRef` is rewritten only when its
part before ':' ends in `.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ajet.config.backbones import LlamaFactoryConfig, SwiftConfig
from ajet.config.generate import GenerateConfig

# Marker metadata the loader looks for: values of these fields are paths relative to the YAML.
FILE_PATH = "ajet:path"
PLUGIN_REF = "ajet:plugin"
FilePath = Annotated[str, FILE_PATH]
PluginRef = Annotated[str, PLUGIN_REF]

AlgorithmName = Literal["grpo", "sft", "dpo", "ppo"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LoraConfig(_Section):
    enabled: bool = Field(True, description="Train LoRA adapters; false trains every weight (full fine-tuning).")
    rank: int = Field(16, ge=1, description="LoRA rank r.")
    alpha: float = Field(32, gt=0, description="LoRA alpha; the update is scaled by alpha / rank.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the LoRA input.")
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Module names to adapt, or 'all-linear' for every linear layer but the head."
    )
    layers: int | None = Field(
        None, ge=1,
        description="Adapt only the last N decoder layers (None: every layer). Below them nothing trains, so a "
        "training step's backward pass stops at the lowest adapted layer, and the debug trainer computes the "
        "frozen layers' output for an SFT row once and reuses it in later epochs (trainer.trunk_cache_mb).",
    )
    train_tokens: list[str] | Literal["auto"] = Field(
        "auto",
        description="Tokens whose embedding and output-head rows train beside the adapters (each must be one "
        "token of the tokenizer). auto: the tool-call and tool-result tags (<tool_call>, </tool_call>, ...) that "
        "the tokenizer holds as single tokens, which a model's template may use before its training ever did "
        "(Qwen2.5-Coder's); none on a tokenizer that spells them in pieces (SmolLM2's). [] trains none. "
        "Not with `layers` (the embedding is below the frozen trunk). Debug backbone; swift and llamafactory refuse "
        "a list and leave auto unapplied.",
    )


class ModelConfig(_Section):
    path: FilePath = Field(
        "smollm2-135m-instruct",
        description="'smollm2-135m-instruct' (embedded), 'tiny-random' (tests), a local folder or a hub id.",
    )
    chat_template: FilePath | None = Field(
        None,
        description="Jinja chat template (inline text or a .jinja file). None: the model's own, or the "
        "built-in Hermes tool template when the model's own cannot render tools.",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Weights dtype. auto: bfloat16 on CUDA, float32 on CPU."
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto picks CUDA when available.")
    autocast: Literal["auto", "off", "bfloat16"] = Field(
        "auto",
        description="Run training and generation forward passes under torch.autocast. auto: bfloat16 for "
        "float32 weights of models over 50M parameters on a CPU with native bf16 (AVX-512 BF16 / AMX), "
        "where it measured 1.6x faster with the loss within 1e-3; otherwise off.",
    )
    lora: LoraConfig = Field(default_factory=LoraConfig, description="LoRA adapter settings.")


class ExternalModelConfig(_Section):
    base_url: str = Field(description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")
    model: str = Field(description="Model name sent with each request.")
    api_key: str = Field("EMPTY", description="API key for the endpoint (use ${oc.env:VAR} to read a variable).")


class AgentConfig(_Section):
    model: ExternalModelConfig | None = Field(
        None, description="Where calls of this agent go when it is not trained. None: the policy, unrecorded."
    )


class FieldMapping(_Section):
    query: str = Field("query", description="Row field holding the query (dotted paths allowed: a.b).")
    answer: str | None = Field("answer", description="Row field holding the reference answer.")
    task_id: str | None = Field("task_id", description="Row field holding the id; missing ids get a content hash.")
    metadata: list[str] | None = Field(
        None, description="Row fields copied into task.metadata. None: every field not mapped above."
    )


class TaskReaderConfig(_Section):
    type: Literal["jsonl", "huggingface", "python", "xlam"] = Field(
        "jsonl", description="Where tasks come from. xlam: function-calling rows shaped like xlam-60k (query, tools, "
        "answers as JSON strings) from the train / val files."
    )
    train: FilePath | None = Field(None, description="jsonl, xlam: train file. huggingface: train split name or data file.")
    val: FilePath | None = Field(None, description="jsonl, xlam: val file. huggingface: val split name or data file.")
    path: FilePath | None = Field(None, description="huggingface: local dataset folder or builder name (offline).")
    function: PluginRef | None = Field(
        None, description="python: 'module:fn' or 'file.py:fn' returning tasks (dicts or Task); called with split=."
    )
    split_ratio: float | None = Field(
        None, gt=0, lt=1, description="Fraction of train kept for training when no val source is given; the rest is val."
    )
    limit: int | None = Field(None, ge=1, description="Read at most this many tasks per split.")
    shuffle_seed: int = Field(0, description="Seed of the shuffle used by split_ratio.")
    fields: FieldMapping = Field(default_factory=FieldMapping, description="Row field names.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Extra arguments for the reader.")


class JudgeConfig(_Section):
    type: PluginRef = Field(
        "exact_match",
        description="exact_match | math_boxed | function_call | composite | llm_judge | grounded, or a plugin "
        "'module:Class' / 'file.py:Class' subclassing ajet.Judge.",
    )
    args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the judge.")
    success_threshold: float = Field(1.0, description="An episode counts as a success when reward >= this.")
    reward: Literal["total", "success"] = Field(
        "total", description="What RL trains on: the judge's total (partial credit included), or success: 1 when "
        "the episode succeeds, else 0 (the total kept as parts.judge_total).")


# Sampling temperatures the engine can use: 0 is greedy; between 0 and MIN_TEMPERATURE the logits
# divided by it overflow; beyond MAX_TEMPERATURE the distribution is uniform to float precision.
# The gateway refuses request temperatures by the same bounds (ajet.gateway.request).
MIN_TEMPERATURE = 1e-5
MAX_TEMPERATURE = 100.0


def check_task_weights(value: dict[str, float] | None) -> dict[str, float] | None:
    if value is not None and (any(w < 0 for w in value.values()) or sum(value.values()) <= 0):
        raise ValueError(f"task weights must be >= 0 with at least one positive, got {value}")
    return value


class RolloutConfig(_Section):
    group_size: int = Field(4, ge=1, description="Episodes per task (the GRPO group).")
    batch_tasks: int = Field(8, ge=1, description="Tasks per rollout batch (per RL step).")
    concurrency: int = Field(16, ge=1, description="Episodes run at once.")
    temperature: float = Field(1.0, ge=0, le=MAX_TEMPERATURE, description="Sampling temperature for training rollouts.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling for training rollouts.")
    val_temperature: float = Field(0.0, ge=0, le=MAX_TEMPERATURE, description="Temperature for `ajet eval` (0: greedy).")
    max_turns: int = Field(6, ge=1, description="Passed to workflows as tuner.max_turns; LLM calls beyond it are refused.")
    max_tokens_per_turn: int = Field(256, ge=1, description="Default and upper bound of max_tokens per LLM call.")
    max_prompt_tokens: int = Field(4096, ge=16, description="Prompts longer than this are refused (HTTP 400).")
    episode_timeout_s: float = Field(120, gt=0, description="An episode running longer is cancelled and counted failed.")
    retries: int = Field(1, ge=0, description="Extra attempts for an episode that raised or timed out.")
    task_weights: dict[str, float] | None = Field(
        None, description="RL stages: sample the train tasks by each task's metadata.category, category -> weight "
        "(shares of the tasks; tasks of unlisted categories are left out). None: every task alike. Debug backbone.")

    @field_validator("task_weights")
    @classmethod
    def _weights(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return check_task_weights(value)

    @field_validator("temperature", "val_temperature")
    @classmethod
    def _samplable(cls, value: float) -> float:
        if 0 < value < MIN_TEMPERATURE:
            raise ValueError(f"{value!r} is too small to sample with; use 0 for greedy decoding or a value "
                             f">= {MIN_TEMPERATURE:g}")
        return value


class TrackerConfig(_Section):
    merge: Literal["token", "text", "off"] = Field(
        "token",
        description="token: merge a call into a later one when its tokens are a prefix; text: when its "
        "decoded text is; off: every LLM call is its own sample.",
    )


class EngineConfig(_Section):
    type: Literal["hf", "remote", "replay", "chat_api"] = Field(
        "hf", description="hf: in-process transformers; remote: a vLLM-style completions server; replay: recorded "
        "completions; chat_api: any OpenAI-compatible chat endpoint (hosted models; eval and generation only, "
        "never training: it returns no token ids).")
    base_url: str | None = Field(None, description="remote, chat_api: server URL, e.g. http://127.0.0.1:8000/v1.")
    base_urls: list[str] = Field(
        default_factory=list,
        description="remote: several replicas of the same model (vLLM-protocol servers), used instead of base_url. "
        "The gateway routes an episode's turns and a GRPO group's episodes to one replica (its prefix cache "
        "then hits) and spreads the groups over the replicas by load; LoRA updates go to every replica.")
    api_key: str = Field("EMPTY", description="remote, chat_api: API key (use ${oc.env:VAR}, or a .env file "
                         "beside the YAML).")
    model: str | None = Field(None, description="remote, chat_api: model name sent with each request (default: "
                              "the first in /v1/models).")
    replay_file: FilePath | None = Field(None, description="replay: episodes.jsonl of an earlier run, or a JSON list of scripted completions.")
    max_batch_size: int = Field(16, ge=1, description="hf: most requests decoded together in one forward pass.")
    prefix_cache_mb: float = Field(
        1024, ge=0,
        description="hf: most memory (MiB) the prefix KV cache keeps: the attention keys/values of prompts and "
        "finished completions, so a later request that starts with the same tokens (the system prompt and "
        "tools, an episode's previous turn) prefills only the rest. Least recently used prefixes are evicted "
        "first; the cache is dropped when the weights change. 0 turns it off.")
    fold_lora: Literal["auto", "on", "off"] = Field(
        "auto",
        description="hf: during rollouts, run the policy's LoRA adapter folded into a copy of each adapted weight "
        "(W + scale * B @ A, refreshed after each update): one matmul per layer instead of three. auto: on when "
        "the passes run in float32 (the same tokens and logprobs, to 1e-5) and the copies take at most 1 GiB, "
        "and otherwise, on a CPU, splits: the same three products as peft's layer from laid-out weights, bit for "
        "bit, 1.3x faster bf16 decoding on 2 AMX cores; on: also folds in bfloat16, where the folded weight "
        "rounds the LoRA delta (on an H100: 1.7x faster generation, logprobs off by up to 0.16); off: peft's "
        "own layers.")
    pack_weights: Literal["auto", "on", "off"] = Field(
        "auto",
        description="hf on a CPU: run each linear layer from a copy of its weight laid out once for oneDNN "
        "(refreshed after each update) instead of MKL repacking it at every call: 1.25x faster float32 "
        "generation on an AVX2 path, 1.1x under bf16 autocast, the same tokens. auto: on a CPU when the "
        "copies take at most 2 GiB; off: no copies.")
    seed: int = Field(0, description="Sampling seed.")
    request_timeout_s: float = Field(300, gt=0, description="remote, chat_api: timeout of one completion request.")


class GatewayConfig(_Section):
    host: str = Field("127.0.0.1", description="Interface the gateway binds. Beyond loopback (0.0.0.0: Ray "
                      "workers on other nodes, docs/cluster.md) every route needs a live episode key.")
    port: int = Field(0, ge=0, le=65535, description="Port; 0 picks a free one.")
    max_request_bytes: int = Field(4_000_000, ge=1024, description="Larger request bodies get HTTP 413.")


class GrpoConfig(_Section):
    epsilon: float = Field(0.2, gt=0, description="Lower clip range of the probability ratio (grpo and ppo).")
    epsilon_high: float | None = Field(None, gt=0, description="Upper clip range (DAPO clip-higher); None: epsilon.")
    beta: float = Field(0.0, ge=0, description="KL coefficient to the frozen base model (adapters disabled).")
    scale_rewards: bool = Field(True, description="Divide group-centred rewards by the group std.")
    baseline: Literal["mean", "leave_one_out"] = Field(
        "mean", description="What a sample's reward is compared with: mean: its group's mean (GRPO); "
        "leave_one_out: the mean of the group's other samples (RLOO), n / (n - 1) times the mean's advantage.")
    loss_agg: Literal["token", "sequence"] = Field(
        "token", description="token: mean over all trained tokens; sequence: mean per sample, then over samples."
    )
    entropy_coef: float = Field(
        0.0, ge=0, description="Entropy bonus: the loss subtracts this x the policy's mean next-token entropy over "
        "trained tokens, which keeps sampling from collapsing early (0: off, no entropy is computed).")
    dynamic_sampling_rounds: int = Field(
        0, ge=0, description="grpo: dynamic sampling (DAPO). Groups whose rewards are all equal teach nothing and "
        "are dropped; up to this many extra rollouts per step, of new tasks, refill the batch until it holds "
        "rollout.batch_tasks groups with a signal. 0: off (a step trains on what its one rollout gave).")
    turn_reward_weight: float = Field(
        0.0, ge=0, description="Turn-level credit: weight of the judge's per-turn rewards (Reward.turn_rewards) in "
        "each turn's advantage (grpo: group-normalised turn rewards added to the outcome advantage; ppo: added to "
        "the turn's reward before GAE). 0: every turn of an episode gets the episode's advantage.")


class PpoConfig(_Section):
    gamma: float = Field(1.0, ge=0, le=1, description="Discount between the turns of an episode.")
    lam: float = Field(0.95, ge=0, le=1, description="GAE lambda: 1 is the Monte-Carlo return less the value, 0 the "
                       "one-step TD error.")
    value_coef: float = Field(0.1, gt=0, description="Weight of the value loss beside the policy loss (the value "
                              "head shares the policy's layers).")
    value_clip: float | None = Field(0.2, gt=0, description="Clip range of the value update around the rollout's "
                                     "value (PPO's clipped value loss); None: no clipping.")
    value_lr: float | None = Field(None, gt=0, description="Learning rate of the value head; None: trainer.lr.")
    normalize_advantages: bool = Field(True, description="Whiten the advantages of a step over all its turns "
                                       "(mean 0, std 1).")


class CoresetConfig(_Section):
    strategy: Literal["loss_topk", "diversity", "hybrid", "random"] = Field(
        "hybrid", description="loss_topk: the dialogs the model finds hardest (highest loss); diversity: greedy "
        "k-center on word sets (drops near-duplicates); hybrid: half by loss, the rest by diversity; random.")
    target_size: int = Field(ge=1, description="Dialogs kept (all of them when there are fewer).")


class ReplayConfig(_Section):
    buffer: FilePath = Field(description="JSONL file of the rehearsal buffer, shared by the runs that continue each "
                         "other (created on first use; relative paths: from the YAML's folder).")
    buffer_size: int = Field(4096, ge=1, description="Rows the buffer keeps (reservoir sampling over every row "
                             "ever added).")
    ratio: float = Field(0.3, ge=0, le=1, description="Replayed rows added to the stage: ratio x its own rows.")


class SftConfig(_Section):
    data: FilePath | None = Field(None, description="JSONL of conversations (OpenAI messages or ShareGPT 'conversations').")
    epochs: float = Field(1.0, gt=0, description="Passes over the SFT data.")
    batch_size: int = Field(8, ge=1, description="Conversations per optimizer update.")
    lr: float | None = Field(None, gt=0, description="Learning rate of the SFT stage; None: trainer.lr.")
    neftune_alpha: float = Field(
        0.0, ge=0, description="NEFTune: uniform noise of bound alpha / sqrt(length x width) on the input embeddings "
        "while SFT trains, never at generation (arXiv:2310.05914; 5-15 in the paper). 0: off. Passed to swift and "
        "LLaMA-Factory as neftune_noise_alpha.")
    task_weights: dict[str, float] | None = Field(
        None, description="Mix the data by each row's metadata.category: category -> weight (shares of the rows; "
        "rows of unlisted categories are left out). None: the file as it is.")
    coreset: CoresetConfig | None = Field(None, description="Train on a selected subset of the data. None: all rows.")
    replay: ReplayConfig | None = Field(None, description="Rehearse rows of earlier runs from a buffer (continual "
                                        "learning). None: off.")

    @property
    def curated(self) -> bool:
        """Whether task_weights, coreset or replay change the rows the stage trains on."""
        return bool(self.task_weights or self.coreset or self.replay)

    @field_validator("task_weights")
    @classmethod
    def _weights(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return check_task_weights(value)


class DpoConfig(_Section):
    data: FilePath | None = Field(None, description="Preference JSONL (prompt, chosen, rejected). None: online pairs "
                                  "from the best and worst episode of each group.")
    beta: float = Field(0.1, gt=0, description="DPO temperature beta.")
    label_smoothing: float = Field(0.0, ge=0, lt=0.5, description="Conservative DPO label smoothing (sigmoid, simpo).")
    loss_type: Literal["sigmoid", "ipo", "simpo"] = Field(
        "sigmoid", description="sigmoid: DPO; ipo: IPO's squared loss on per-token mean log-ratios (does not "
        "overfit preferences that are always the same); simpo: SimPO, length-normalised and reference-free, "
        "with the margin simpo_gamma (SimPO's papers use beta 2 to 2.5).")
    reference_free: bool = Field(False, description="Compare with a uniform reference (log-ratio 0) instead of "
                                 "the frozen base model: no reference pass. simpo is always reference-free.")
    simpo_gamma: float = Field(0.5, ge=0, description="SimPO's target reward margin gamma (loss_type simpo).")

    @model_validator(mode="after")
    def _smoothing_needs_a_sigmoid(self) -> "DpoConfig":
        # IPO's squared loss has no label to smooth; silently ignoring the key would hide a mistake.
        if self.loss_type == "ipo" and self.label_smoothing:
            raise ValueError("dpo.label_smoothing applies to loss_type sigmoid and simpo, not ipo; set it to 0")
        return self
    epochs: float = Field(1.0, gt=0, description="Passes over the preference data (offline).")
    batch_size: int = Field(4, ge=1, description="Pairs per optimizer update.")
    lr: float | None = Field(None, gt=0, description="Learning rate of the DPO stage; None: trainer.lr.")


class TrainerConfig(_Section):
    steps: int = Field(50, ge=0, description="RL steps (rollout + update) for grpo / ppo / online dpo.")
    report_to: list[Literal["tensorboard", "wandb", "swanlab", "mlflow", "trackio"]] = Field(
        default_factory=list,
        description="Experiment trackers that get every step's scalars, the resolved config and the run folder's "
        "path, offline and inside the run folder unless their own environment variables say otherwise "
        "(docs/training.md, Experiment trackers). metrics.jsonl and curves.png are written whatever it holds. "
        "The swift and llamafactory backbones pass it to their trainers' own report_to.")
    lr: float = Field(1e-5, gt=0, description="Peak learning rate.")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="LR schedule over steps.")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    grad_clip: float = Field(1.0, gt=0, description="Max gradient norm.")
    updates_per_step: int = Field(1, ge=1, description="Optimizer updates per RL step, whatever the sample count.")
    micro_batch_tokens: int = Field(4096, ge=64, description="Token budget of one forward/backward micro-batch.")
    trunk_cache_mb: float = Field(
        1024, ge=0,
        description="With model.lora.layers: most memory (MiB) that SFT keeps of the frozen layers' output per row, "
        "so a row's later epochs run only the adapted layers (0: recompute them every time).")
    save_every: int = Field(10, ge=0, description="Checkpoint every N steps (0: only at the end of each stage).")
    keep_last: int | None = Field(None, ge=1, description="Keep only the newest N checkpoints (None: all).")
    eval_every: int = Field(0, ge=0, description="Run the val split every N steps (0: never during training).")
    seed: int = Field(0, description="Seed of torch, sampling and data order.")
    max_nonfinite_updates: int = Field(
        3, ge=1, description="An optimizer update whose loss or gradient is NaN or inf is skipped (the weights "
        "stay as they were); this many skipped in a row stop the run with exit code 1.")
    resume_accept: list[str] = Field(
        default_factory=list, description="Config keys (or sections, e.g. rollout) that --resume may find "
        "changed from the checkpoint's config although they change the training, e.g. [trainer.lr]. Keys "
        "that do not change the training (trainer.steps, output_dir, eval, ...) never need it.")


class RayConfig(_Section):
    enabled: bool = Field(False, description="Run the episodes of rollouts and evals in Ray workers (set by "
                          "`--with-ray`). The engine, the gateway and the judge stay in the driver process; "
                          "workers run the workflow and call the gateway over HTTP with their episode keys.")
    address: str | None = Field(None, description="Ray cluster to join: 'auto' (the cluster `ray start` made on "
                                "this node), 'ray://host:10001' (Ray Client), or null to start a private "
                                "single-node Ray in this process.")
    num_workers: int = Field(2, ge=1, description="Worker actors; each runs many episodes at once (asyncio).")
    cpus_per_worker: float = Field(1.0, ge=0, description="CPUs Ray reserves for each worker actor.")
    local_cpus: int | None = Field(None, ge=1, description="CPUs of the private Ray started when address is "
                                   "null (default: num_workers x cpus_per_worker, at least 1).")
    object_store_mb: int = Field(100, ge=80, description="Object store of the private Ray (episodes pass "
                                 "only small objects).")
    runtime_env: dict[str, Any] = Field(default_factory=dict, description="Ray runtime_env of the workers "
                                        "(working_dir, pip, env_vars), for nodes that lack your code.")
    gateway_host: str | None = Field(None, description="Host name or IP at which workers call the gateway "
                                     "(its port is the one it listens on). Default: with gateway.host 0.0.0.0, "
                                     "this node's IP as Ray sees it; else gateway.host.")
    lost_retries: int = Field(1, ge=0, description="Reruns, on another worker, of an episode whose worker "
                              "died; after them the episode counts as failed.")


class EvalConfig(_Section):
    group_size: int = Field(1, ge=1, description="Episodes per val task (pass@k uses these).")
    limit: int | None = Field(None, ge=1, description="Evaluate at most this many val tasks.")


class BackboneConfig(_Section):
    name: str = Field("debug", description="Which backbone trains: a name from the registry (debug, swift, "
                      "llamafactory, or one a package adds); set with --backbone.")
    swift: SwiftConfig = Field(default_factory=SwiftConfig, description="Keys of the swift backbone.")
    llamafactory: LlamaFactoryConfig = Field(default_factory=LlamaFactoryConfig,
                                             description="Keys of the llamafactory backbone.")


class AjetConfig(_Section):
    project: str = Field("ajet", description="Project name, used in the run folder path.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="The policy model.")
    workflow: PluginRef = Field(description="The workflow class, 'module:Class' or 'file.py:Class'.")
    workflow_args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the workflow.")
    agents: dict[str, AgentConfig] = Field(default_factory=dict, description="Per-agent settings, by agent name.")
    trainable_agents: list[str] | None = Field(None, description="Agents whose calls are trained. None: all.")
    task_reader: TaskReaderConfig = Field(default_factory=TaskReaderConfig, description="Task source.")
    judge: JudgeConfig = Field(default_factory=JudgeConfig, description="How episodes are scored.")
    algorithm: AlgorithmName | list[AlgorithmName] = Field(
        "grpo", description="One algorithm or a list of stages: sft, grpo, ppo (a critic: a value head on the "
        "policy, GAE over turns), dpo.")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="Episode sampling.")
    tracker: TrackerConfig = Field(default_factory=TrackerConfig, description="Merging of LLM calls into samples.")
    engine: EngineConfig = Field(default_factory=EngineConfig, description="Inference engine.")
    gateway: GatewayConfig = Field(default_factory=GatewayConfig, description="The OpenAI-compatible gateway.")
    grpo: GrpoConfig = Field(default_factory=GrpoConfig, description="GRPO settings; ppo's policy loss reads the "
                             "clip ranges, beta, loss_agg, entropy_coef and turn_reward_weight from here too.")
    ppo: PpoConfig = Field(default_factory=PpoConfig, description="PPO's critic and advantage settings.")
    sft: SftConfig = Field(default_factory=SftConfig, description="SFT settings.")
    dpo: DpoConfig = Field(default_factory=DpoConfig, description="DPO settings.")
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, description="Optimisation settings.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="`ajet eval` settings.")
    ray: RayConfig = Field(default_factory=RayConfig, description="Rollouts on a Ray cluster (docs/cluster.md).")
    backbone: BackboneConfig = Field(default_factory=BackboneConfig, description="Which backbone runs training.")
    generate: GenerateConfig = Field(default_factory=GenerateConfig, description="`ajet generate`: tasks and "
                                     "teacher demonstrations from an MCP server.")
    output_dir: str = Field(
        "runs/ajet",
        description="Run folder, relative to the current directory. The packaged config sets it to "
        "runs/${ajet.project}/${now:%Y%m%d-%H%M%S}; 'runs/ajet' applies only to configs built in Python.",
    )

    # Where the config came from (set by ajet.config.loader): not config values, so not fields.
    _base_dir: Path | None = PrivateAttr(None)
    _source_file: Path | None = PrivateAttr(None)

    @field_validator("algorithm")
    @classmethod
    def _stages_not_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("algorithm list is empty; name at least one of grpo, ppo, sft, dpo")
        return value

    @model_validator(mode="after")
    def _cross_field_rules(self) -> AjetConfig:
        if self.trainable_agents is not None:
            if not self.trainable_agents:
                raise ValueError("trainable_agents is empty; use null to train every agent")
        if self.engine.base_urls and self.engine.type != "remote":
            raise ValueError(f"engine.base_urls is for engine.type 'remote', not {self.engine.type!r}")
        if self.engine.base_urls and self.engine.base_url:
            raise ValueError("set engine.base_url or engine.base_urls, not both")
        if self.engine.type in ("remote", "chat_api") and not (self.engine.base_url or self.engine.base_urls):
            raise ValueError(f"engine.type is {self.engine.type!r} but engine.base_url is not set")
        if self.engine.type == "replay" and not self.engine.replay_file:
            raise ValueError("engine.type is 'replay' but engine.replay_file is not set")
        if "sft" in self.stages and not self.sft.data:
            raise ValueError("algorithm includes 'sft' but sft.data is not set")
        return self

    @property
    def base_dir(self) -> Path:
        """Folder that relative references resolve against: the YAML's folder, else the current one."""
        return self._base_dir if self._base_dir is not None else Path.cwd()

    @property
    def source_file(self) -> Path | None:
        """The user YAML this config was loaded from (None: built in Python or from overrides only)."""
        return self._source_file

    @property
    def stages(self) -> list[str]:
        return [self.algorithm] if isinstance(self.algorithm, str) else list(self.algorithm)

    def is_trainable(self, agent: str) -> bool:
        return self.trainable_agents is None or agent in self.trainable_agents


class RootConfig(_Section):
    ajet: AjetConfig = Field(description="Everything ajet reads lives under `ajet:`.")
