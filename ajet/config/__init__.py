"""Configuration: Hydra composes (`ajet.config.loader`), pydantic validates (`ajet.config.schema`)."""

from ajet.config.loader import config_to_yaml, load_config, save_resolved_config
from ajet.config.schema import AjetConfig, RootConfig

__all__ = ["AjetConfig", "RootConfig", "config_to_yaml", "load_config", "save_resolved_config"]
