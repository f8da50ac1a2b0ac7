"""`McpAgent`: the built-in tool agent for any MCP server, configured in YAML only.

    ajet:
      workflow: ajet.workflows.mcp_agent:McpAgent      # or the preset: workflow=mcp_agent
      workflow_args:
        server: energy_server.py                       # see ajet.mcp_client for the forms
        system_prompt: You are a natural gas expert. ...
        max_turns: 4

Each episode connects to the server, lists its tools as OpenAI function specs, sends
`[system, user]` with `tools=` through `tuner.openai_client(agent="assistant")`, runs every call
the model makes on the server and feeds the result back as a `tool` message, until the model
answers in plain text or the turn budget is spent. Tool errors (bad JSON, unknown tool, bad
arguments, a tool that raises or hangs) go back to the model as `Error: ...` results; the episode
never crashes on the model's mistakes. A result longer than `max_result_chars` is cut with a
visible marker, and an image, audio or binary result becomes a placeholder such as
`[image/png result: 12,345 bytes, not shown]` (ajet.mcp_client).

The output: `answer` (the final text), `messages`, `tool_calls` (each {"name", "arguments",
"result"}, {..., "error"}, or both for an error-shaped result, see ajet.tool_results),
`metadata.tools` (the specs the model saw), `metadata.stop_reason` (answered | max_turns |
llm_refused: ...) and `metrics`, written to episodes.jsonl: llm_calls, tool_calls, tool_errors
(failed calls and error-shaped results), tool_results_truncated, tool_results_not_shown (results
with a placeholder).
"""

from __future__ import annotations

import asyncio
import difflib
from typing import Any, Literal

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ajet.errors import ConfigError
from ajet.retrieval.agent import ToolRetrieval, ToolRetrievalArgs
from ajet.retrieval.pairs import reference_tools
from ajet.tool_results import DEFAULT_MAX_RESULT_CHARS, record_error
from ajet.workflow import Task, Workflow, WorkflowOutput
from ajet.mcp_client import SERVER_FORMS, call_tool, list_openai_tools, open_client

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant with tools. Answer the user's question by calling the tools; when you "
    "have the result, reply with one short sentence that states it."
)


class McpAgentArgs(BaseModel):
    """The `workflow_args` of the mcp_agent workflow."""

    model_config = ConfigDict(extra="forbid")

    server: str = Field(description=f"The MCP server: {SERVER_FORMS}. Relative paths resolve against the YAML.")
    system_prompt: str = Field(DEFAULT_SYSTEM_PROMPT, description="The system message of every episode.")
    max_turns: int | None = Field(None, ge=1, description="LLM calls per episode; the smaller of this and "
                                  "rollout.max_turns applies. None: rollout.max_turns.")
    tool_choice: Literal["auto", "required", "none"] = Field(
        "auto", description="tool_choice sent with every LLM call (the gateway enforces it by constrained decoding).")
    first_tool_choice: Literal["auto", "required"] | None = Field(
        None, description="tool_choice of the first LLM call only; 'required' makes a model that never calls "
        "tools call one (cold start). None: tool_choice.")
    parallel_tool_calls: bool | None = Field(
        None, description="Sent with every LLM call when set; false: at most one tool call per reply (enforced "
        "by the gateway). None: not sent (the model may call several tools at once).")
    tool_timeout_s: float = Field(30.0, gt=0, description="A tool call running longer is an error result.")
    max_result_chars: int = Field(
        DEFAULT_MAX_RESULT_CHARS, ge=100, description="A tool result longer than this (characters) is cut to "
        "its first max_result_chars, marked '... [truncated: N characters, showing the first M]', and counted "
        "in metrics.tool_results_truncated; a huge result would otherwise overflow the next LLM call.")
    ids_after_names: bool = Field(
        False, description="Show each record of a JSON result with its id fields right after its first text "
        "field ({\"name\": \"Dock\", \"room_id\": \"rm-104\"}): the same data, in the order a small model "
        "copies an id from (ajet.tool_results.ids_after_names). `ajet generate explore` reads it too, so "
        "demonstrations show results as the agent will, and `ajet generate demos` then writes the record's name "
        "and id before a chained call (docs/mcp_pipeline.md). Off by default: on the zoo it passed ids right, "
        "answers no better.")
    tool_retrieval: ToolRetrievalArgs | None = Field(
        None, description="{top_k, retriever}: offer the model only the top_k tools for the task's query "
        "(docs/retrieval.md). None: every tool.")


def assistant_message(message: Any) -> dict[str, Any]:
    """The model's reply as a plain dict to append to the conversation (content "" when it only calls)."""
    entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        entry["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in message.tool_calls
        ]
    return entry


class McpAgent(Workflow):
    """Answers with the tools of the MCP server named in `workflow_args.server`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = _parse_args(kwargs)
        self.retrieval = ToolRetrieval(self.args.tool_retrieval) if self.args.tool_retrieval else None

    async def execute(self, task: Task, tuner: Any) -> WorkflowOutput:
        args = self.args
        limits = [n for n in (tuner.max_turns, args.max_turns) if n]
        max_turns = min(limits) if limits else 6
        llm = tuner.openai_client(agent="assistant")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": args.system_prompt},
            {"role": "user", "content": task.query},
        ]
        records: list[dict[str, Any]] = []
        answer, stop, llm_calls, truncated, not_shown = "", "max_turns", 0, 0, 0
        async with open_client(args.server, self.base_dir) as mcp:
            tools = await list_openai_tools(mcp)
            if self.retrieval:
                tools = await asyncio.to_thread(self.retrieval.select, tools, task.query, self.base_dir,
                                                reference_tools(task.answer))
            for turn in range(max_turns):
                choice = args.first_tool_choice if turn == 0 and args.first_tool_choice else args.tool_choice
                try:
                    extra = {} if args.parallel_tool_calls is None else {"parallel_tool_calls": args.parallel_tool_calls}
                    response = await llm.chat.completions.create(
                        model=tuner.model, messages=messages, tools=tools, tool_choice=choice, **extra)
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
                    outcome = await call_tool(mcp, call.function.name, call.function.arguments, args.tool_timeout_s,
                                              args.max_result_chars, args.ids_after_names)
                    records.append(outcome.record())
                    truncated += outcome.truncated
                    not_shown += outcome.not_shown > 0
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
        errors = sum(1 for r in records if record_error(r) is not None)
        return WorkflowOutput(
            answer=answer,
            messages=messages,
            tool_calls=records,
            metadata={"tools": tools, "stop_reason": stop},
            metrics={"llm_calls": float(llm_calls), "tool_calls": float(len(records)), "tool_errors": float(errors),
                     "tool_results_truncated": float(truncated), "tool_results_not_shown": float(not_shown)},
        )


def _parse_args(kwargs: dict[str, Any]) -> McpAgentArgs:
    allowed = sorted(McpAgentArgs.model_fields)
    for key in kwargs:
        if key not in McpAgentArgs.model_fields:
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(allowed)}"
            raise ConfigError(f"workflow_args.{key}: unknown argument of the mcp_agent workflow; {hint}")
    try:
        return McpAgentArgs.model_validate(kwargs)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        if first["type"] == "missing":
            raise ConfigError(f"workflow_args.{key} is required by the mcp_agent workflow: {SERVER_FORMS}") from None
        raise ConfigError(f"workflow_args.{key} = {first.get('input')!r}: {first['msg']}") from None

