"""`MathAgent`: solves arithmetic word problems with a local calculator tool, answering in \\boxed{}.

The smallest useful tool agent: one Python function as the tool (no server), the same loop as
the MCP tutorial (call the model, run the calls it makes, feed results back, stop on a plain-text
reply or when the turn budget is spent). The `math_boxed` judge reads the \\boxed{} answer.

Workflow arguments (YAML `workflow_args`):
    max_turns: LLM calls per episode when the tuner sets none (default 4).
"""

from __future__ import annotations

from typing import Any

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from ajet.workflows.mcp_agent import assistant_message
from math_tools import CALCULATOR_SPEC, SYSTEM_PROMPT, run_calculator

DEFAULT_MAX_TURNS = 4


class MathAgent(Workflow):
    """Answers a word problem, using the calculator tool for the arithmetic."""

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        max_turns = tuner.max_turns or int(self.kwargs.get("max_turns", DEFAULT_MAX_TURNS))
        llm = tuner.openai_client(agent="assistant")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task.query},
        ]
        records: list[dict[str, Any]] = []
        answer, stop = "", "max_turns"
        for _ in range(max_turns):
            try:
                response = await llm.chat.completions.create(
                    model=tuner.model, messages=messages, tools=[CALCULATOR_SPEC]
                )
            except openai.BadRequestError as exc:  # e.g. prompt too long: end here, the judge scores it
                stop = f"llm_refused: {exc.message}"
                break
            message = response.choices[0].message
            answer = message.content or ""
            messages.append(assistant_message(message))  # sent back unchanged: exact tokens
            if not message.tool_calls:
                stop = "answered"
                break
            for call in message.tool_calls:
                content, record = self._run(call.function.name, call.function.arguments)
                records.append(record)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return WorkflowOutput(
            answer=answer,
            messages=messages,
            tool_calls=records,
            metadata={"tools": [CALCULATOR_SPEC], "stop_reason": stop},
        )

    @staticmethod
    def _run(name: str, arguments: str) -> tuple[str, dict[str, Any]]:
        """One tool call: the tool message's content and the call's record."""
        if name != "calculator":
            error = f"unknown tool {name!r}; the only tool is 'calculator'"
            return f"Error: {error}", {"name": name, "arguments": arguments, "error": error}
        return run_calculator(arguments)
