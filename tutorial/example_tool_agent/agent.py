"""`EnergyAgent`: a natural-gas expert that answers with the tools of an MCP server.

The workflow lists the server's tools, hands them to the model as OpenAI function specs, runs each
tool call the model makes against the server and feeds the result back, until the model answers
in plain text or the turn budget is spent. The model is reached only through
`tuner.openai_client(...)`, so every call is recorded for training.

Workflow arguments (YAML `workflow_args`):
    server: None (default) runs `energy_server.py` in memory; an `http://...` URL connects to a
            running streamable-HTTP server; any other string is a command that starts a stdio
            server in this folder, e.g. "python energy_server.py".
    max_turns: LLM calls per episode when the tuner sets none (default 6).
"""

from __future__ import annotations

from typing import Any

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from mcp_tools import SYSTEM_PROMPT, call_tool, list_openai_tools, open_client

DEFAULT_MAX_TURNS = 6


def assistant_message(message: Any) -> dict[str, Any]:
    """The model's reply as a plain dict to append to the conversation (content "" when it only calls)."""
    entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        entry["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in message.tool_calls
        ]
    return entry


class EnergyAgent(Workflow):
    """Answers energy-market questions by calling the energy MCP server's tools."""

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        max_turns = tuner.max_turns or int(self.kwargs.get("max_turns", DEFAULT_MAX_TURNS))
        llm = tuner.openai_client(agent="assistant")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task.query},
        ]
        records: list[dict[str, Any]] = []
        answer, stop, llm_calls = "", "max_turns", 0
        async with open_client(self.kwargs.get("server")) as mcp:
            tools = await list_openai_tools(mcp)
            for _ in range(max_turns):
                try:
                    response = await llm.chat.completions.create(model=tuner.model, messages=messages, tools=tools)
                except openai.BadRequestError as exc:
                    # e.g. the conversation outgrew the prompt limit: end the episode, let the judge score it.
                    stop = f"llm_refused: {exc.message}"
                    break
                llm_calls += 1
                message = response.choices[0].message
                messages.append(assistant_message(message))
                answer = message.content or ""
                if not message.tool_calls:
                    stop = "answered"
                    break
                for call in message.tool_calls:
                    outcome = await call_tool(mcp, call.function.name, call.function.arguments)
                    records.append(outcome.record())
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
        errors = sum(1 for r in records if "error" in r)
        return WorkflowOutput(
            answer=answer,
            messages=messages,
            tool_calls=records,
            metadata={"tools": tools, "stop_reason": stop},
            metrics={"llm_calls": float(llm_calls), "tool_calls": float(len(records)), "tool_errors": float(errors)},
        )
