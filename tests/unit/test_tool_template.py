"""The chat template an export carries renders tools, calls and results as ajet's renderer does: the
same text for any tool schema, the same tokens at every turn of the tutorial's multi-turn episodes,
and it is what `ajet export` writes (merged and adapter here; GGUF in test_gguf_export.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from ajet.render import ChatRenderer
from ajet.tool_prompt import tools_text
from ajet.tool_template import served_template
from ajet.trainer.export import export_checkpoint
from tests.unit.test_export import TEMPLATE, lora_ckpt  # noqa: F401  (a LoRA checkpoint of tiny-random)

ROOT = Path(__file__).resolve().parents[2]
ROWS = [json.loads(line) for line in (ROOT / "tutorial" / "example_tool_agent" / "sft.jsonl").read_text().splitlines()]


def _served_ids(tokenizer, messages, tools, add_generation_prompt: bool, template: str | None = None) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False,
                                         add_generation_prompt=add_generation_prompt)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_every_turn_of_the_tutorial_episodes_has_the_training_tokens(tiny_tokenizer):
    served = served_template(tiny_tokenizer.chat_template)
    renderer = ChatRenderer(tiny_tokenizer)
    turns = 0
    for row in ROWS[::6]:  # 13 of the 74 episodes: every kind of question, in a few seconds
        messages, tools = row["messages"], row["tools"]
        trained = renderer.encode_conversation(messages, tools).token_ids  # the SFT sample = a recorded episode
        whole = _served_ids(tiny_tokenizer, messages, tools, False, served)
        assert whole[:len(trained)] == trained and tiny_tokenizer.decode(whole[len(trained):]) == "\n"
        for n, message in enumerate(messages):
            if message["role"] == "assistant":  # the prompt a server sends the model before this turn
                prompt = renderer.encode(messages[:n], tools).token_ids
                assert _served_ids(tiny_tokenizer, messages[:n], tools, True, served) == prompt
                turns += 1
    assert turns >= 2 * 13  # 2-4 model turns an episode


_TEXT = st.text(alphabet=st.sampled_from("ab é\n\t\"\\{}<>"), max_size=8)
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _TEXT)
_TYPE = st.one_of(st.sampled_from(["string", "number", "integer", "boolean", "null", "array", "object"]),
                  st.lists(st.sampled_from(["string", "null"]), min_size=1, max_size=2))


def _schema(inner):
    keys = {"type": _TYPE, "description": _TEXT, "enum": st.lists(_SCALAR, max_size=3), "default": _SCALAR,
            "title": _TEXT, "items": inner, "anyOf": st.lists(inner, max_size=2), "minimum": st.integers(0, 3)}
    return st.dictionaries(st.sampled_from(sorted(keys)), st.none(), max_size=4).flatmap(
        lambda chosen: st.fixed_dictionaries({k: keys[k] for k in chosen}))


_PARAM = st.recursive(st.fixed_dictionaries({"type": _TYPE}), _schema, max_leaves=4)
_TOOL = st.fixed_dictionaries({
    "name": st.sampled_from(["f", "get_price"]), "description": _TEXT,
    "parameters": st.one_of(
        st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(
            st.sampled_from(["city", "n", "unit"]), _PARAM, max_size=3),
            "required": st.lists(st.sampled_from(["city", "n"]), max_size=2)}),
        _PARAM, st.just({})),
}).map(lambda function: {"type": "function", "function": function})


@settings(max_examples=150, deadline=None)
@given(tools=st.lists(_TOOL, min_size=1, max_size=3))
# an array without items: Jinja's spec['items'] falls back to the dict's items method (found by hypothesis)
@example(tools=[{"type": "function", "function": {"name": "f", "description": "", "parameters": {
    "type": "object", "properties": {"city": {"type": "array"}}, "required": []}}}])
def test_any_tool_schema_reads_as_its_signature_line(tiny_tokenizer, tools):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    served = served_template(tiny_tokenizer.chat_template)
    text = tiny_tokenizer.apply_chat_template(messages, tools=tools, chat_template=served, tokenize=False,
                                              add_generation_prompt=True)
    assert text == ChatRenderer(tiny_tokenizer).render_text(messages, tools, True)
    assert tools_text(tools) in text


def test_messages_without_a_system_turn_content_parts_and_string_arguments(tiny_tokenizer):
    tools = ROWS[0]["tools"]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Gas in "}, {"type": "text", "text": "Boston?"}]},
                {"role": "assistant", "content": "Let me look.", "tool_calls": [
                    {"id": "1", "type": "function", "function": {"name": "get_gas_price", "arguments": '{"city": "Boston"}'}},
                    {"id": "2", "type": "function", "function": {"name": "get_storage_level", "arguments": {"region": "East"}}}]},
                {"role": "tool", "tool_call_id": "1", "content": "3.1"}, {"role": "tool", "tool_call_id": "2", "content": None}]
    served = served_template(tiny_tokenizer.chat_template)
    text = tiny_tokenizer.apply_chat_template(messages, tools=tools, chat_template=served, tokenize=False)
    assert text == ChatRenderer(tiny_tokenizer).render_text(messages, tools, False)
    assert 'Let me look.\n<tool_call>\n{"name": "get_gas_price", "arguments": {"city": "Boston"}}\n</tool_call>\n<tool_call>' in text
    assert tiny_tokenizer.apply_chat_template(messages[:1], chat_template=served, tokenize=False) == \
        tiny_tokenizer.apply_chat_template([{"role": "user", "content": "Gas in Boston?"}], tokenize=False)  # no tools


def test_a_template_that_renders_tools_is_left_as_it_is():
    native = "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}"
    assert served_template(native) == native


def test_exports_carry_the_served_template(lora_ckpt, tmp_path):  # noqa: F811
    _, ckpt, _ = lora_ckpt
    tools, conversation = ROWS[1]["tools"], ROWS[1]["messages"]
    trained_with = AutoTokenizer.from_pretrained(ckpt / "tokenizer")
    trained_with.chat_template = TEMPLATE  # what the run rendered with (it has no tools)
    want = ChatRenderer(trained_with).render_text(conversation, tools, False)
    for merge in (True, False):
        out = export_checkpoint(ckpt, tmp_path / f"export-{merge}", merge=merge)
        served = AutoTokenizer.from_pretrained(out)
        assert served.apply_chat_template(conversation, tools=tools, tokenize=False) == want
    # a GGUF export carries it too: tests/unit/test_gguf_export.py (the LoRA checkpoint's export)
