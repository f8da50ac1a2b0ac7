"""Start a training run on the backbone its config names (`ajet.backbones` finds it), after the inputs
every backbone shares are checked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ajet.backbones import get
from ajet.errors import ConfigError

if TYPE_CHECKING:
    from ajet.config.schema import AjetConfig


def run_backbone(cfg: AjetConfig, resume: bool | str = False) -> dict[str, Any]:
    """Train `cfg` with the backbone `cfg.backbone.name`, after checking its inputs (in seconds, before
    any weights load or backend environment is built)."""
    from ajet.backbone.preflight import check_inputs

    if cfg.engine.type == "chat_api":
        from ajet.engine.chat_api import TRAIN_REFUSAL

        raise ConfigError(f"invalid config: {TRAIN_REFUSAL}")
    backbone = get(cfg.backbone.name)
    backbone.check(cfg)
    check_inputs(cfg, "train")
    return backbone.call("run", cfg, resume)
