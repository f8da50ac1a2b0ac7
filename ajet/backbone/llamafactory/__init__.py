"""The llamafactory backbone: SFT and DPO by LLaMA-Factory 0.9.5, run in its own managed environment.

ajet converts its SFT and preference data into LLaMA-Factory's ShareGPT format (reporting every row
it changed or dropped), compiles its config into LLaMA-Factory's arguments, runs
`llamafactory-cli train` as a subprocess and brings its progress and metrics back. See
docs/backends/llamafactory.md.
"""

from ajet.backbones import Backbone

BACKBONE = Backbone(
    name="llamafactory",
    summary="LLaMA-Factory 0.9.5 in a managed environment: SFT and DPO with tool data, LoRA or full",
    algorithms=("sft", "dpo"),
    run="ajet.backbone.llamafactory.run:run",
    setup="ajet.backbone.llamafactory.env:setup",
    export="ajet.backbone.llamafactory.checkpoints:export",
    refused=(("ppo", "LLaMA-Factory's PPO (stage ppo) scores single-turn completions with a reward-model "
                     "checkpoint, so it cannot run your workflow and judge"),),
)
