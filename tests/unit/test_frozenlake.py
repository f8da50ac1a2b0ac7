"""The FrozenLake tutorial: the environment by hand, the action parser, the solver, the shipped data,
and the multi-turn workflow against a scripted OpenAI server over real HTTP, with broken replies and
a broken environment counted per episode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ajet import Task, Tuner
from ajet.plugins import load_object

FOLDER = Path(__file__).resolve().parents[2] / "tutorial" / "example_frozenlake"
FrozenLakeAgent = load_object(f"{FOLDER / 'agent.py'}:FrozenLakeAgent")  # puts the folder on sys.path
import frozenlake  # noqa: E402
from agent import SYSTEM_PROMPT, play  # noqa: E402
from frozenlake import Lake, parse_action, shortest_path  # noqa: E402

MAP = ["SFF", "FHF", "FFG"]


def test_observation_shows_the_player_the_goal_and_the_neighbours():
    assert Lake(MAP).observation() == (
        "PFF\nFHF\nFFG\nYou are at row 1, column 1. The goal is at row 3, column 3. "
        "up: wall, down: frozen, left: wall, right: frozen.")


def test_steps_by_hand():
    lake = Lake(MAP)
    assert lake.step("up").event == "bumped" and lake.position == (0, 0)
    step = lake.step("right")
    assert (step.event, step.reward, step.done, lake.position) == ("moved", 0.0, False, (0, 1))
    assert step.observation.endswith("up: wall, down: hole, left: start, right: frozen.")
    assert lake.step(None).event == "invalid" and lake.position == (0, 1)  # nothing moves
    assert lake.step("sideways").event == "invalid"
    step = lake.step("right")
    assert lake.step("down").event == "moved"
    step = lake.step("down")
    assert (step.event, step.reward, step.done) == ("goal", 1.0, True)
    with pytest.raises(RuntimeError, match="over"):
        lake.step("up")


def test_a_hole_ends_the_episode_with_no_reward():
    lake = Lake(MAP)
    lake.step("down")
    step = lake.step("right")
    assert (step.event, step.reward, step.done) == ("hole", 0.0, True)


@pytest.mark.parametrize("rows, message", [
    ([], "equal-length rows"),
    (["SF", "FFG"], "equal-length rows"),
    (["SX", "FG"], "equal-length rows"),
    (["SF", "FF"], "exactly one S and one G"),
    (["SS", "FG"], "exactly one S and one G"),
])
def test_invalid_maps_are_refused(rows, message):
    with pytest.raises(frozenlake.InvalidLake, match=message):
        Lake(rows)


@pytest.mark.parametrize("text, move", [
    ("<action>down</action>", "down"),
    ("<action> LEFT </action>", "left"),
    ("<action>up</action> then <action>right</action>", "right"),  # the last tag counts
    ("I will go Right.", "right"),                                 # no tag: the first move word
    ("<action>jump</action> down", None),                          # a tag that is not a move is invalid
    ("upwards, downhill", None),                                   # whole words only
    ("", None),
    (None, None),
])
def test_parse_action(text, move):
    assert parse_action(text) == move


def test_shortest_path_by_hand():
    assert shortest_path(MAP) == ["down", "down", "right", "right"]  # down before right on ties
    assert shortest_path(["SH", "HG"]) is None
    assert shortest_path(["SFFF", "FHFH", "FFFH", "HFFG"]) == ["down", "down", "right", "down", "right", "right"]


# ---------------------------------------------------------------------------- shipped data


def test_make_data_reproduces_the_shipped_files(tmp_path):
    run = subprocess.run([sys.executable, "make_data.py", "--out", str(tmp_path)], cwd=FOLDER,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    for name in ["train.jsonl", "val.jsonl", "heldout.jsonl", "sft.jsonl"]:
        assert (tmp_path / name).read_bytes() == (FOLDER / name).read_bytes(), name
    held = [tuple(json.loads(x)["metadata"]["map"]) for x in (FOLDER / "heldout.jsonl").read_text().splitlines()]
    seen = {tuple(json.loads(x)["metadata"]["map"]) for n in ("train", "val")
            for x in (FOLDER / f"{n}.jsonl").read_text().splitlines()}
    assert len(held) == len(set(held)) == 128 and not set(held) & seen


def test_every_demonstration_replays_to_the_goal():
    train = [json.loads(x) for x in (FOLDER / "train.jsonl").read_text().splitlines()]
    val = [json.loads(x) for x in (FOLDER / "val.jsonl").read_text().splitlines()]
    sft = [json.loads(x) for x in (FOLDER / "sft.jsonl").read_text().splitlines()]
    assert (len(train), len(val), len(sft)) == (64, 32, 32)
    assert not {tuple(r["metadata"]["map"]) for r in train} & {tuple(r["metadata"]["map"]) for r in val}
    for row, demo in zip(train, sft):
        lake, messages = Lake(row["metadata"]["map"]), demo["messages"]
        assert messages[:2] == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": lake.observation()}]
        moves = [parse_action(m["content"]) for m in messages if m["role"] == "assistant"]
        assert moves == row["metadata"]["path"] and len(moves) == row["answer"]
        for move in moves:
            step = lake.step(move)
        assert step.event == "goal"


# ---------------------------------------------------------------------------- the workflow over HTTP


def tuner_for(server, max_turns: int | None = 10) -> Tuner:
    return Tuner(server.base_url, "policy", issue_key=lambda agent: f"key-{agent}", max_turns=max_turns)


def lake_task(rows: list[str]) -> Task:
    return Task(task_id="t", query="\n".join(rows), metadata={"map": rows})


async def test_an_episode_to_the_goal_keeps_one_growing_conversation(llm):
    llm.script = [{"content": c} for c in ["<action>up</action>", "hmm", "<action>down</action>", "down",
                                           "<action>right</action>", "<action>right</action>"]]
    out = await FrozenLakeAgent().execute(lake_task(MAP), tuner_for(llm))
    assert (out.reward, out.is_success, out.answer) == (1.0, True, "goal")
    assert out.metadata["events"] == ["bumped", "invalid", "moved", "moved", "moved", "goal"]
    assert out.metrics == {"turns": 6.0, "invalid_actions": 1.0, "bumps": 1.0, "invalid_observation": 0.0,
                           "goal": 1.0, "hole": 0.0}
    # each call's messages extend the previous call's by the reply and the next observation: one sample
    for before, after in zip(llm.requests, llm.requests[1:]):
        assert after["messages"][:len(before["messages"])] == before["messages"]
        assert len(after["messages"]) == len(before["messages"]) + 2
    assert llm.headers[0]["authorization"] == "Bearer key-player"
    assert out.messages[-1] == {"role": "user", "content": "You reached the goal!"}


async def test_the_turn_budget_and_a_hole_end_the_episode(llm):
    llm.script = [{"content": "<action>up</action>"}] * 3
    out = await FrozenLakeAgent().execute(lake_task(MAP), tuner_for(llm, max_turns=3))
    assert (out.reward, out.answer, out.metrics["bumps"], len(llm.requests)) == (0.0, "max_turns", 3.0, 3)
    llm.reset()
    llm.script = [{"content": "<action>down</action>"}, {"content": "<action>right</action>"}]
    out = await FrozenLakeAgent().execute(lake_task(MAP), tuner_for(llm))
    assert (out.reward, out.is_success, out.answer, out.metrics["hole"]) == (0.0, False, "hole", 1.0)


async def test_a_refused_call_ends_the_episode_with_the_return_so_far(llm):
    llm.script = [{"content": "<action>down</action>"}, "400"]
    out = await FrozenLakeAgent().execute(lake_task(MAP), tuner_for(llm))
    assert out.reward == 0.0 and out.answer.startswith("llm_refused") and out.metrics["turns"] == 1.0


class BrokenLake(Lake):
    """An environment whose second observation is not text (or is empty, or huge)."""

    def __init__(self, rows: list[str], bad: object) -> None:
        super().__init__(rows)
        self.bad = bad

    def step(self, action):
        step = super().step(action)
        return frozenlake.Step(self.bad, step.reward, step.done, step.event)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad, problem", [(None, "a NoneType, not text"), ("  ", "empty"),
                                          ("x" * 5000, "5000 characters, over 2000")])
async def test_an_invalid_observation_is_counted_and_ends_the_episode(llm, bad, problem):
    llm.script = [{"content": "<action>right</action>"}]
    async with tuner_for(llm).openai_client() as client:
        out = await play(client, "policy", BrokenLake(MAP, bad), max_turns=10)
    assert out.answer == f"invalid_observation: {problem}"
    assert (out.reward, out.metrics["invalid_observation"], out.metrics["turns"], len(llm.requests)) == (0.0, 1.0, 1.0, 1)


def test_episode_stats_averages_the_counts_of_finished_episodes(tmp_path):
    from episode_stats import stats

    rows = [{"error": None, "metrics": {"turns": 6.0, "invalid_actions": 0.0, "goal": 1.0}},
            {"error": None, "metrics": {"turns": 10.0, "invalid_actions": 4.0, "goal": 0.0}},
            {"error": "TimeoutError: ...", "metrics": {}}]
    path = tmp_path / "eval_episodes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert stats(path) == {"episodes": 3, "failed": 1, "goal": 0.5, "invalid_actions": 2.0, "turns": 8.0}
