"""Configuration: Hydra composes (`ajet.config.loader`), pydantic validates (`ajet.config.schema`)."""

from ajet.config.schema import AjetConfig

__all__ = ["AjetConfig"]
