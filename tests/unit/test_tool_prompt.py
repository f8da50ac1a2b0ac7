"""Tool specs as signature lines in the prompt of a template that cannot render tools: each form of
parameter schema, by hand, and the token count on the tool-agent tutorial's eight tools."""

from __future__ import annotations

import json
from pathlib import Path

from ajet.tool_prompt import signature, tools_text

ROOT = Path(__file__).resolve().parents[2]


def _tool(parameters: dict | None, description: str = "Does it.") -> dict:
    function = {"name": "f", "description": description}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def test_plain_parameters_become_a_signature():
    spec = _tool({"type": "object", "required": ["city", "year"], "properties": {
        "city": {"type": "string", "description": "e.g.  Boston", "title": "City"},
        "year": {"type": "integer"},
        "unit": {"type": "string", "enum": ["GJ", "therm"], "default": "GJ"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "flag": {"type": "boolean", "default": False}}})
    assert signature(spec) == ('- f(city: string (e.g. Boston), year: integer, unit?: string one of ["GJ", "therm"] = "GJ", '
                               'tags?: list[string], flag?: boolean = false): Does it.')


def test_what_a_type_name_cannot_say_is_shown_as_its_schema():
    nested = {"type": "object", "properties": {"lat": {"type": "number"}}, "title": "Point"}
    spec = _tool({"type": "object", "required": ["at"], "properties": {
        "at": nested,
        "stops": {"type": "array", "items": nested},
        "when": {"anyOf": [{"type": "string"}, {"type": "null"}]}}})
    assert signature(spec) == (
        '- f(at: {"type": "object", "properties": {"lat": {"type": "number"}}}, '
        'stops?: {"type": "array", "items": {"type": "object", "properties": {"lat": {"type": "number"}}, "title": "Point"}}, '
        'when?: {"anyOf": [{"type": "string"}, {"type": "null"}]}): Does it.')
    # a parameters schema beyond named properties (a $defs table, a oneOf) is shown whole
    refs = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}}
    assert signature(_tool(refs)) == f"- f({json.dumps(refs)}): Does it."


def test_no_parameters_no_description_and_specs_that_are_not_functions():
    assert signature(_tool(None, "")) == "- f()"
    assert signature(_tool({"type": "object", "properties": {}})) == "- f(): Does it."
    assert signature({"name": "bare", "parameters": {"properties": {"x": {"type": "number"}}}}) == "- bare(x?: number)"
    assert signature({"type": "function", "function": {"description": "no name"}}) == \
        '- {"type": "function", "function": {"description": "no name"}}'


def test_the_tutorial_tools_take_under_half_the_tokens_of_their_json(tiny_tokenizer):
    tools = json.loads((ROOT / "tutorial" / "example_tool_agent" / "sft.jsonl").read_text().splitlines()[0])["tools"]
    compact = len(tiny_tokenizer("\n".join(signature(t) for t in tools))["input_ids"])
    as_json = len(tiny_tokenizer("\n".join(json.dumps(t) for t in tools))["input_ids"])
    assert as_json == 751 and compact < as_json / 2
    text = tools_text(tools)
    for tool in tools:  # every name, parameter and description is still there
        function = tool["function"]
        assert function["name"] in text and function["description"] in text
        assert all(f"{name}" in text for name in function["parameters"]["properties"])
