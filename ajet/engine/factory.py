"""Build the engine a config names: `hf` (in-process), `remote` (a completions server), `replay`, or
`chat_api` (a chat endpoint: eval and generation only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ajet.engine.base import Engine

if TYPE_CHECKING:
    from ajet.config.schema import AjetConfig


def load_tokenizer(cfg: AjetConfig) -> Any:
    """The tokenizer of `cfg.model.path` (resolved like the model: embedded, tiny, folder or hub id)."""
    from transformers import AutoTokenizer

    from ajet.errors import ModelError
    from ajet.models import resolve_model_path

    path = resolve_model_path(cfg.model.path)
    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load the tokenizer of model.path={cfg.model.path!r} ({path}): {exc}") from exc


def build_engine(cfg: AjetConfig, tokenizer: Any = None) -> Engine:
    """The engine of `cfg.engine.type`. For `hf` this is an HFEngine whose `.model` the trainer reuses.

    tokenizer: reused when given (replay and remote need one to decode; hf loads its own with the model).
    """
    kind = cfg.engine.type
    if kind == "hf":
        from ajet.engine.hf import HFEngine
        from ajet.engine.model_runner import engine_switch

        # Generation follows the trainer's precision rule (model.autocast), so eval sees what training sees.
        return HFEngine.from_pretrained(
            cfg.model.path, device=cfg.model.device, dtype=cfg.model.dtype,
            max_batch_size=cfg.engine.max_batch_size, seed=cfg.engine.seed,
            prefix_cache_mb=cfg.engine.prefix_cache_mb, autocast=cfg.model.autocast,
            pack_weights=engine_switch(cfg.engine.pack_weights),
        )
    if kind == "remote" and cfg.engine.base_urls:
        from ajet.engine.replicas import ReplicatedEngine

        return ReplicatedEngine(list(cfg.engine.base_urls), model=cfg.engine.model, api_key=cfg.engine.api_key,
                                timeout_s=cfg.engine.request_timeout_s, tokenizer=tokenizer)
    if kind == "remote":
        from ajet.engine.remote import RemoteEngine

        return RemoteEngine(
            cfg.engine.base_url or "", model=cfg.engine.model, api_key=cfg.engine.api_key,
            timeout_s=cfg.engine.request_timeout_s, tokenizer=tokenizer,
        )
    if kind == "chat_api":
        from ajet.engine.chat_api import ChatAPIEngine

        return ChatAPIEngine(cfg.engine.base_url or "", model=cfg.engine.model, api_key=cfg.engine.api_key,
                             timeout_s=cfg.engine.request_timeout_s)
    if kind == "replay":
        from ajet.engine.replay import ReplayEngine

        return ReplayEngine(cfg.engine.replay_file or "", tokenizer if tokenizer is not None else load_tokenizer(cfg))
    raise AssertionError(f"engine.type {kind!r} passed validation but has no builder")  # Literal guards this
