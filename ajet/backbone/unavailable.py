"""Stand-in `run` of a registered backbone whose implementation has not landed yet."""

from __future__ import annotations

from typing import Any

from ajet.errors import ConfigError


def run(cfg: Any, resume: bool | str = False) -> dict[str, Any]:
    raise ConfigError(
        f"--backbone={cfg.backbone.name} is not available in this version of ajet; use --backbone=debug "
        "(it trains SFT, GRPO and DPO in one process on CPU or GPU)")
