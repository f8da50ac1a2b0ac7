"""The debug backbone: every algorithm in one process, on a laptop CPU or one GPU."""

from ajet.backbone.debug.run import DebugRun, run

__all__ = ["DebugRun", "run"]
