"""The werewolves tutorial (tutorial/example_werewolves): the moderator's rules on hand-traced
games, bad actions and raising agents counted, the win judge, the workflow against a scripted
OpenAI server over real HTTP, and the shipped data reproduced by its generator."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from ajet import Task, Tuner, WorkflowOutput
from ajet.plugins import load_object

FOLDER = Path(__file__).resolve().parents[2] / "tutorial" / "example_werewolves"
Werewolves = load_object(f"{FOLDER / 'agent.py'}:Werewolves")  # puts the tutorial folder on sys.path
WinJudge = load_object(f"{FOLDER / 'judge.py'}:WinJudge")
# make_data.py is a name every tutorial uses: load it under its own module name, not `import make_data`
build_data = load_object(f"{FOLDER / 'make_data.py'}:build")
sys.path.insert(0, str(FOLDER))
from werewolf_game import Game, deal, parse_action, play, village_plan  # noqa: E402

ROLES = {"P1": "wolf", "P2": "seer", "P3": "villager", "P4": "wolf", "P5": "villager"}


@pytest.mark.parametrize("kind, text, seat", [
    ("VOTE", "VOTE: P3", "P3"), ("VOTE", "vote p 3 because", "P3"), ("KILL", "kill:P5", "P5"),
    ("VOTE", "CHECK: P2", None), ("VOTE", "I think P3 is a wolf", None), ("VOTE", None, None),
    ("ACCUSE", "CHECK: P1 then ACCUSE: P4", "P4"), ("VOTE", "VOTE: P9", "P9"),
])
def test_parse_action_reads_the_line_with_the_expected_keyword(kind, text, seat):
    assert parse_action(kind, text) == seat


def test_moderator_refuses_and_counts_invalid_actions():
    game = Game(dict(ROLES))
    game.alive.remove("P5")
    assert game.act("villager1", "VOTE", "VOTE: P1") == "P1"
    assert game.act("villager1", "VOTE", "VOTE: P3") is None      # oneself
    assert game.act("villager1", "VOTE", "VOTE: P5") is None      # dead
    assert game.act("villager1", "VOTE", "VOTE: P9") is None      # no such player
    assert game.act("wolf1", "KILL", "KILL: P4") is None          # the partner wolf
    assert game.act("wolf1", "KILL", "KILL: P2") == "P2"
    assert game.act("seer", "CHECK", "I check nobody") is None    # no action line
    assert game.invalid == {"villager1": 3, "wolf1": 1, "seer": 1}
    assert game.actions == {"villager1": 4, "wolf1": 2, "seer": 1}


def test_votes_take_a_unique_plurality_and_a_tie_eliminates_nobody():
    game = Game(dict(ROLES))
    game.day = 1
    assert game.resolve_votes({"P1": "P2", "P2": "P1", "P3": "P1", "P4": None, "P5": "P2"}) is None
    assert game.alive == ["P1", "P2", "P3", "P4", "P5"] and "nobody is eliminated" in game.log[-1]
    assert game.resolve_votes({"P1": "P2", "P2": "P1", "P3": "P1", "P4": None, "P5": None}) == "P1"
    assert game.alive == ["P2", "P3", "P4", "P5"] and game.log[-1].endswith("P1 is eliminated, a wolf.")
    assert game.winner is None
    assert game.resolve_votes({"P2": "P4", "P3": "P4"}) == "P4"
    assert game.winner == "village"


def test_wolves_win_when_they_match_the_village():
    game = Game(dict(ROLES))
    game.resolve_votes({"P2": "P1", "P3": "P1"})
    game.resolve_kill("P2")
    assert game.winner is None  # 1 wolf, 2 village: not yet
    game.resolve_kill("P3")
    assert game.winner == "wolves"  # 1 and 1
    assert Game(dict(ROLES), alive=["P1", "P2", "P4", "P5"]).winner is None  # only moves check the winner
    two = Game(dict(ROLES))
    two.resolve_kill("P2")
    assert two.winner == "wolves"  # 2 wolves and 2 village already


def _wolf(game: Game, agent: str, kind: str) -> str:
    """Hand-traceable wolves: kill the lowest-seated villager alive, always vote P2."""
    if kind == "KILL":
        return f"KILL: {next(s for s in game.alive if game.roles[s] != 'wolf')}"
    return "VOTE: P2"


def test_a_hand_traced_game():
    # Night 0: the seer P2 checks P1 (wolf). Day 1: it accuses P1; P1 and P4 vote P2, the rest P1:
    # P1 is out (3-2). Night 1: the seer checks P3 (good); wolf P4 kills P2. Day 2: no seer; P3 votes
    # P4, P5 votes P3, P4 votes the dead P2 (invalid): a tie. Night 2: P3 dies; 1 wolf vs 1: wolves win.
    game = Game(dict(ROLES))

    async def ask(agent, kind, messages):
        return _wolf(game, agent, kind) if agent.startswith("wolf") else village_plan(game, agent, kind)

    conversations = asyncio.run(play(game, ask))
    assert game.winner == "wolves" and game.day == 2
    assert game.alive == ["P4", "P5"] and game.checks == {"P1": "wolves", "P3": "village"}
    assert game.invalid == {"wolf2": 1}
    assert game.log == [
        "Day 1: the seer (P2) accuses P1.",
        "Day 1: votes P1->P2, P2->P1, P3->P1, P4->P2, P5->P1; P1 is eliminated, a wolf.",
        "Night 1: P2 is killed, a seer.",
        "Day 2: votes P3->P4, P4->none, P5->P3; nobody is eliminated.",
        "Night 2: P3 is killed, a villager.",
    ]
    # each agent's history: system, then one user/assistant pair per action it was asked for
    seer = conversations["seer"]
    assert [m["content"] for m in seer if m["role"] == "assistant"] == ["CHECK: P1", "ACCUSE: P1", "VOTE: P1", "CHECK: P3"]
    assert "Your checks: P1 is a wolf." in seer[3]["content"]
    assert sum(m["role"] == "user" for m in conversations["villager2"]) == 2
    # the seer accused once, knowing P1 a wolf, and named P1: one informed accusation, one hit
    assert (game.seer_informed, game.seer_hits) == (1, 1)


def test_seer_accusation_accuracy_counts_only_accusations_made_knowing_a_wolf():
    # Night 0: the seer P2 checks P3 (good), so day 1's accusation of P4 is a guess, not counted. Day 1: the
    # villagers and the seer vote P4, the wolves P3: P4 is out (3-2). Night 1: the seer checks P1 (a wolf),
    # wolf P1 kills P3. Day 2: knowing P1, the seer accuses P5: an informed accusation, missed. P5 is voted
    # out (the other votes name the dead), and one wolf against the seer wins.
    game = Game(dict(ROLES))
    seer = iter(["CHECK: P3", "ACCUSE: P4", "VOTE: P4", "CHECK: P1", "ACCUSE: P5", "VOTE: P5"])

    async def ask(agent, kind, messages):
        if agent == "seer":
            return next(seer)
        if agent.startswith("villager"):
            return "VOTE: P4"
        return "KILL: P3" if kind == "KILL" else "VOTE: P3"

    asyncio.run(play(game, ask))
    assert game.winner == "wolves" and game.day == 2 and game.alive == ["P1", "P2"]
    assert (game.seer_informed, game.seer_hits) == (1, 0)


def test_an_agent_that_raises_loses_its_turns_and_the_game_ends():
    game = Game(dict(ROLES))

    async def ask(agent, kind, messages):
        if agent == "seer":
            raise RuntimeError("the seer's model is down")
        return "nonsense" if agent.startswith("wolf") else village_plan(game, agent, kind)

    # No accusation, no kill, no valid wolf vote. Day 1: villagers P3, P5 vote the lowest other, P1:
    # out (a wolf). Day 2: they vote P2 (the silent seer): out. Day 3: P3->P4, P5->P3, a tie: time is up.
    conversations = asyncio.run(play(game, ask))
    assert game.winner == "wolves" and game.day == 3 and game.alive == ["P3", "P4", "P5"]
    # the seer: check, accuse, vote on day 1, check, accuse, vote on day 2; every one raised
    assert game.errors == {"seer": 6} and game.invalid["seer"] == game.actions["seer"] == 6
    assert game.invalid["wolf1"] == 1 and game.invalid["wolf2"] == 5  # wolf2: 3 votes and 2 kills
    assert conversations["seer"] == [conversations["seer"][0]]  # no half turns left in its history


def _judge(meta: dict) -> tuple[float, bool | None]:
    reward = asyncio.run(WinJudge(invalid_penalty=0.5).score(Task(task_id="t", query="q"), WorkflowOutput(metadata=meta)))
    return round(reward.total, 6), reward.is_success


def test_win_judge_rewards_the_trained_sides_win_less_its_invalid_share():
    base = {"trained_side": "village", "invalid": {"seer": 1, "wolf1": 5}, "actions": {"seer": 2, "villager1": 1, "villager2": 1, "wolf1": 5}}
    assert _judge({**base, "winner": "village"}) == (0.875, True)   # 1 - 0.5 * 1/4
    assert _judge({**base, "winner": "wolves"}) == (-0.125, False)
    assert _judge({**base, "winner": "wolves", "trained_side": "wolves"}) == (0.5, True)  # 1 - 0.5 * 5/5
    assert _judge({}) == (0.0, False)


def _tuner(llm) -> Tuner:
    return Tuner(llm.base_url, "policy", issue_key=lambda agent: f"key-{agent}", max_turns=10)


async def test_workflow_plays_through_the_tuner_and_counts_failing_agents(llm):
    # Every agent votes for P1 (the first wolf, so P1 goes on day 1), checks P3, kills P2; wolf2's calls fail.
    def respond(request):
        agent = llm.headers[-1]["authorization"].removeprefix("Bearer key-")
        if agent == "wolf2":
            return "500"
        text = request["messages"][-1]["content"]
        line = {"VOTE": "VOTE: P1", "ACCUSE": "ACCUSE: P1", "CHECK": "CHECK: P3", "KILL": "KILL: P2"}
        return {"content": next(v for k, v in line.items() if f"Reply: {k}" in text)}

    llm.respond = respond
    workflow = Werewolves(trained_side="village", frozen_model=None)
    task = Task(task_id="g", query="a game", metadata={"roles": dict(ROLES)})
    out = await workflow.execute(task, _tuner(llm))
    meta = out.metadata
    # Day 1: P1 out 4-0 (wolf2's vote lost). Night 1: P2 killed. Day 2: P1 is dead, so all votes are invalid...
    assert meta["log"][:2] == ["Day 1: the seer (P2) accuses P1.",
                               "Day 1: votes P1->none, P2->P1, P3->P1, P4->none, P5->P1; P1 is eliminated, a wolf."]
    assert meta["errors"] == {"wolf2": meta["actions"]["wolf2"]} and meta["errors"]["wolf2"] >= 2
    assert out.answer == meta["winner"] and out.metrics["agent_errors"] == meta["errors"]["wolf2"]
    assert out.metrics["calls_frozen"] > 0 and out.metrics["calls_trained"] > 0
    assert out.messages == meta["conversations"]["seer"]
    agents = {h["authorization"].removeprefix("Bearer key-") for h in llm.headers}
    assert agents == {"seer", "villager1", "villager2", "wolf1", "wolf2"}


def test_make_data_reproduces_the_shipped_files(tmp_path):
    counts = build_data(tmp_path)
    assert counts == {"train": 48, "val": 16, "heldout": 120, "sft": 96}
    for name in counts:
        assert (tmp_path / f"{name}.jsonl").read_bytes() == (FOLDER / f"{name}.jsonl").read_bytes(), name
    train = [json.loads(line) for line in (FOLDER / "train.jsonl").read_text().splitlines()]
    val = [json.loads(line) for line in (FOLDER / "val.jsonl").read_text().splitlines()]
    assert not {t["metadata"]["seed"] for t in train} & {t["metadata"]["seed"] for t in val}
    assert all(t["metadata"]["roles"] == deal(t["metadata"]["seed"]) for t in train + val)
    held = [json.loads(line) for line in (FOLDER / "heldout.jsonl").read_text().splitlines()]
    seatings = {json.dumps(t["metadata"]["roles"], sort_keys=True) for t in held}
    assert len(seatings) == 30 and len({t["metadata"]["cluster"] for t in held}) == 30  # every seating, 4 games each
    assert all(sorted(t["metadata"]["roles"].values()) == ["seer", "villager", "villager", "wolf", "wolf"] for t in held)
    sft = [json.loads(line) for line in (FOLDER / "sft.jsonl").read_text().splitlines()]
    assert {d["metadata"]["agent"] for d in sft} == {"seer", "villager1", "villager2"}  # only the trained side
    assert all(m["role"] != "assistant" or parse_action(m["content"].split(":")[0], m["content"])
               for d in sft for m in d["messages"])
