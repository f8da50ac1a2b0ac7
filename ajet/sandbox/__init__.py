"""Run untrusted Python (code a model wrote) in a process the kernel confines: `run_python` and its
limits and result (ajet/sandbox/run.py); the bubblewrap walls (bwrap.py); the child's bootstrap
(bootstrap.py)."""

from ajet.sandbox.run import (
    ISOLATIONS,
    TRUNCATED,
    Isolation,
    SandboxLimits,
    SandboxResult,
    check_isolation,
    run_python,
    run_python_async,
)

__all__ = ["ISOLATIONS", "TRUNCATED", "Isolation", "SandboxLimits", "SandboxResult", "check_isolation", "run_python",
           "run_python_async"]
