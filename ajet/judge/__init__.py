"""Judges score episodes. `build_judge(cfg)` is the entry point; the built-ins are listed in
`BUILTIN_JUDGES` and documented in docs/judges.md."""

from ajet.judge.base import Judge, Reward
from ajet.judge.registry import BUILTIN_JUDGES, build_judge

__all__ = ["BUILTIN_JUDGES", "Judge", "Reward", "build_judge"]
