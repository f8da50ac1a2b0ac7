"""The chat template an export carries, so that any server renders tools as ajet trained with them.

A model whose own template cannot render tools (SmolLM2's) is trained on messages that ajet rewrote
first (`ajet.render`): the tools as one signature line each in the system message
(`ajet.tool_prompt`), assistant calls as `<tool_call>` JSON, tool results as `<tool_response>` text.
Exported with its original template, the model served by vLLM or llama.cpp would never see its tools.
`served_template(template)` is the same rewrite in Jinja, put before the original template: given
`messages` and `tools`, it renders the text ajet's renderer renders, so the tokens match
(tests/unit/test_tool_template.py checks a multi-turn tool episode token for token).

Jinja has no JSON parser: call arguments must reach the template as objects (vLLM and ajet parse
OpenAI's JSON strings before rendering); a string is written as it is, which is the same text
whenever the string is JSON as `json.dumps` writes it. A template that renders tools itself is
returned unchanged.
"""

from __future__ import annotations

import json

from ajet.tool_prompt import (CALL_TEXT, PLAIN_OBJECT_KEYS, RESULT_TEXT, SCALARS, SIMPLE_KEYS, TOOLS_SYSTEM,
                              renders_tools)

# tool_prompt's key sets as Jinja list literals (sorted: the same text on every run)
_SIMPLE_KEYS, _PLAIN_OBJECT_KEYS, _SCALARS = (sorted(keys) for keys in (SIMPLE_KEYS, PLAIN_OBJECT_KEYS, SCALARS))


def _literal(text: str) -> str:
    """`text` as a Jinja string literal (Jinja reads JSON's escapes)."""
    return json.dumps(text)


def _macros() -> str:
    """ajet.tool_prompt's signature() and tools_text() as Jinja macros (same names, same branches)."""
    head, tail = (part.replace("{{", "{").replace("}}", "}") for part in TOOLS_SYSTEM.split("{tools}"))
    return "".join([
        "{%- macro ajet_words(value) -%}{{- (value | string).split() | join(' ') -}}{%- endmacro -%}",
        # json.dumps of a dict without its 'title' key
        "{%- macro ajet_untitled(spec) -%}{{- '{' -}}{%- for key in spec if key != 'title' -%}"
        "{{- key | tojson ~ ': ' ~ spec[key] | tojson -}}{%- if not loop.last -%}{{- ', ' -}}{%- endif -%}"
        "{%- endfor -%}{{- '}' -}}{%- endmacro -%}",
        # _type(): a type name, or nothing when the schema is more than a simple type
        "{%- macro ajet_type(spec) -%}",
        f"{{%- if spec | reject('in', {_SIMPLE_KEYS}) | list | length == 0 -%}}",
        "{%- set kind = spec['type'] if 'type' in spec else ('string' if 'enum' in spec else none) -%}",
        f"{{%- if kind is string and kind in {_SCALARS} -%}}",
        "{%- if 'items' not in spec -%}{{- kind -}}{%- endif -%}",
        "{%- elif kind is string and kind == 'array' -%}",
        # 'items' in spec, not spec['items'] is defined: Jinja falls back to the attribute, dict.items
        "{%- if 'items' not in spec or spec['items'] is none -%}{{- 'list' -}}",
        "{%- elif spec['items'] is mapping and spec['items'] | reject('in', ['type', 'title']) | list | length == 0 -%}",
        "{%- set inner = ajet_type(spec['items']) -%}{%- if inner -%}{{- 'list[' ~ inner ~ ']' -}}{%- endif -%}",
        "{%- endif -%}{%- endif -%}{%- endif -%}{%- endmacro -%}",
        # _argument()
        "{%- macro ajet_argument(name, spec, required) -%}",
        "{{- (name if required else name ~ '?') ~ ': ' -}}",
        "{%- if spec is not mapping -%}{{- spec | tojson -}}{%- else -%}",
        "{%- set kind = ajet_type(spec) -%}",
        "{%- if not kind -%}{{- ajet_untitled(spec) -}}{%- else -%}{{- kind -}}",
        "{%- if spec['enum'] -%}{{- ' one of ' ~ spec['enum'] | tojson -}}{%- endif -%}",
        "{%- if spec['description'] -%}{{- ' (' ~ ajet_words(spec['description']) ~ ')' -}}{%- endif -%}",
        "{%- if 'default' in spec -%}{{- ' = ' ~ spec['default'] | tojson -}}{%- endif -%}",
        "{%- endif -%}{%- endif -%}{%- endmacro -%}",
        # signature()
        "{%- macro ajet_signature(tool) -%}",
        "{%- set function = (tool['function'] if 'function' in tool else tool) if tool is mapping else none -%}",
        "{%- if function is not mapping or function['name'] is not string -%}{{- '- ' ~ tool | tojson -}}",
        "{%- else -%}{{- '- ' ~ function['name'] ~ '(' -}}",
        "{%- set schema = function['parameters'] or {} -%}",
        "{%- set properties = schema['properties'] if schema is mapping else none -%}",
        f"{{%- if properties is not mapping or schema | reject('in', {_PLAIN_OBJECT_KEYS}) | list | length > 0 "
        "or (schema['type'] if 'type' in schema else 'object') != 'object' -%}",
        "{%- if schema -%}{{- schema | tojson -}}{%- endif -%}",
        "{%- else -%}{%- set required = schema['required'] or [] -%}",
        "{%- for name in properties -%}{{- ajet_argument(name, properties[name], name in required) -}}",
        "{%- if not loop.last -%}{{- ', ' -}}{%- endif -%}{%- endfor -%}{%- endif -%}",
        "{{- ')' -}}{%- set description = ajet_words(function['description'] or '') -%}",
        "{%- if description -%}{{- ': ' ~ description -}}{%- endif -%}",
        "{%- endif -%}{%- endmacro -%}",
        # tools_text()
        f"{{%- macro ajet_tools_text(tools) -%}}{{{{- {_literal(head)} -}}}}",
        "{%- for tool in tools -%}{{- ajet_signature(tool) -}}{%- if not loop.last -%}{{- '\\n' -}}{%- endif -%}",
        f"{{%- endfor -%}}{{{{- {_literal(tail)} -}}}}{{%- endmacro -%}}",
    ])


