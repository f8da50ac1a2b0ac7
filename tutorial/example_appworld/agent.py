"""`AppAgent`: does what the user asks on their phone, by calling the apps' tools.

Each episode builds its own `World` (appworld_env.py): the contacts, calendar and payments as they
are at the start, changed only by this episode's tool calls, and thrown away at its end. The loop
is the usual tool loop (call the model with the five tools, run the calls it makes, feed back the
results, stop on a plain-text reply or when the turn budget is spent). The episode's final state
goes into `metadata["final_state"]`, where the judge (judge.py) reads it: the reply's text is
never scored.

Workflow arguments (YAML `workflow_args`):
    system_prompt: the system message.
    max_turns: LLM calls per episode when the tuner sets none (default 4).
"""

from __future__ import annotations

from typing import Any

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from ajet.workflows.mcp_agent import assistant_message
from appworld_env import SYSTEM_PROMPT, TOOLS, World

DEFAULT_MAX_TURNS = 4


class AppAgent(Workflow):
    """One request, one fresh world; the apps' final state is the outcome."""

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        max_turns = tuner.max_turns or int(self.kwargs.get("max_turns", DEFAULT_MAX_TURNS))
        world = World()  # per episode: concurrent episodes never share state
        llm = tuner.openai_client(agent="assistant")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.kwargs.get("system_prompt", SYSTEM_PROMPT)},
            {"role": "user", "content": task.query},
        ]
        records: list[dict[str, Any]] = []
        answer, stop = "", "max_turns"
        for _ in range(max_turns):
            try:
                response = await llm.chat.completions.create(model=tuner.model, messages=messages, tools=TOOLS)
            except openai.BadRequestError as exc:  # e.g. prompt too long: end here, the state is judged as it is
                stop = f"llm_refused: {exc.message}"
                break
            message = response.choices[0].message
            answer = message.content or ""
            messages.append(assistant_message(message))  # sent back unchanged: exact tokens
            if not message.tool_calls:
                stop = "answered"
                break
            for call in message.tool_calls:
                content, record = world.call(call.function.name, call.function.arguments)
                records.append(record)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return WorkflowOutput(
            answer=answer, messages=messages, tool_calls=records,
            metadata={"tools": TOOLS, "stop_reason": stop, "final_state": world.state},
            metrics={"tool_calls": float(len(records)), "tool_errors": float(world.errors),
                     "invalid_observations": float(world.invalid_observations)},
        )
