"""Constrained decoding: OpenAI request fields -> GuidedDecoding (ajet.gateway.constraints) -> an
llguidance matcher (ajet.engine.guided), driven token by token with SmolLM2's real tokenizer, and
with the real SmolLM2 model choosing the tokens."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
import torch

from ajet.engine.base import GuidedDecoding
from ajet.engine.guided import GuidedDecodingError, build_matcher, check_spec
from ajet.errors import GatewayError
from ajet.gateway.constraints import guided_decoding
from ajet.gateway.tool_parser import parse_tool_calls

ENERGY = Path(__file__).resolve().parents[2] / "tutorial" / "example_tool_agent"
V = 49152


@pytest.fixture(scope="module")
def energy_tools() -> list[dict]:
    import asyncio

    sys.path.insert(0, str(ENERGY))
    from ajet.mcp_client import list_openai_tools, open_client

    async def listed():
        async with open_client(str(ENERGY / "energy_server.py")) as client:
            return await list_openai_tools(client)

    return asyncio.run(listed())


def walk(matcher, tokenizer, text: str, eos: bool = True) -> bool:
    """Feed `text` (and EOS) token by token; False at the first token the mask forbids."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + ([tokenizer.eos_token_id] if eos else [])
    for token in ids:
        row = torch.zeros(V)
        matcher.mask_logits(row)
        if row[token] == float("-inf"):
            return False
        matcher.accept(token)
    return True


def call_text(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def matcher_for(tokenizer, tools, tool_choice, **kwargs):
    spec = guided_decoding(tools, tool_choice, **kwargs)
    return build_matcher(spec, tokenizer, V)


# ------------------------------------------------------------------ request fields -> spec


def test_no_tools_and_no_format_means_no_constraint(energy_tools):
    assert guided_decoding(None, None) is None
    assert guided_decoding(energy_tools, "none") is None
    assert guided_decoding(None, None, {"type": "text"}) is None


def test_spec_shapes(energy_tools):
    required = guided_decoding(energy_tools, "required")
    assert required.kind == "structural_tag" and required.value["text_allowed"] is False
    assert [t["begin"] for t in required.value["tags"]][0] == '<tool_call>\n{"name": "get_gas_price", "arguments": '
    assert len(required.value["tags"]) == 8 and required.value["max_calls"] is None
    named = guided_decoding(energy_tools, {"type": "function", "function": {"name": "get_production"}})
    assert len(named.value["tags"]) == 1 and named.value["max_calls"] == 1
    assert guided_decoding(energy_tools, "auto", parallel_tool_calls=False).value["max_calls"] == 1
    assert guided_decoding(energy_tools, None).value["text_allowed"] is True
    assert guided_decoding(None, None, {"type": "json_object"}) == GuidedDecoding("json_schema", {"type": "object"})


@pytest.mark.parametrize("tools, choice, fmt, message", [
    ("energy", "sometimes", None, "tool_choice is 'sometimes'; expected 'none', 'auto', 'required'"),
    (None, "required", None, "tool_choice is 'required' but the request has no tools"),
    ("energy", {"type": "function", "function": {"name": "get_oil_price"}}, None,
     "tool_choice names the function 'get_oil_price', which is not in tools (offered: get_gas_price, "),
    (None, {"type": "function", "function": {"name": "f"}}, None, "the request has no tools"),
    ("energy", {"type": "function", "function": {}}, None, "tool_choice.function.name must be a non-empty string"),
    ("energy", {"type": "allowed_tools"}, None, "is not supported"),
    ([{"type": "function", "function": {"description": "x"}}], "required", None, "tools[0] has no function.name"),
    (None, None, {"type": "xml"}, "response_format.type is 'xml'; expected 'text', 'json_object' or 'json_schema'"),
    (None, None, {"type": "json_schema", "json_schema": {"name": "x"}}, "json_schema.schema must be a JSON schema"),
    (None, None, {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "(["}}},
     "cannot compile the json_schema constraint: regex parse error"),
])
def test_contradictory_requests_are_400s(energy_tools, tools, choice, fmt, message):
    with pytest.raises(GatewayError) as info:
        guided_decoding(energy_tools if tools == "energy" else tools, choice, fmt)
    assert message in str(info.value) and info.value.status == 400


# ------------------------------------------------------------------ the matcher, token by token


