"""Write the werewolves tutorial's games and demonstrations (seeded: reproduced byte for byte).

    python make_data.py [--out DIR]

- `train.jsonl` (48 games), `val.jsonl` (16 other games): `{"task_id", "query", "answer": null,
  "metadata": {"seed", "roles": {seat: role}}}`; a game is its seating, dealt by `deal(seed)`.
- `heldout.jsonl` (120 games, for benchmarks/rl_gain.py): each of the game's 30 seatings (two wolves,
  a seer, two villagers on five seats) 4 times, `metadata.cluster` naming the seating. A seating is all
  a task is, so these are not new to training; what differs is the play, sampled (rl_gain evaluates
  them at temperature 1), and rl_gain's interval resamples seatings, not games.
- `sft.jsonl`: for each of the first 32 train games, the game played to its end by the village's
  scripted plan (`village_plan`) against wolves that pick any valid target at random; each village
  agent's whole conversation is one demonstration (`{"messages": [...], "metadata": {...}}`), built
  with the same prompts the workflow sends, so the demonstrations are the workflow's own format.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
from pathlib import Path
from typing import Any

from werewolf_game import PLAYERS, ROLES, VILLAGE_AGENTS, Game, deal, play, random_plan, village_plan

from ajet.jsonl import write_jsonl_files

SEED = 11
N_TRAIN, N_VAL, N_SFT = 48, 16, 32
HELDOUT_TABLES = 4  # games per seating in heldout.jsonl
HERE = Path(__file__).resolve().parent


def _task(split: str, index: int, seed: int) -> dict[str, Any]:
    return {"task_id": f"werewolves-{split}-{index:03d}", "query": f"A game of werewolves, seating {seed}.",
            "answer": None, "metadata": {"seed": seed, "roles": deal(seed)}}


async def _demos(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The village agents' conversations of one scripted game."""
    game = Game(dict(task["metadata"]["roles"]))
    wolves = random_plan(random.Random(task["metadata"]["seed"]))

    async def ask(agent: str, kind: str, messages: list[dict]) -> str:
        return village_plan(game, agent, kind) if agent in VILLAGE_AGENTS else wolves(game, agent, kind)

    conversations = await play(game, ask)
    return [{"messages": conversations[a], "metadata": {"task_id": task["task_id"], "agent": a, "winner": game.winner}}
            for a in VILLAGE_AGENTS if len(conversations[a]) > 1]


def build(out_dir: Path) -> dict[str, int]:
    """Generate every file into `out_dir`; return the row count of each."""
    seeds = random.Random(SEED).sample(range(10_000), N_TRAIN + N_VAL)
    rows: dict[str, list[dict]] = {
        "train": [_task("train", i, s) for i, s in enumerate(seeds[:N_TRAIN])],
        "val": [_task("val", i, s) for i, s in enumerate(seeds[N_TRAIN:])],
    }
    seatings = sorted(set(itertools.permutations(ROLES)))
    rows["heldout"] = [
        {"task_id": f"werewolves-heldout-{i * HELDOUT_TABLES + t:03d}", "query": f"A game of werewolves, seating {i}.",
         "answer": None, "metadata": {"roles": dict(zip(PLAYERS, roles)), "cluster": f"seating-{i:02d}", "table": t}}
        for i, roles in enumerate(seatings) for t in range(HELDOUT_TABLES)]
    rows["sft"] = [demo for task in rows["train"][:N_SFT] for demo in asyncio.run(_demos(task))]
    return write_jsonl_files(out_dir, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the files into (default: this folder)")
    args = parser.parse_args(argv)
    print(" ".join(f"{name}={n}" for name, n in build(args.out).items()))


if __name__ == "__main__":
    main()
