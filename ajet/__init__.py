"""ajet: tune the language model behind an agent.

    from ajet import Workflow, Task, Tuner, WorkflowOutput, Judge, Reward
"""

from ajet.errors import AjetError, ConfigError, PluginError
from ajet.judge.base import Judge
from ajet.reward import Reward
from ajet.samples import Sample
from ajet.tuner import Tuner
from ajet.workflow import Task, Workflow, WorkflowOutput

__version__ = "0.1.0"

__all__ = [
    "AjetError",
    "ConfigError",
    "Judge",
    "PluginError",
    "Reward",
    "Sample",
    "Task",
    "Tuner",
    "Workflow",
    "WorkflowOutput",
]