def test_required_accepts_valid_calls_of_every_tool_and_only_those(tiny_tokenizer, energy_tools):
    good = {
        "get_gas_price": {"city": "Boston"}, "compare_prices": {"city_a": "Boston", "city_b": "Dallas"},
        "get_storage_level": {"region": "East"}, "get_pipeline_flow": {"pipeline": "Transco"},
        "get_weather_demand": {"city": "Denver"}, "get_production": {"state": "Texas", "year": 2021},
        "convert_units": {"value": 2.5, "from_unit": "therm", "to_unit": "MWh"},
        "convert_price": {"price": 3.2, "from_unit": "MMBtu", "to_unit": "Mcf"},
    }
    assert set(good) == {t["function"]["name"] for t in energy_tools}
    for name, args in good.items():
        m = matcher_for(tiny_tokenizer, energy_tools, "required")
        assert walk(m, tiny_tokenizer, call_text(name, args)) and m.done, name
    two = call_text("get_gas_price", {"city": "Boston"}) + "\n" + call_text("convert_price", good["convert_price"])
    m = matcher_for(tiny_tokenizer, energy_tools, "required")
    assert walk(m, tiny_tokenizer, two) and m.done
    for bad in [
        "The price is 4.15.",                                                # text instead of a call
        "Sure! " + call_text("get_gas_price", {"city": "Boston"}),           # text before the call
        call_text("get_oil_price", {"city": "Boston"}),                      # a tool that was not offered
        call_text("get_gas_price", {"town": "Boston"}),                      # an argument not in the schema
        call_text("get_gas_price", {"city": "Boston", "unit": "MMBtu"}),     # an extra one (MCP specs omit
                                                                             # additionalProperties: false)
        call_text("get_production", {"state": "Texas", "year": "2021"}),     # a string where an integer goes
        call_text("get_production", {"state": "Texas"}),                     # a required argument missing
        '<tool_call>\n{"name":"get_gas_price","arguments":{"city":"Boston"}}\n</tool_call>',  # not json.dumps style
    ]:
        m = matcher_for(tiny_tokenizer, energy_tools, "required")
        assert not walk(m, tiny_tokenizer, bad), bad


def test_required_forbids_stopping_before_a_call(tiny_tokenizer, energy_tools):
    m = matcher_for(tiny_tokenizer, energy_tools, "required")
    row = torch.zeros(V)
    m.mask_logits(row)
    assert row[tiny_tokenizer.eos_token_id] == float("-inf")
    allowed = (row == 0).nonzero().flatten().tolist()
    assert allowed and all("<tool_call>".startswith(tiny_tokenizer.decode([t])) for t in allowed)
    with pytest.raises(GuidedDecodingError, match="is not allowed here"):
        m.accept(tiny_tokenizer.eos_token_id)


def test_named_function_and_parallel_calls(tiny_tokenizer, energy_tools):
    named = {"type": "function", "function": {"name": "get_storage_level"}}
    m = matcher_for(tiny_tokenizer, energy_tools, named)
    assert walk(m, tiny_tokenizer, call_text("get_storage_level", {"region": "Pacific"})) and m.done
    # After the one call the grammar is over: only EOS may follow, and the turn ends with it.
    m = matcher_for(tiny_tokenizer, energy_tools, named)
    assert walk(m, tiny_tokenizer, call_text("get_storage_level", {"region": "East"}), eos=False) and not m.done
    row = torch.zeros(V)
    m.mask_logits(row)
    assert (row == 0).nonzero().flatten().tolist() == [tiny_tokenizer.eos_token_id]
    m.accept(tiny_tokenizer.eos_token_id)
    assert m.done
    assert not walk(matcher_for(tiny_tokenizer, energy_tools, named), tiny_tokenizer,
                    call_text("get_gas_price", {"city": "Boston"}))
    twice = call_text("get_storage_level", {"region": "East"}) + "\n" + call_text("get_storage_level", {"region": "Pacific"})
    assert not walk(matcher_for(tiny_tokenizer, energy_tools, named), tiny_tokenizer, twice)
    assert not walk(matcher_for(tiny_tokenizer, energy_tools, "required", parallel_tool_calls=False),
                    tiny_tokenizer, twice)


def test_auto_allows_text_or_valid_calls(tiny_tokenizer, energy_tools):
    for text in ["Natural gas is a fossil fuel.",
                 "Let me look that up.\n" + call_text("get_gas_price", {"city": "Boston"}),
                 call_text("get_weather_demand", {"city": "Denver"})]:
        m = matcher_for(tiny_tokenizer, energy_tools, "auto")
        assert walk(m, tiny_tokenizer, text) and m.done, text
    for bad in [call_text("get_gas_price", {"city": 7}), "ok <tool_call> not json", call_text("nope", {})]:
        assert not walk(matcher_for(tiny_tokenizer, energy_tools, "auto"), tiny_tokenizer, bad), bad


