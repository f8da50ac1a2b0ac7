"""What a `/v1/chat/completions` request may hold, checked before anything renders or generates.

Messages, content parts, tool calls and tool specs are checked shape by shape, so a request the
renderer, the tracker or the tool-call parser could trip over is refused here with a 400 naming the
field (`messages.1.tool_calls.0.function.name`). Fields ajet does not use are accepted and ignored,
except the sampling options OpenAI defines that an engine would have to apply (penalties,
`logit_bias`, `top_logprobs` alternatives): those are checked like completions checks them, and a
value other than the neutral one is refused (400 naming it) rather than silently not applied, and so
is vLLM's request-level `chat_template` (the server renders with its own template).
`logprobs: true` is honoured: the sampled tokens' logprobs come back in `choices[0].logprobs.content`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from ajet.gateway.request import bad_request as _bad
from ajet.gateway.request import check_sampling, refuse_unsupported, validate

ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_CHOICES = ("none", "auto", "required")
MAX_TOP_LOGPROBS = 20  # OpenAI's and vLLM's limit
# OpenAI's sampling options the engines cannot apply, accepted only at these neutral values.
_UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "presence_penalty": (None, 0.0), "frequency_penalty": (None, 0.0), "logit_bias": (None, {})}


class ChatRequest(BaseModel):
    """The fields of an OpenAI chat request that ajet honours; other fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: str | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    n: int | None = Field(None, ge=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    seed: int | None = None
    logprobs: StrictBool | None = None
    top_logprobs: StrictInt | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    chat_template: Any = None  # vLLM's per-request template: refused, the server's own template renders
    chat_template_kwargs: Any = None  # vLLM's extra template variables (enable_thinking, ...): refused unless empty


def parse_chat_request(body: Any) -> ChatRequest:
    """Validate a parsed request body; raises GatewayError(400) naming the field at fault."""
    chat = validate(ChatRequest, body, unions={
        "stop": "stop must be a string or a list of strings",
        "tool_choice": "tool_choice must be 'none', 'auto', 'required' or a function object"})
    for i, message in enumerate(chat.messages):
        _check_message(message, f"messages.{i}")
    for i, tool in enumerate(chat.tools or []):
        _check_tool(tool, f"tools.{i}")
    _check_tool_choice(chat.tool_choice)
    if (chat.n or 1) != 1:
        raise _bad("only n=1 is supported; send n separate requests", "n")
    if isinstance(chat.stream_options, dict) and not isinstance(chat.stream_options.get("include_usage", False), bool):
        raise _bad("stream_options.include_usage must be true or false", "stream_options")
    check_sampling(temperature=chat.temperature, top_p=chat.top_p, seed=chat.seed, stop=chat.stop)
    _check_unsupported(chat)
    return chat


def _check_unsupported(chat: ChatRequest) -> None:
    """Options the engines cannot apply, refused at any value but the neutral one (`refuse_unsupported`,
    as completions refuses its own)."""
    if chat.top_logprobs is not None and chat.logprobs is not True:
        raise _bad("top_logprobs needs logprobs: true", "top_logprobs")
    if chat.top_logprobs:
        raise _bad(f"top_logprobs={chat.top_logprobs} is not supported: ajet's engines return the logprob of the "
                   "sampled token only (logprobs: true), not alternatives; use top_logprobs 0 or leave it out",
                   "top_logprobs")
    for key, value in (chat.logit_bias or {}).items():  # a malformed map gets its own message first
        if not key.isdigit() or not -100 <= value <= 100:
            raise _bad(f"logit_bias maps token ids (integer strings) to numbers in [-100, 100]; got {key!r}: "
                       f"{value!r}", "logit_bias")
    refuse_unsupported(chat, _UNSUPPORTED)
    if chat.chat_template is not None:
        raise _bad("chat_template in a request is not supported: every request is rendered with the template the "
                   "server was started with (ajet serve --chat-template, or model.chat_template in training), so "
                   "the tokens match what is trained; leave it out", "chat_template")
    if chat.chat_template_kwargs not in (None, {}):
        raise _bad(f"chat_template_kwargs={chat.chat_template_kwargs!r} is not supported: the server's template is "
                   "rendered with the messages and tools only, as in training (vLLM would pass these variables, "
                   "e.g. enable_thinking, to its template); leave it out", "chat_template_kwargs")


def tool_names(tools: list[dict[str, Any]] | None) -> set[str]:
    """The function names of checked tool specs."""
    return {t["function"]["name"] for t in tools or []}


def _check_message(message: dict[str, Any], where: str) -> None:
    role = message.get("role")
    if role not in ROLES:
        raise _bad(f"{where}.role is {role!r}; expected one of {', '.join(ROLES)}", f"{where}.role")
    content = message.get("content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type", "text") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise _bad(f"{where}.content.{j} is a {kind!r} part; only text parts "
                           '({"type": "text", "text": "..."}) are supported', f"{where}.content")
            if not isinstance(part.get("text"), str):
                raise _bad(f"{where}.content.{j}.text must be a string, got {_kind(part.get('text'))}",
                           f"{where}.content")
    elif content is not None and not isinstance(content, str):
        raise _bad(f"{where}.content must be a string, a list of text parts, or null; got {_kind(content)}",
                   f"{where}.content")
    for key in ("name", "tool_call_id"):
        if message.get(key) is not None and not isinstance(message[key], str):
            raise _bad(f"{where}.{key} must be a string, got {_kind(message[key])}", f"{where}.{key}")
    calls = message.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise _bad(f"{where}.tool_calls must be a list, got {_kind(calls)}", f"{where}.tool_calls")
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls.{j}"
        function = call.get("function") if isinstance(call, dict) else call
        if not isinstance(call, dict) or not isinstance(function, dict):
            raise _bad(f"{at} must be an object with a 'function' object, got {_kind(function)}", f"{where}.tool_calls")
        if not isinstance(function.get("name"), str):
            raise _bad(f"{at}.function.name must be a string, got {_kind(function.get('name'))}", f"{where}.tool_calls")
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, (str, dict)):
            raise _bad(f"{at}.function.arguments must be a JSON string (or an object), got {_kind(arguments)}",
                       f"{where}.tool_calls")
        if call.get("id") is not None and not isinstance(call["id"], str):
            raise _bad(f"{at}.id must be a string, got {_kind(call['id'])}", f"{where}.tool_calls")


def _check_tool(tool: dict[str, Any], where: str) -> None:
    if tool.get("type", "function") != "function":
        raise _bad(f"{where}.type is {tool.get('type')!r}; only 'function' tools are supported", "tools")
    function = tool.get("function")
    if not isinstance(function, dict):
        raise _bad(f"{where}.function must be an object with a name, got {_kind(function)}", "tools")
    if not isinstance(function.get("name"), str) or not function["name"]:
        raise _bad(f"{where}.function.name must be a non-empty string, got {_kind(function.get('name'))}", "tools")
    for key, kind in (("description", str), ("parameters", dict)):
        if function.get(key) is not None and not isinstance(function[key], kind):
            raise _bad(f"{where}.function.{key} must be a{'n object' if kind is dict else ' string'}, "
                       f"got {_kind(function[key])}", "tools")


def _check_tool_choice(choice: Any) -> None:
    if choice is None or choice in TOOL_CHOICES:
        return
    if isinstance(choice, dict):
        function = choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return
        raise _bad('tool_choice must be {"type": "function", "function": {"name": "..."}}', "tool_choice")
    raise _bad(f"tool_choice is {choice!r}; expected one of {', '.join(TOOL_CHOICES)} or a function object",
               "tool_choice")


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {str(value)[:40]!r}"

