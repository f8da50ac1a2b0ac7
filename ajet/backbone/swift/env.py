"""The swift backbone's managed environment: every pinned version in one place.

ms-swift pins transformers, peft, trl and datasets differently from ajet's core, so it runs in its own
virtual environment (`ajet.backbone.envs`). The steps install a CPU torch first (so nothing later
pulls a CUDA build by accident; on a GPU machine install your own CUDA torch and point
`ajet.backbone.swift.python` at that environment), then ms-swift with the libraries it resolves to,
then what ajet's plugin imports inside swift's process that ms-swift does not bring: msgspec (GRPO
needs it; ms-swift forgets to declare it), hydra-core (ajet.config), rich, fastmcp (the MCP
workflows of ajet's tutorials), llguidance (the gateway constrains tool calls with it) and
python-dotenv (the config loader reads `.env` files). A user's `packages` are one more step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ajet.backbone.envs import EnvSpec, ensure_env

MS_SWIFT = "ms-swift==4.6.0"
TORCH = "torch==2.13.0"
SWIFT_STACK = (
    MS_SWIFT,
    "transformers==5.19.0",
    "trl==0.29.1",
    "peft==0.20.0",
    "datasets==4.8.4",
    "accelerate==1.15.0",
    "modelscope==1.40.2",
)
AJET_RUNTIME = (
    "msgspec==0.22.0",
    "hydra-core==1.3.8",
    "rich==15.0.0",
    "fastmcp==4.1.2",
    "llguidance==1.9.1",
    "python-dotenv==1.2.2",
)
CHECK = ("import swift, trl, msgspec, llguidance, ajet.backbone.swift.template; "
         "from swift.rollout.multi_turn import MultiTurnScheduler; from swift.rewards import AsyncORM")


def spec(packages: tuple[str, ...] | list[str] = ()) -> EnvSpec:
    """The environment for ms-swift plus the user's extra `packages` (another set: another environment)."""
    steps: list[tuple[str, ...]] = [(TORCH,), SWIFT_STACK, AJET_RUNTIME]
    if packages:
        steps.append(tuple(packages))
    return EnvSpec(name="swift", steps=tuple(steps), check=CHECK)


def swift_python(python: str | None = None, packages: tuple[str, ...] | list[str] = (), *, force: bool = False,
                 log: Callable[[str], None] | None = None) -> Path:
    """The Python of the swift environment: the user's `python`, or the managed one (built on first use)."""
    return ensure_env(spec(packages), python=python, force=force, log=log)


def setup(python: str | None = None, force: bool = False) -> Path:
    """`ajet setup swift`: build (or check) the environment; returns its Python executable."""
    return swift_python(python, force=force)
