"""Every error ajet raises on purpose.

    AjetError                    base; the CLI prints its message and exits with code 2
    ├── ConfigError              a config value is invalid (names key path, value, expectation, file)
    ├── PluginError              a `pkg.mod:Name` / `path/file.py:Name` reference cannot be loaded
    ├── TaskReaderError          a task source is missing or has no usable row
    ├── ModelError               a model path cannot be resolved or loaded
    ├── EngineError              the inference engine failed to generate
    ├── GatewayError             a gateway request was refused (carries an HTTP status)
    ├── JudgeError               a judge could not score an episode
    ├── CheckpointError          a checkpoint is missing, partial or incompatible
    ├── BackboneError            a backbone's environment or subprocess failed (swift, llamafactory)  exit 1
    └── TrainingError            training cannot go on (updates non-finite N times in a row)        exit 1

Messages state the rule, the value seen, and what to do about it.
"""

from __future__ import annotations


class AjetError(Exception):
    """Base of every deliberate ajet error. The CLI shows its message without a traceback."""

    exit_code = 2


class ConfigError(AjetError):
    """A configuration value is invalid or unknown."""


class PluginError(AjetError):
    """A plugin reference (`module.path:Name` or `path/to/file.py:Name`) cannot be loaded."""


class TaskReaderError(AjetError):
    """A task source is missing, unreadable or has no usable rows."""


class ModelError(AjetError):
    """A model cannot be resolved or loaded."""


class EngineError(AjetError):
    """The inference engine failed."""


class GatewayError(AjetError):
    """A gateway request was refused; `status` is the HTTP status to answer with, `param` the request
    field at fault (OpenAI's `error.param`), when there is one."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_request_error",
                 param: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param


class JudgeError(AjetError):
    """A judge could not score an episode."""


class CheckpointError(AjetError):
    """A checkpoint is missing, partial or does not fit the run."""


class BackboneError(AjetError):
    """A backbone could not run: its managed environment failed to build, or its training subprocess
    exited non-zero (the message carries the backend's own error text). Exit code 1: the config was
    valid, the run itself failed."""

    exit_code = 1


class TrainingError(AjetError):
    """Training stopped because going on would corrupt the run (e.g. the loss or the gradients were
    non-finite for `trainer.max_nonfinite_updates` updates in a row). The last checkpoint is intact.
    Exit code 1: the config was valid, the run itself failed."""

    exit_code = 1
