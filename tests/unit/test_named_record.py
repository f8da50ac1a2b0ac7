"""`generate.demos.name_record`: a call-first demo's template sentence names the list record the answer was
read from, as the question names it, in place of the call's arguments; every case where it must not, too."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ajet.config.loader import load_config
from ajet.generate.constructed import final_sentence, named_record
from ajet.judge.tool_reference import ToolReferenceJudge
from ajet.workflow import Task, WorkflowOutput

PIPELINE_YAML = Path(__file__).resolve().parents[2] / "tutorial" / "example_mcp_pipeline" / "pipeline.yaml"
ROOMS = json.dumps({"rooms": [{"room_id": "rm-101", "name": "Anchor", "capacity": 6},
                              {"room_id": "rm-104", "name": "Dock", "capacity": 8},
                              {"room_id": "rm-203", "name": "Harbor View", "capacity": 12}]})


def _task(query: str, target: list, gold: list[dict], final) -> Task:
    calls = [{"name": g["name"], "arguments": g["arguments"]} for g in gold]
    return Task(task_id="t", query=query, answer={"calls": calls, "final": final},
                metadata={"gold": gold, "target": target})


def _list_rooms(query: str, index: int = 2, arguments: dict | None = None) -> Task:
    room = json.loads(ROOMS)["rooms"][index]
    return _task(query, ["rooms", index, "capacity"], [{"name": "list_rooms", "arguments": arguments or {},
                                                        "content": ROOMS}], room["capacity"])


async def _sentence(task: Task, *overrides: str) -> str:
    cfg = load_config(PIPELINE_YAML, ["generate.demos.final_sentence=template", *overrides])
    return await final_sentence(cfg, None, task, False, Counter())


async def test_the_sentence_names_the_record_the_question_named_before_the_value_read_beside_it():
    task = _list_rooms("How many people fit in the harbor view room?")
    assert named_record(task) == ("name", "Harbor View")  # the record's own spelling, found in any case
    assert await _sentence(task, "generate.demos.name_record=true") == "The capacity for Harbor View is 12."
    assert await _sentence(task) == "The capacity is 12."  # off by default: the call's arguments, here none
    reward = await ToolReferenceJudge().score(task, WorkflowOutput(answer="The capacity for Harbor View is 12."))
    assert reward.parts["final"] == 1.0


async def test_no_record_is_named_where_the_question_does_not_name_it_or_the_call_sent_it():
    assert named_record(_list_rooms("How many people fit in the biggest room?")) is None
    sent = _list_rooms("How many people fit in Dock?", index=1, arguments={"name": "Dock"})
    assert named_record(sent) is None  # the arguments already say it: the sentence keeps them
    assert await _sentence(sent, "generate.demos.name_record=true") == "The capacity for Dock is 8."


def test_no_record_is_named_for_a_field_of_the_whole_result_a_count_or_a_text_too_long_to_write_twice():
    booking = json.dumps({"room_id": "rm-104", "name": "Dock", "organizer": "Ada"})
    whole = _task("Who booked Dock?", ["organizer"], [{"name": "get_booking", "arguments": {}, "content": booking}],
                  "Ada")
    assert named_record(whole) is None
    count = _task("How many rooms are there besides Dock?", ["rooms", "#"],
                  [{"name": "list_rooms", "arguments": {}, "content": ROOMS}], 3)
    assert named_record(count) is None
    commit = "9d06e1e4611708c41e0a44da2cd592387f3a8ca3"
    log = json.dumps([{"commit": commit, "author": "Ada"}])
    hashed = _task(f"Who wrote {commit}?", [0, "author"], [{"name": "git_log", "arguments": {}, "content": log}], "Ada")
    assert named_record(hashed) is None
    # a path the result does not hold (a changed result) names nothing rather than failing
    missing = _task("Capacity of Dock?", ["rooms", 7, "capacity"], [{"name": "list_rooms", "arguments": {},
                                                                     "content": ROOMS}], 8)
    assert named_record(missing) is None
