"""The countdown tutorial's workflow with bad behaviour on chosen tasks, for the "bad input" test:
val task 1 raises, task 2 hangs, task 3 never calls the model; the others run the real AgentScope
agent (streaming, to exercise that path against the gateway)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ajet import Task, Tuner, WorkflowOutput
from ajet.plugins import load_object

CountdownWorkflow = load_object(
    f"{Path(__file__).resolve().parents[2] / 'tutorial' / 'example_countdown' / 'agent.py'}:CountdownWorkflow")


class FaultyCountdown(CountdownWorkflow):
    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        if task.task_id.endswith("-001"):
            raise RuntimeError("the agent crashed")
        if task.task_id.endswith("-002"):
            await asyncio.sleep(3600)
        if task.task_id.endswith("-003"):
            return WorkflowOutput(answer="I did not ask the model.")
        return await super().execute(task, tuner)
