"""Assemble what a rollout needs from a config: engine, gateway server, workflow, judge, writer."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

from ajet.config.schema import AjetConfig
from ajet.engine.base import Engine
from ajet.errors import ConfigError, PluginError
from ajet.gateway.server import Gateway, GatewayServer, create_app
from ajet.judge import build_judge
from ajet.models import read_chat_template
from ajet.plugins import load_object
from ajet.rollout.episode import EpisodeWriter
from ajet.rollout.runner import RolloutRunner, RolloutSettings
from ajet.workflow import Workflow

log = logging.getLogger(__name__)


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
        return cls(**cfg.workflow_args)
    except TypeError as exc:
        raise ConfigError(f"ajet.workflow_args do not fit {cls.__name__}: {exc}") from exc
    except Exception as exc:  # the user's __init__ failed: say so, without a traceback from deep inside
        raise PluginError(f"{cls.__name__}(**ajet.workflow_args) raised {type(exc).__name__}: {exc}") from exc


def load_tokenizer(cfg: AjetConfig, engine: Engine | None = None) -> Any:
    """The engine's own tokenizer when it has one (hf, replay), else the configured model's."""
    tokenizer = getattr(engine, "tokenizer", None)
    if tokenizer is not None:
        return tokenizer
    from ajet.engine.factory import load_tokenizer as model_tokenizer

    return model_tokenizer(cfg)


def settings_for(cfg: AjetConfig, split: str) -> RolloutSettings:
    r = cfg.rollout
    val = split == "val"
    return RolloutSettings(
        group_size=cfg.eval.group_size if val else r.group_size,
        concurrency=r.concurrency,
        temperature=r.val_temperature if val else r.temperature,
        top_p=1.0 if val else r.top_p,
        max_tokens=r.max_tokens_per_turn,
        max_turns=r.max_turns,
        episode_timeout_s=r.episode_timeout_s,
        retries=r.retries,
        merge=cfg.tracker.merge,
        success_threshold=cfg.judge.success_threshold,
        seed=cfg.engine.seed,
    )


class RolloutStack:
    """`async with RolloutStack(cfg, engine, tokenizer, run_dir) as stack: await stack.runner.run(...)`."""

    def __init__(self, cfg: AjetConfig, engine: Engine, tokenizer: Any, run_dir: Path | None,
                 episodes_file: str = "episodes.jsonl") -> None:
        self.cfg = cfg
        self.engine = engine
        self.gateway = Gateway(
            engine, tokenizer, chat_template=read_chat_template(cfg.model.chat_template),
            max_request_bytes=cfg.gateway.max_request_bytes, max_prompt_tokens=cfg.rollout.max_prompt_tokens,
        )
        self.server = GatewayServer(create_app(self.gateway), cfg.gateway.host, cfg.gateway.port)
        self.workflow = load_workflow(cfg)
        self.judge = build_judge(cfg.judge, cfg.base_dir)
        self.writer = EpisodeWriter(run_dir / episodes_file) if run_dir is not None else None
        self.runner: RolloutRunner | None = None

    async def __aenter__(self) -> RolloutStack:
        await self.engine.start()
        base_url = await self.server.start()
        external = {name: (a.model.base_url, a.model.model, a.model.api_key)
                    for name, a in self.cfg.agents.items() if a.model is not None and not self.cfg.is_trainable(name)}
        self.runner = RolloutRunner(self.gateway, base_url, self.workflow, self.judge,
                                    is_trained=self.cfg.is_trainable, external_agents=external, writer=self.writer)
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            await self.judge.aclose()
        except Exception as error:  # noqa: BLE001 - a judge failing to clean up must not end the run
            log.warning("the judge's aclose() failed: %s: %s", type(error).__name__, error)
        await self.server.stop()
        if self.writer is not None:
            self.writer.close()
