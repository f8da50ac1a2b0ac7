"""The swift backbone: the same config trained by ms-swift in its own environment (planned)."""

from ajet.backbone.registry import Backbone

BACKBONE = Backbone(
    name="swift",
    summary="ms-swift in a managed environment (not available in this version yet)",
    algorithms=("sft", "grpo", "dpo"),
    run="ajet.backbone.unavailable:run",
)
