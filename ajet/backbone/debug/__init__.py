"""The debug backbone: every algorithm in one process, on a laptop CPU or one GPU."""

from ajet.backbones import Backbone

BACKBONE = Backbone(
    name="debug",
    summary="in this process (torch + peft): SFT, GRPO, PPO, DPO on CPU or one GPU",
    algorithms=("sft", "grpo", "ppo", "dpo"),
    run="ajet.backbone.debug.run:run",
)
