"""How tool specs read in the prompt of a model whose chat template cannot render tools.

Such a template (SmolLM2's, and most small models') gets the tools as text in the system message.
Qwen-style Hermes prompts carry each spec as its full OpenAI JSON, `{"type": "function", "function":
{..., "parameters": {"type": "object", "properties": {...}}}}`: on the tool-agent tutorial's eight
tools that is 751 tokens, paid by every SFT row and every rollout call. Here each tool is one line,
a signature a reader (or a 135M model) takes in at once:

    - convert_price(price: number, from_unit: string "MMBtu, Mcf, therm", to_unit?: string = "GJ"): Convert a price ...

323 tokens for the same eight tools. Nothing of the schema is lost: a parameter whose schema is more
than a type, a description, an enum and a default (nested objects, unions, arrays of objects) shows
its JSON schema after the name instead. Calls are still written as Hermes `<tool_call>` JSON, which
`ajet.gateway.tool_parser` parses. A template that renders tools itself (Qwen2.5, Llama 3.1) never
comes here: it gets the specs as they were sent.
"""

from __future__ import annotations

import json
from typing import Any

TOOLS_SYSTEM = (
    "You can call these functions:\n<tools>\n{tools}\n</tools>\n"
    "To call one, reply with a JSON object with the function name and arguments within "
    "<tool_call></tool_call> tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)

# How a call and a result read in the messages of such a model (ajet.render's Hermes rewrite).
CALL_TEXT = "<tool_call>\n{}\n</tool_call>"
RESULT_TEXT = "<tool_response>\n{}\n</tool_response>"
TAGS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")  # the tags of the two above


def single_token_tags(tokenizer: Any) -> dict[str, int]:
    """The tags of `TAGS` that `tokenizer` holds as one added token each (Qwen2.5's `<tool_call>`: 151657)."""
    added = tokenizer.get_added_vocab() if hasattr(tokenizer, "get_added_vocab") else {}
    return {tag: added[tag] for tag in TAGS if tag in added}

# The schema keys each form may hold; ajet.tool_template writes the same rules into Jinja from these.
SIMPLE_KEYS = frozenset({"type", "description", "enum", "default", "title", "items"})
PLAIN_OBJECT_KEYS = frozenset({"type", "properties", "required", "title", "additionalProperties", "description"})
SCALARS = frozenset({"string", "number", "integer", "boolean", "null"})


def renders_tools(template: str) -> bool:
    """Whether a chat template renders `tools` itself; one that does not gets them here, as text."""
    return "tools" in template


def tools_text(tools: list[dict[str, Any]]) -> str:
    """The system-message text that offers `tools` (OpenAI tool specs)."""
    return TOOLS_SYSTEM.format(tools="\n".join(signature(tool) for tool in tools))


def signature(tool: dict[str, Any]) -> str:
    """One tool as `- name(arg: type "desc", opt?: type = default): description`."""
    function = tool.get("function", tool) if isinstance(tool, dict) else {}
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return "- " + _json(tool)  # not an OpenAI function spec: shown as sent rather than guessed at
    schema = function.get("parameters") or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not _plain_object(schema):
        args = _json(schema) if schema else ""
    else:
        required = set(schema.get("required") or [])
        args = ", ".join(_argument(name, spec, name in required) for name, spec in properties.items())
    description = " ".join(str(function.get("description") or "").split())
    return f"- {function['name']}({args})" + (f": {description}" if description else "")


def _plain_object(schema: dict[str, Any]) -> bool:
    """A parameters schema that is just named properties (what a signature can say whole)."""
    return set(schema) <= PLAIN_OBJECT_KEYS and \
        schema.get("type", "object") == "object"


def _argument(name: str, spec: Any, required: bool) -> str:
    head = name if required else f"{name}?"
    if not isinstance(spec, dict):
        return f"{head}: {_json(spec)}"
    kind = _type(spec)
    if kind is None:  # a schema a type name cannot say: its JSON, minus the noise pydantic adds
        return f"{head}: {_json({k: v for k, v in spec.items() if k != 'title'})}"
    text = f"{head}: {kind}"
    if spec.get("enum"):
        text += f" one of {_json(spec['enum'])}"
    if spec.get("description"):
        text += f" ({' '.join(str(spec['description']).split())})"
    if "default" in spec:
        text += f" = {_json(spec['default'])}"
    return text


def _type(spec: dict[str, Any]) -> str | None:
    """'string', 'integer', 'list[string]'; None when the schema is more than a simple type."""
    if not set(spec) <= SIMPLE_KEYS:
        return None
    kind = spec.get("type", "string" if "enum" in spec else None)
    if not isinstance(kind, str):  # a union (["string", "null"]) or nothing a type name can say
        return None
    if kind in SCALARS:
        return None if "items" in spec else kind
    if kind == "array":
        items = spec.get("items")
        if items is None:
            return "list"
        inner = _type(items) if isinstance(items, dict) and set(items) <= {"type", "title"} else None
        return f"list[{inner}]" if inner else None
    return None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
