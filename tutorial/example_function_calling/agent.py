"""`FunctionCallAgent`: one turn of function calling, scored by the `function_call` judge.

The workflow sends the task's tools (`task.metadata["tools"]`, OpenAI function specs) with the user's
query through `tuner.openai_client(...)` and returns the calls the model made. The tools are not run:
xLAM-style data states the expected calls, not their results, so the judge compares calls.

Workflow arguments (YAML `workflow_args`):
    system_prompt: the system message (default: the one `ajet data xlam` puts in the demonstrations,
                   so SFT and rollouts see the same prompt).
"""

from __future__ import annotations

import json
from typing import Any

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from ajet.task_reader.xlam import SYSTEM_PROMPT


class FunctionCallAgent(Workflow):
    """Asks the model once, with the task's tools, and reports the tool calls it made."""

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        tools = task.metadata.get("tools") or []
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.kwargs.get("system_prompt", SYSTEM_PROMPT)},
            {"role": "user", "content": task.query},
        ]
        llm = tuner.openai_client(agent="assistant")
        try:
            response = await llm.chat.completions.create(model=tuner.model, messages=messages, tools=tools)
        except openai.BadRequestError as exc:  # e.g. a prompt over the limit: nothing called
            return WorkflowOutput(answer="", messages=messages, metadata={"tools": tools, "refused": exc.message})
        message = response.choices[0].message
        calls = []
        for call in message.tool_calls or []:
            try:
                arguments = json.loads(call.function.arguments or "{}")
            except json.JSONDecodeError:
                arguments = call.function.arguments  # the judge counts it as malformed
            calls.append({"name": call.function.name, "arguments": arguments})
        messages.append(message.model_dump(exclude_none=True))
        return WorkflowOutput(answer=message.content or "", messages=messages, tool_calls=calls,
                              metadata={"tools": tools}, metrics={"tool_calls": float(len(calls))})
