"""Load the user's workflow from a config: in the driver, and in each Ray worker (ajet.rollout.ray_worker)."""

from __future__ import annotations

import inspect

from ajet.config.schema import AjetConfig
from ajet.errors import ConfigError, PluginError
from ajet.plugins import load_object
from ajet.workflow import Workflow


def workflow_class(cfg: AjetConfig) -> type[Workflow]:
    """The workflow class, loaded and checked against `workflow_args` without constructing it."""
    try:
        cls = load_object(cfg.workflow, cfg.base_dir)
    except PluginError as exc:
        raise PluginError(f"ajet.workflow = {cfg.workflow!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Workflow)):
        raise PluginError(f"workflow {cfg.workflow!r} is {cls!r}; it must be a subclass of ajet.Workflow")
    try:
        inspect.signature(cls).bind(**cfg.workflow_args)
    except TypeError as exc:
        raise ConfigError(f"ajet.workflow_args do not fit {cls.__name__}: {exc}") from None
    return cls


def load_workflow(cfg: AjetConfig) -> Workflow:
    cls = workflow_class(cfg)
    try:
        workflow = cls(**cfg.workflow_args)
    except TypeError as exc:
        raise ConfigError(f"ajet.workflow_args do not fit {cls.__name__}: {exc}") from exc
    except Exception as exc:  # the user's __init__ failed: say so, without a traceback from deep inside
        raise PluginError(f"{cls.__name__}(**ajet.workflow_args) raised {type(exc).__name__}: {exc}") from exc
    workflow.base_dir = cfg.base_dir
    return workflow
