"""Assemble what a rollout needs from a config: engine, gateway server, workflow, judge, writer."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ajet.config.schema import AjetConfig
from ajet.engine.base import Engine
from ajet.gateway.server import Gateway, GatewayServer, create_app
from ajet.loopback import is_loopback
from ajet.judge import build_judge
from ajet.models import read_chat_template
from ajet.rollout.episode import EpisodeWriter
from ajet.rollout.loading import load_workflow, workflow_class
from ajet.rollout.runner import RolloutRunner, RolloutSettings

__all__ = ["RolloutStack", "load_tokenizer", "load_workflow", "settings_for", "workflow_class"]

log = logging.getLogger(__name__)


def load_tokenizer(cfg: AjetConfig, engine: Engine | None = None) -> Any:
    """The engine's own tokenizer when it has one (hf, replay), else the configured model's."""
    tokenizer = getattr(engine, "tokenizer", None)
    if tokenizer is not None or getattr(engine, "chat_api", False):  # a chat-API engine needs none
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
        if getattr(engine, "chat_api", False):  # a chat endpoint: forward messages, record no tokens
            from ajet.gateway.passthrough import PassthroughGateway

            self.gateway = PassthroughGateway(engine, max_request_bytes=cfg.gateway.max_request_bytes)
        else:
            self.gateway = Gateway(
                engine, tokenizer, chat_template=read_chat_template(cfg.model.chat_template),
                max_request_bytes=cfg.gateway.max_request_bytes, max_prompt_tokens=cfg.rollout.max_prompt_tokens,
            )
        # Bound beyond loopback (a Ray cluster's workers call it): every route needs a live episode key.
        self.gateway.exposed = not is_loopback(cfg.gateway.host)
        self.app = create_app(self.gateway)
        self.server = GatewayServer(self.app, cfg.gateway.host, cfg.gateway.port)
        self.workflow = load_workflow(cfg)
        self.judge = build_judge(cfg.judge, cfg.base_dir)
        self.writer = EpisodeWriter(run_dir / episodes_file) if run_dir is not None else None
        self.runner: RolloutRunner | None = None
        self.pool = None  # the RayEpisodePool with ray.enabled

    async def __aenter__(self) -> RolloutStack:
        await self.engine.start()
        base_url = await self.server.start()
        if self.cfg.ray.enabled:
            from ajet.rollout.ray_pool import RayEpisodePool

            self.pool = RayEpisodePool(self.cfg)
            try:  # blocking for the seconds Ray takes to start: nothing else runs yet
                self.pool.start(base_url, self.cfg.gateway.host)
            except BaseException:
                await self.server.stop()
                raise
        external = {name: (a.model.base_url, a.model.model, a.model.api_key)
                    for name, a in self.cfg.agents.items() if a.model is not None and not self.cfg.is_trainable(name)}
        self.runner = RolloutRunner(self.gateway, base_url, self.workflow, self.judge,
                                    is_trained=self.cfg.is_trainable, external_agents=external, writer=self.writer,
                                    remote=self.pool, app=self.app)
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            await self.judge.aclose()
        except Exception as error:  # noqa: BLE001 - a judge failing to clean up must not end the run
            log.warning("the judge's aclose() failed: %s: %s", type(error).__name__, error)
        if self.pool is not None:
            self.pool.shutdown()
        await self.server.stop()
        if self.writer is not None:
            self.writer.close()