def test_response_format_json_schema_and_object(tiny_tokenizer):
    schema = {"type": "object", "properties": {"questions": {"type": "array", "items": {"type": "string"},
                                                             "minItems": 2, "maxItems": 2}},
              "required": ["questions"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "q", "schema": schema}}
    assert walk(matcher_for(tiny_tokenizer, None, None, response_format=fmt), tiny_tokenizer,
                json.dumps({"questions": ["a?", "b?"]}))
    assert not walk(matcher_for(tiny_tokenizer, None, None, response_format=fmt), tiny_tokenizer,
                    json.dumps({"questions": ["a?"]}))
    assert not walk(matcher_for(tiny_tokenizer, None, None, response_format={"type": "json_object"}),
                    tiny_tokenizer, "[1, 2]")
    assert walk(matcher_for(tiny_tokenizer, None, None, response_format={"type": "json_object"}),
                tiny_tokenizer, '{"a": [1, 2]}')


def test_auto_with_response_format_is_calls_or_fitting_json(tiny_tokenizer, energy_tools):
    fmt = {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {"answer": {"type": "number"}},
                                                             "required": ["answer"]}}}
    ok = [call_text("get_gas_price", {"city": "Boston"}), '{"answer": 4.15}']
    for text in ok:
        assert walk(matcher_for(tiny_tokenizer, energy_tools, "auto", response_format=fmt), tiny_tokenizer, text), text
    assert not walk(matcher_for(tiny_tokenizer, energy_tools, "auto", response_format=fmt), tiny_tokenizer, "It is 4.15")


def test_mask_keeps_allowed_logits_and_pads_the_tail(tiny_tokenizer, energy_tools):
    spec = guided_decoding(energy_tools, "required")
    m = build_matcher(spec, tiny_tokenizer, V)
    row = torch.randn(V + 64)  # a model whose embedding is padded past the tokenizer
    before = row.clone()
    m.mask_logits(row)
    kept = row != float("-inf")
    assert torch.equal(row[kept], before[kept]) and not kept[V:].any() and 0 < int(kept.sum()) < 100


def test_guided_regex_extension_for_numbered_questions(tiny_tokenizer, energy_tools):
    from ajet.generate.tasks import numbered_questions_regex

    spec = guided_decoding(energy_tools, "auto", guided_regex=numbered_questions_regex(2))
    assert spec.kind == "regex"  # vLLM's guided_regex wins over tools
    ok = "1. What is the gas price in Boston today?\n2. How much gas did Texas produce in 2021?\n"
    assert walk(build_matcher(spec, tiny_tokenizer, V), tiny_tokenizer, ok)
    for bad in ['1. {"questions": ["a"]}?\n', "1. What?\n", "What is the gas price in Boston today?\n"]:
        assert not walk(build_matcher(spec, tiny_tokenizer, V), tiny_tokenizer, bad), bad
    with pytest.raises(GatewayError, match="guided_regex must be a non-empty regular expression"):
        guided_decoding(None, None, guided_regex="")


def test_other_kinds_and_bad_specs(tiny_tokenizer):
    m = build_matcher(GuidedDecoding("regex", r"(yes|no)"), tiny_tokenizer, V)
    assert walk(m, tiny_tokenizer, "yes") and m.done
    assert not walk(build_matcher(GuidedDecoding("regex", r"(yes|no)"), tiny_tokenizer, V), tiny_tokenizer, "maybe")
    m = build_matcher(GuidedDecoding("ebnf", 'root ::= "a" [0-9]+'), tiny_tokenizer, V)
    assert walk(m, tiny_tokenizer, "a42") and m.done
    with pytest.raises(GuidedDecodingError, match="cannot compile the regex constraint"):
        check_spec(GuidedDecoding("regex", "(["))
    with pytest.raises(GuidedDecodingError, match="a structural_tag spec needs at least one tag"):
        check_spec(GuidedDecoding("structural_tag", {"tags": []}))
    with pytest.raises(GuidedDecodingError, match="unknown guided decoding kind"):
        check_spec(GuidedDecoding("xml", ""))  # type: ignore[arg-type]


# ------------------------------------------------------------------ the real model chooses


