"""`POST /v1/responses`: OpenAI's Responses API on the gateway, for agents that speak it (the OpenAI
Agents SDK does by default).

A Responses request is translated into the chat request it means, and answered by the very path a
chat completion takes (`Gateway.run_call`: the episode key, the renderer, the engine, the tool-call
parser, the tracker), so the recorded tokens are the engine's own and the episode key travels the same
way (`Authorization: Bearer <key>`). The chat answer is then written back as a Response object, or as
the Responses API's server-sent events when `stream` is set.

    input "text"                                   one user message
    instructions                                   a system message first
    {"role": ..., "content": str | parts}          a message (input_text / output_text parts)
    {"type": "function_call", call_id, name, arguments}     a tool call of the assistant message before it
    {"type": "function_call_output", call_id, output}       a tool message
    {"type": "reasoning", ...}                     skipped (the gateway never sends reasoning items)

Consecutive assistant items (its text, then its function calls) are one assistant chat message, as
the chat answer they came from was: so a history sent back unchanged splices the generated tokens
in, and a multi-turn episode merges into one sample. Nothing is stored: `previous_response_id` and
`item_reference` are refused (400); send the whole conversation (`store: false`, the Agents SDK's way
without a server-side conversation). Tools other than `function` (web search, file search, computer
use) are refused too: the gateway runs no hosted tool.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ajet.gateway.chat_request import ChatRequest, parse_chat_request
from ajet.gateway.request import bad_request, validate

_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")


class ResponsesRequest(BaseModel):
    """The fields of a Responses request that ajet honours; other fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: str | None = None
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    stream: bool = False
    text: dict[str, Any] | None = None
    previous_response_id: str | None = None
    top_logprobs: int | None = None


def parse_responses_request(body: Any) -> tuple[ResponsesRequest, ChatRequest]:
    """The request, and the chat request it means (checked by the chat request's own rules)."""
    req = validate(ResponsesRequest, body, unions={"input": "input must be a string or a list of input items"})
    if req.previous_response_id:
        raise bad_request("previous_response_id is not supported: the gateway stores no responses; send the "
                          "whole conversation as input (store: false)", "previous_response_id")
    if req.top_logprobs:
        raise bad_request("top_logprobs is not supported: ajet's engines return the sampled token's logprob only",
                          "top_logprobs")
    chat: dict[str, Any] = {"messages": _messages(req)}
    for key in ("model", "temperature", "top_p", "parallel_tool_calls"):
        if getattr(req, key) is not None:
            chat[key] = getattr(req, key)
    if req.max_output_tokens is not None:
        chat["max_tokens"] = req.max_output_tokens
    if req.tools:
        chat["tools"] = [_tool(t, f"tools.{i}") for i, t in enumerate(req.tools)]
    if req.tool_choice is not None:
        chat["tool_choice"] = _tool_choice(req.tool_choice)
    fmt = (req.text or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        chat["response_format"] = {"type": "json_schema", "json_schema": {
            "name": fmt.get("name", "response"), "schema": fmt.get("schema", {}), "strict": fmt.get("strict")}}
    elif isinstance(fmt, dict) and fmt.get("type") in ("json_object", "text"):
        chat["response_format"] = {"type": fmt["type"]}
    return req, parse_chat_request(chat)


def _messages(req: ResponsesRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": req.instructions}] if req.instructions else []
    if isinstance(req.input, str):
        return [*messages, {"role": "user", "content": req.input}]
    assistant: dict[str, Any] | None = None  # the assistant message being gathered from consecutive items
    for i, item in enumerate(req.input):
        where = f"input.{i}"
        kind = item.get("type", "message")
        if kind == "reasoning":
            continue
        if kind == "message" and item.get("role") == "assistant":
            if assistant is None or assistant.get("tool_calls"):  # text after calls starts a new message
                assistant = {"role": "assistant", "content": None}
                messages.append(assistant)
            text = _text(item.get("content"), where)
            assistant["content"] = (assistant["content"] or "") + text if text else assistant["content"]
            continue
        if kind == "function_call":
            if assistant is None:
                assistant = {"role": "assistant", "content": None}
                messages.append(assistant)
            assistant.setdefault("tool_calls", []).append({
                "id": _string(item, "call_id", where), "type": "function",
                "function": {"name": _string(item, "name", where), "arguments": _string(item, "arguments", where)}})
            continue
        assistant = None
        if kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": _string(item, "call_id", where),
                             "content": output if isinstance(output, str) else _text(output, f"{where}.output")})
        elif kind == "message":
            role = item.get("role")
            if role not in ("system", "developer", "user"):
                raise bad_request(f"{where}.role is {role!r}; expected system, developer, user or assistant",
                                  f"{where}.role")
            messages.append({"role": role, "content": _text(item.get("content"), where)})
        else:
            raise bad_request(f"{where} is a {kind!r} item; the gateway takes messages, function_call, "
                              "function_call_output and reasoning items (it stores nothing to refer to)", where)
    if not messages:
        raise bad_request("input holds no message", "input")
    return messages


