"""`ChatWorkflow` (`workflow=chat`): one LLM call per task; the reply is the answer.

For judges that compare an answer (exact_match, math_boxed, llm_judge), and for single-turn
function calling: when the task's metadata holds OpenAI tool specs (under `tools_key`), they are
offered to the model; its calls stay in the reply message (not run), where the `function_call`
judge reads them.
"""

from __future__ import annotations

from typing import Any

from ajet.tuner import Tuner
from ajet.workflow import Task, Workflow, WorkflowOutput


class ChatWorkflow(Workflow):
    """Ask the model the task's query once (after an optional system prompt)."""

    def __init__(self, system_prompt: str | None = None, tools_key: str = "tools") -> None:
        super().__init__(system_prompt=system_prompt, tools_key=tools_key)
        self.system_prompt = system_prompt
        self.tools_key = tools_key

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": task.query})
        tools = task.metadata.get(self.tools_key) or None
        extra = {"tools": tools} if tools else {}
        response = await tuner.openai_client().chat.completions.create(model=tuner.model, messages=messages, **extra)
        message = response.choices[0].message
        reply = message.model_dump(exclude_none=True)
        return WorkflowOutput(answer=message.content or "", messages=[*messages, reply],
                              metadata={"tools": tools} if tools else {})
