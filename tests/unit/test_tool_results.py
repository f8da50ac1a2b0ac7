"""ajet.tool_results: the one definition of an error-shaped tool result, and how a result too large
to show is cut; and that the judges and the demos filter read that definition."""

from __future__ import annotations

import json

import pytest

from ajet.judge.base import Judge, Reward
from ajet.judge.grounded import GroundedJudge
from ajet.tool_results import ids_after_names, not_shown, record_error, result_error, truncate_text
from ajet.workflow import Task, WorkflowOutput


@pytest.mark.parametrize("result, error", [
    (None, "empty result"),
    ("", "empty result"),
    (" \n", "empty result"),
    ({"error": "unknown sku A-10"}, "unknown sku A-10"),
    ({"error": {"code": 404}}, '{"code": 404}'),
    ('{"error":"unknown sku A-10"}', "unknown sku A-10"),  # the same, as the JSON text a tool returned
    ("Error: city not found", "city not found"),
    ("  error: x", "x"),
    ("ERROR:", "error with no message"),
    # results, not errors
    ([], None), ({}, None), (0, None), (False, None), ("0", None),
    ({"error": None, "data": 1}, None), ({"error": "", "data": 1}, None),
    ("Errors are rare in this report", None), ("{not json}", None), ('["error"]', None),
    ({"price": 4.1}, None),
])
def test_result_error(result, error):
    assert result_error(result) == error


@pytest.mark.parametrize("record, error", [
    ({"name": "f", "arguments": {}, "result": 5}, None),
    ({"name": "f", "arguments": {}, "error": "boom"}, "boom"),
    ({"name": "f", "arguments": {}, "error": ""}, "error with no message"),  # the key says it failed
    ({"name": "f", "arguments": {}, "result": {"error": "unknown sku"}}, "unknown sku"),
    ({"name": "f", "arguments": {}, "result": ""}, "empty result"),
    ({"name": "f", "arguments": {}, "result": None}, "empty result"),
    ({"name": "f", "arguments": {}, "error": None, "result": 1}, None),
    ({"name": "f", "arguments": {}}, None),  # read from the conversation, never run by ajet: no evidence
    ("not a record", None),
])
def test_record_error(record, error):
    assert record_error(record) == error


def test_truncate_text_and_placeholder():
    assert truncate_text("abc", 3) == ("abc", False)
    text, cut = truncate_text("x" * 5_000_000, 16_000)
    assert cut and text == "x" * 16_000 + "\n... [truncated: 5,000,000 characters, showing the first 16,000]"
    assert not_shown("image/png", 12_345) == "[image/png result: 12,345 bytes, not shown]"
    assert not_shown("resource link to file:///x", None) == "[resource link to file:///x result, not shown]"


@pytest.mark.parametrize("result", [{"error": "unknown sku A-10"}, "Error: unknown sku", ""])
async def test_grounded_judge_fails_error_shaped_results(result):
    # issue 17: `{"error": "unknown sku A-10"}` passed the grounding check, because the answer
    # repeated what the tool returned
    out = WorkflowOutput(answer="unknown sku A-10", metadata={"stop_reason": "answered"},
                         tool_calls=[{"name": "stock", "arguments": {"sku": "A-10"}, "result": result}])
    reward = await GroundedJudge().score(Task(task_id="t", query="Stock of A-10?"), out)
    assert reward.total == 0.0 and reward.feedback.startswith("tool_error: tool call 'stock' failed: ")


class _Accept(Judge):
    async def score(self, task, output):  # pragma: no cover - a task with no reference never asks it
        return Reward(total=1.0)


async def test_demos_filter_drops_error_shaped_results():
    from ajet.generate.demos import DemoFilter

    keep = DemoFilter(_Accept(), "grounding", None, 0.5)
    task = Task(task_id="t", query="How many units of A-10?")
    bad = WorkflowOutput(answer="A-10: unknown sku A-10.", metadata={"stop_reason": "answered"},
                         tool_calls=[{"name": "stock", "arguments": {"sku": "A-10"},
                                      "result": {"error": "unknown sku A-10"}}])
    reward = await keep.score(task, bad)
    assert reward.is_success is False and reward.feedback == "tool_error: tool call 'stock' failed: unknown sku A-10"
    good = WorkflowOutput(answer="There are 17 units.", metadata={"stop_reason": "answered"},
                          tool_calls=[{"name": "stock", "arguments": {"sku": "A-10"}, "result": {"units": 17}}])
    assert (await keep.score(task, good)).is_success is True


@pytest.mark.parametrize("text, shown", [
    # each record's ids move right after its first text field; the layout stays as the server wrote it
    ('{"rooms":[{"room_id":"rm-101","name":"Anchor","floor":1},{"room_id":"rm-104","name":"Dock","floor":1}]}',
     '{"rooms":[{"name":"Anchor","room_id":"rm-101","floor":1},{"name":"Dock","room_id":"rm-104","floor":1}]}'),
    ('[{"id": 7, "roomId": "r-2", "label": "A", "n": 2}]', '[{"label": "A", "id": 7, "roomId": "r-2", "n": 2}]'),
    ('{\n  "ID": "x-1",\n  "title": "Caf\\u00e9"\n}', '{\n  "title": "Caf\\u00e9",\n  "ID": "x-1"\n}'),
    # nothing to move: no id key ('paid' is not one), no text with a letter (a date), not JSON, a cut text
    ('{"paid":"yes","name":"a"}', '{"paid":"yes","name":"a"}'),
    ('{"room_id":"rm-1","date":"2025-09-10","free":[]}', '{"room_id":"rm-1","date":"2025-09-10","free":[]}'),
    ('{"id": true, "name": "a"}', '{"id": true, "name": "a"}'),
    ("Commit: abc123\nMessage: Fix typo", "Commit: abc123\nMessage: Fix typo"),
    ('{"id":"a-1","name":"x"', '{"id":"a-1","name":"x"'),
])
def test_ids_after_names_keeps_the_data_and_layout(text, shown):
    assert ids_after_names(text) == shown
    if shown.startswith(("{", "[")) and shown.endswith(("}", "]")):
        assert json.loads(shown) == json.loads(text)