def _text(content: Any, where: str) -> str:
    """A message's content (a string, or text parts) as one string."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"{where}.content must be a string or a list of text parts", f"{where}.content")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        if kind not in _TEXT_PARTS or not isinstance(part.get(kind if kind == "refusal" else "text"), str):
            raise bad_request(f"{where}.content.{j} is a {kind!r} part; only text parts (input_text, "
                              "output_text) are supported", f"{where}.content")
        texts.append(part["refusal" if kind == "refusal" else "text"])
    return "".join(texts)


def _string(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise bad_request(f"{where}.{key} must be a string, got {type(value).__name__}", f"{where}.{key}")
    return value


def _tool(tool: dict[str, Any], where: str) -> dict[str, Any]:
    if tool.get("type") != "function":
        raise bad_request(f"{where} is a {tool.get('type')!r} tool; the gateway runs no hosted tool, only "
                          "'function' tools", "tools")
    function = {k: tool[k] for k in ("name", "description", "parameters") if tool.get(k) is not None}
    return {"type": "function", "function": function}


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, dict) and choice.get("type") == "function" and "function" not in choice:
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


# ---------------------------------------------------------------------------------------- answers


def to_response(result: dict[str, Any], req: ResponsesRequest) -> dict[str, Any]:
    """A chat completion (`Gateway.run_call`'s result) as a Response object."""
    choice = result["choices"][0]
    message = choice["message"]
    output: list[dict[str, Any]] = []
    if message.get("content") or not message.get("tool_calls"):
        part = {"type": "output_text", "text": message.get("content") or "", "annotations": []}
        output.append({"type": "message", "id": f"msg_{secrets.token_hex(12)}", "status": "completed",
                       "role": "assistant", "content": [part]})
    for call in message.get("tool_calls") or []:
        output.append({"type": "function_call", "id": f"fc_{secrets.token_hex(12)}", "call_id": call["id"],
                       "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                       "status": "completed"})
    usage = result["usage"]
    cut = choice["finish_reason"] == "length"
    return {
        "id": f"resp_{secrets.token_hex(12)}", "object": "response", "created_at": time.time(),
        "status": "incomplete" if cut else "completed", "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "model": result["model"], "instructions": req.instructions, "output": output,
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "tool_choice": req.tool_choice if req.tool_choice is not None else "auto", "tools": req.tools or [],
        "temperature": req.temperature, "top_p": req.top_p, "max_output_tokens": req.max_output_tokens,
        "text": req.text or {"format": {"type": "text"}}, "metadata": {},
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                  "total_tokens": usage["total_tokens"], "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }


def response_events(response: dict[str, Any]) -> Iterator[str]:
    """The finished Response as the Responses API's stream: created, each output item added, its text
    or arguments as one delta, done, then completed (or incomplete)."""
    sequence = 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal sequence
        sequence += 1
        return f"event: {kind}\ndata: " + json.dumps({"type": kind, "sequence_number": sequence - 1, **fields}) + "\n\n"

    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=opening)
    yield event("response.in_progress", response=opening)
    for index, item in enumerate(response["output"]):
        ids = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            part = item["content"][0]
            empty = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "content": []})
            yield event("response.content_part.added", **ids, content_index=0, part=empty)
            yield event("response.output_text.delta", **ids, content_index=0, delta=part["text"],
                        logprobs=[])
            yield event("response.output_text.done", **ids, content_index=0, text=part["text"],
                        logprobs=[])
            yield event("response.content_part.done", **ids, content_index=0, part=part)
        else:
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "arguments": ""})
            yield event("response.function_call_arguments.delta", **ids, delta=item["arguments"])
            yield event("response.function_call_arguments.done", **ids, arguments=item["arguments"],
                        name=item["name"])
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed" if response["status"] == "completed" else "response.incomplete",
                response=response)


async def create_response(gateway: Any, request: Request) -> Response:
    """The `POST /v1/responses` handler of `gateway` (an `ajet.gateway.server.Gateway`)."""
    outcome = await gateway.run_call(request, parse_responses_request)
    if isinstance(outcome, Response):
        return outcome
    req, result = outcome
    response = to_response(result, req)
    if req.stream:
        return StreamingResponse(response_events(response), media_type="text/event-stream")
    return JSONResponse(response)