def _rewrite() -> str:
    """ajet.render's _plain_message, _inject_tools and _hermes_message: `messages` rebuilt."""
    call_head, call_tail = CALL_TEXT.split("{}")
    result_head, result_tail = RESULT_TEXT.split("{}")
    return "".join([
        "{%- set ajet = namespace(messages=[]) -%}",
        "{%- for m in messages -%}",
        "{%- if m['content'] is string -%}{%- set content = m['content'] -%}",
        "{%- elif m['content'] is iterable and m['content'] is not mapping -%}",
        "{%- set content = m['content'] | select('mapping') | map(attribute='text', default='') | join('') -%}",
        "{%- else -%}{%- set content = m['content'] or '' -%}{%- endif -%}",
        "{%- if loop.first and tools -%}{%- if m['role'] == 'system' -%}",
        "{%- set content = (content ~ '\\n\\n' ~ ajet_tools_text(tools)) | trim -%}",
        "{%- else -%}{%- set ajet.messages = [{'role': 'system', 'content': ajet_tools_text(tools)}] -%}",
        "{%- endif -%}{%- endif -%}",
        "{%- if m['role'] == 'assistant' and m['tool_calls'] -%}",
        "{%- set parts = namespace(text=content or '') -%}",
        "{%- for call in m['tool_calls'] -%}",
        "{%- set fn = call['function'] if call['function'] is mapping else {} -%}",
        "{%- set name = (fn['name'] if 'name' in fn else none) | tojson -%}",
        "{%- set args = fn['arguments'] if 'arguments' in fn else none -%}",
        "{%- set args = args | trim if args is string else args | tojson -%}",
        f"{{%- set text = {_literal(call_head)} ~ '{{\"name\": ' ~ name ~ ', \"arguments\": ' ~ args ~ '}}' ~ "
        f"{_literal(call_tail)} -%}}",
        "{%- set parts.text = parts.text ~ '\\n' ~ text if parts.text else text -%}",
        "{%- endfor -%}",
        "{%- set ajet.messages = ajet.messages + [{'role': 'assistant', 'content': parts.text}] -%}",
        "{%- elif m['role'] == 'tool' -%}",
        f"{{%- set ajet.messages = ajet.messages + [{{'role': 'tool', 'content': {_literal(result_head)} ~ "
        f"content ~ {_literal(result_tail)}}}] -%}}",
        "{%- else -%}{%- set ajet.messages = ajet.messages + [{'role': m['role'], 'content': content}] -%}",
        "{%- endif -%}{%- endfor -%}",
        "{%- if tools and not messages -%}",
        "{%- set ajet.messages = [{'role': 'system', 'content': ajet_tools_text(tools)}] -%}{%- endif -%}",
        "{%- set messages = ajet.messages -%}",
    ])


def served_template(template: str) -> str:
    """`template` with ajet's tool rewrite in front, when it does not render tools itself; else unchanged."""
    if renders_tools(template):
        return template
    return ("{#- ajet: tools and tool calls rendered as in training (ajet/tool_template.py), then the model's "
            "own template -#}" + _macros() + _rewrite() + template)
