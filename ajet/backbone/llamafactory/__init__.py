"""The llamafactory backbone: SFT and DPO by LLaMA-Factory in its own environment (planned)."""

from ajet.backbone.registry import Backbone

BACKBONE = Backbone(
    name="llamafactory",
    summary="LLaMA-Factory in a managed environment (not available in this version yet)",
    algorithms=("sft", "dpo"),
    run="ajet.backbone.unavailable:run",
)
