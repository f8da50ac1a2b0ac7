"""Backbones run training. `debug` trains in-process; `swift` and `llamafactory` compile the config
for those frameworks (planned, see docs/backends.md)."""

from __future__ import annotations

from typing import Any

from ajet.config.schema import AjetConfig
from ajet.errors import ConfigError


def run(cfg: AjetConfig, resume: bool | str = False) -> dict[str, Any]:
    """Train with the backbone `cfg.backbone.name`."""
    name = cfg.backbone.name
    if name == "debug":
        from ajet.backbone.debug import run as run_debug

        return run_debug(cfg, resume)
    raise ConfigError(
        f"--backbone={name} is not available in this version of ajet; use --backbone=debug "
        "(it trains SFT, GRPO and DPO in one process on CPU or GPU)"
    )
