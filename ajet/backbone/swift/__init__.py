"""The swift backbone: the same config trained by ms-swift (SFT, multi-turn GRPO with the user's own
workflow, DPO) in its own managed environment. See docs/backends/swift.md.

Parent side (ajet's Python): `run` (orchestration), `args` and `data` (the config and data as swift's
command lines and datasets), `metrics`, `env` (the pinned environment), `export`.
Inside swift's process (its environment): `template`, `plugin`, `scheduler`, `engine`, `check`.
"""

from ajet.backbones import Backbone

BACKBONE = Backbone(
    name="swift",
    summary="ms-swift in a managed environment: SFT, multi-turn GRPO running your workflow, DPO; "
            "vLLM rollouts, DeepSpeed, many GPUs and nodes",
    algorithms=("sft", "grpo", "dpo"),
    run="ajet.backbone.swift.run:run",
    setup="ajet.backbone.swift.env:setup",
    export="ajet.backbone.swift.export:export",
    refused=(("ppo", "swift's own PPO (`swift rlhf --rlhf_type ppo`, TRL's PPOTrainer) scores single-turn "
                     "completions with a reward-model checkpoint, so it cannot run your workflow and judge"),),
)
