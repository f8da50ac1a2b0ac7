"""The appworld tutorial (tutorial/example_appworld): the apps' state (fresh per episode, isolated
between concurrent episodes), tool calls that go wrong, the changes the judge compares, the
final-state judge on hand-computed cases, and the shipped data reproduced by its generator."""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from pathlib import Path

import pytest

from ajet import Task, Tuner, WorkflowOutput
from ajet.plugins import load_object

FOLDER = Path(__file__).resolve().parents[2] / "tutorial" / "example_appworld"
AppAgent = load_object(f"{FOLDER / 'agent.py'}:AppAgent")  # puts the tutorial folder on sys.path
FinalStateJudge = load_object(f"{FOLDER / 'judge.py'}:FinalStateJudge")
# make_data.py is a name every tutorial uses: load it under its own module name, not `import make_data`
build_data = load_object(f"{FOLDER / 'make_data.py'}:build")
sys.path.insert(0, str(FOLDER))
from appworld_env import INITIAL, World, changes  # noqa: E402

PRISTINE = copy.deepcopy(INITIAL)


def test_state_persists_within_a_world_and_every_world_starts_fresh():
    world = World()
    content, record = world.call("send_money", '{"contact_id": "c02", "amount": 20, "note": "taxi"}')
    assert json.loads(content) == {"payment_id": "p01", "balance": 480.0} and record["result"]["balance"] == 480.0
    world.call("send_money", {"contact_id": "c03", "amount": 30.5, "note": "lunch"})
    assert world.state["balance"] == 449.5 and [p["id"] for p in world.state["payments"]] == ["p01", "p02"]
    world.call("cancel_event", {"event_id": "e01"})
    other = World()
    assert other.state == PRISTINE and INITIAL == PRISTINE  # nothing leaked into the next episode or the template
    assert len(world.state["events"]) == len(INITIAL["events"]) - 1


def test_event_ids_are_never_reused():
    world = World()
    world.call("cancel_event", {"event_id": "e07"})
    _, record = world.call("create_event", {"title": "Tennis", "date": "2026-03-06", "time": "11:00", "contact_id": "c01"})
    assert record["result"] == {"event_id": "e08"}
    assert changes(INITIAL, world.state) == [["cancelled", "e07"], ["event", "tennis", "2026-03-06", "11:00", "c01"]]


@pytest.mark.parametrize("name, arguments, message", [
    ("fly_to_moon", "{}", "unknown tool 'fly_to_moon'"),
    ("send_money", "{not json", "Expecting property name"),
    ("send_money", "[1, 2]", "arguments must be a JSON object"),
    ("send_money", '{"contact_id": "c01"}', "missing 2 required"),
    ("send_money", '{"contact_id": "c01", "amount": 900, "note": "x"}', "between 0 and the balance 500"),
    ("send_money", '{"contact_id": "c01", "amount": "20", "note": "x"}', "amount must be a number"),
    ("send_money", '{"contact_id": "Alice Chen", "amount": 20, "note": "x"}', "no contact with id 'Alice Chen'"),
    ("cancel_event", '{"event_id": "e99"}', "no event with id 'e99'"),
    ("search_contacts", '{"name": "  "}', "name is empty"),
    ("list_events", '{"date": "2026-03-02", "extra": 1}', "unexpected keyword argument 'extra'"),
])
def test_bad_calls_become_error_messages_and_change_nothing(name, arguments, message):
    world = World()
    content, record = world.call(name, arguments)
    assert content.startswith("Error: ") and message in content and message in record["error"]
    assert world.errors == 1 and world.state == PRISTINE


def test_an_invalid_observation_is_counted_not_raised():
    class Broken(World):
        def list_events(self, date):
            return {"when": object()}  # not JSON

    world = Broken()
    content, record = world.call("list_events", {"date": "2026-03-02"})
    assert content == "Error: the app returned an invalid result" and world.invalid_observations == 1
    assert world.errors == 0 and "invalid observation" in record["error"]


def test_changes_lists_payments_new_events_and_cancellations():
    world = World()
    world.call("send_money", {"contact_id": "c05", "amount": 12, "note": "  Groceries "})
    world.call("create_event", {"title": "Coffee Chat", "date": "2026-03-09", "time": "09:00", "contact_id": "c05"})
    world.call("cancel_event", {"event_id": "e03"})
    assert changes(INITIAL, world.state) == [
        ["cancelled", "e03"], ["event", "coffee chat", "2026-03-09", "09:00", "c05"], ["paid", "c05", 12.0, "groceries"]]
    assert changes(INITIAL, INITIAL) == []