def _greedy(model, prompt_ids: list[int], matcher, max_tokens: int = 96) -> list[int]:
    """Greedy decoding with the KV cache, every step masked by `matcher`."""
    out: list[int] = []
    past, inputs = None, torch.tensor([prompt_ids])
    with torch.no_grad():
        for _ in range(max_tokens):
            result = model(input_ids=inputs, past_key_values=past, use_cache=True)
            past, logits = result.past_key_values, result.logits[0, -1].float()  # (V,)
            matcher.mask_logits(logits)
            token = int(logits.argmax())
            matcher.accept(token)
            out.append(token)
            if matcher.done:
                break
            inputs = torch.tensor([[token]])
    return out


@pytest.mark.slow
def test_base_smollm2_with_tool_choice_emits_schema_valid_calls_for_every_tool(smollm2_path, energy_tools):
    """Base SmolLM2 never calls a tool on its own (DESIGN.md §4); constrained, every call parses and fits."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ajet.render import ChatRenderer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32).eval()
    renderer = ChatRenderer(tokenizer)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in energy_tools}
    questions = {
        "get_gas_price": "What is the gas price in Boston?", "compare_prices": "Compare gas in Boston and Dallas.",
        "get_storage_level": "How full is storage in the East region?",
        "get_pipeline_flow": "What flows on the Transco pipeline?", "get_weather_demand": "How cold is Denver?",
        "get_production": "How much gas did Texas produce in 2021?",
        "convert_units": "Convert 10 MMBtu to kWh.", "convert_price": "What is 3.2 USD per MMBtu per therm?",
    }
    cases = [(q, {"type": "function", "function": {"name": n}}) for n, q in questions.items()]
    cases.append(("What does gas cost in Seattle?", "required"))
    for question, choice in cases:
        messages = [{"role": "system", "content": "You are a natural gas expert."}, {"role": "user", "content": question}]
        prompt = renderer.encode(messages, energy_tools).token_ids
        matcher = build_matcher(guided_decoding(energy_tools, choice), tokenizer, model.config.vocab_size)
        ids = _greedy(model, prompt, matcher)
        assert matcher.done, (question, tokenizer.decode(ids))
        text = tokenizer.decode(ids[:-1])
        parsed = parse_tool_calls(text, set(schemas))
        assert parsed.malformed == 0 and parsed.tool_calls, text
        for call in parsed.tool_calls:
            name = call["function"]["name"]
            if isinstance(choice, dict):
                assert name == choice["function"]["name"]
            jsonschema.validate(json.loads(call["function"]["arguments"]), schemas[name])


@pytest.fixture(scope="module")
def tagged_tokenizer(tiny_model_path):
    """SmolLM2's tokenizer with the tool tags as added tokens, as Qwen2.5's holds them (151657, 151658)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<tool_call>", "</tool_call>"]})
    return tokenizer


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_tags_held_as_one_token_are_taken_as_that_token(tagged_tokenizer, energy_tools, choice):
    """A model taught its template's tag tokens writes them as tokens: the grammar must take them (llguidance
    matches text against ordinary tokens only; without the token form the mask forbade 151657 at every step)."""
    open_id, close_id = tagged_tokenizer.convert_tokens_to_ids(["<tool_call>", "</tool_call>"])
    vocab = len(tagged_tokenizer)
    text = "Let me look.\n" + call_text("get_gas_price", {"city": "Boston"}) if choice == "auto" \
        else call_text("get_gas_price", {"city": "Boston"})
    ids = tagged_tokenizer(text, add_special_tokens=False)["input_ids"] + [tagged_tokenizer.eos_token_id]
    assert open_id in ids and close_id in ids  # the tokenizer writes the tags as their tokens
    matcher = build_matcher(guided_decoding(energy_tools, choice), tagged_tokenizer, vocab)
    for token in ids:
        row = torch.zeros(vocab)
        matcher.mask_logits(row)
        assert row[token] != float("-inf"), tagged_tokenizer.decode([token])
        matcher.accept(token)
    assert matcher.done
    bad = build_matcher(guided_decoding(energy_tools, choice), tagged_tokenizer, vocab)
    for token in tagged_tokenizer(call_text("get_gas_price", {"city": 7}), add_special_tokens=False)["input_ids"]:
        row = torch.zeros(vocab)
        bad.mask_logits(row)
        if row[token] == float("-inf"):
            break
        bad.accept(token)
    else:
        raise AssertionError("a call with arguments off the schema went through")