def _score(expected: list, state) -> tuple[float, bool | None, dict]:
    task = Task(task_id="t", query="q", answer={"changes": expected})
    meta = {} if state is None else {"final_state": state}
    reward = asyncio.run(FinalStateJudge().score(task, WorkflowOutput(answer="I did it!", metadata=meta)))
    return round(reward.total, 6), reward.is_success, reward.parts


def test_final_state_judge_on_hand_computed_states():
    expected = [["paid", "c02", 20.0, "concert tickets"]]
    right, twice, wrong = World(), World(), World()
    right.call("send_money", {"contact_id": "c02", "amount": 20, "note": "Concert tickets"})
    twice.call("send_money", {"contact_id": "c02", "amount": 20, "note": "concert tickets"})
    twice.call("send_money", {"contact_id": "c02", "amount": 20, "note": "concert tickets"})  # paid twice
    twice.call("cancel_event", {"event_id": "e01"})
    wrong.call("send_money", {"contact_id": "c01", "amount": 20, "note": "concert tickets"})
    assert _score(expected, right.state) == (1.0, True, {"missing": 0.0, "extra": 0.0})
    assert _score(expected, twice.state) == (0.333333, False, {"missing": 0.0, "extra": 2.0})  # 1 / |{paid, paid, cancelled}|
    assert _score(expected, wrong.state) == (0.0, False, {"missing": 1.0, "extra": 1.0})
    assert _score(expected, World().state) == (0.0, False, {"missing": 1.0, "extra": 0.0})  # the text says done; the state does not
    assert _score(expected, None)[:2] == (0.0, False)
    assert _score(expected, {"payments": "garbage"})[:2] == (0.0, False)


async def test_concurrent_episodes_do_not_see_each_others_state(llm):
    # Two episodes at once: each pays its own contact, then lists nothing else; the server answers
    # by the episode's user message.
    plans = {"Pay Alice": ("c01", 10), "Pay Bob": ("c02", 70)}

    def respond(request):
        query = request["messages"][1]["content"]
        contact, amount = next(v for k, v in plans.items() if query.startswith(k))
        if request["messages"][-1]["role"] == "user":
            args = json.dumps({"contact_id": contact, "amount": amount, "note": "rent"})
            return {"content": None, "tool_calls": [("send_money", args)]}
        return {"content": "Done."}

    llm.respond = respond
    agent = AppAgent()
    tuner = lambda: Tuner(llm.base_url, "policy", issue_key=lambda a: f"key-{a}", max_turns=4)  # noqa: E731
    outs = await asyncio.gather(*(agent.execute(Task(task_id=k, query=f"{k} {v[1]} dollars for rent."), tuner())
                                  for k, v in plans.items()))
    for out, (contact, amount) in zip(outs, plans.values()):
        assert out.metadata["final_state"]["payments"] == [{"id": "p01", "to": contact, "amount": float(amount), "note": "rent"}]
        assert out.metadata["final_state"]["balance"] == 500 - amount
        assert out.answer == "Done." and out.metadata["stop_reason"] == "answered"
    assert INITIAL == PRISTINE


def test_make_data_reproduces_the_shipped_files_and_the_references_score_full_marks(tmp_path):
    counts = build_data(tmp_path)
    assert counts == {"train": 45, "val": 18, "heldout": 128, "sft": 45}
    for name in counts:
        assert (tmp_path / f"{name}.jsonl").read_bytes() == (FOLDER / f"{name}.jsonl").read_bytes(), name
    train = [json.loads(line) for line in (FOLDER / "train.jsonl").read_text().splitlines()]
    val = [json.loads(line) for line in (FOLDER / "val.jsonl").read_text().splitlines()]
    held = [json.loads(line) for line in (FOLDER / "heldout.jsonl").read_text().splitlines()]
    assert not {t["query"] for t in train} & {t["query"] for t in val}
    calls = lambda rows: {json.dumps(r["answer"]["calls"], sort_keys=True) for r in rows}  # noqa: E731
    assert len(calls(held)) == 128 and not calls(held) & (calls(train) | calls(val))
    for row in train + val + held:
        world = World()
        for call in row["answer"]["calls"]:
            assert "result" in world.call(call["name"], call["arguments"])[1]
        assert _score(row["answer"]["changes"], world.state)[:2] == (1.0, True)
