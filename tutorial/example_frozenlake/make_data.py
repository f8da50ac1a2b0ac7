"""Write the FrozenLake tutorial's maps and demonstrations (seeded: reproduced byte for byte).

    python make_data.py [--out DIR]

- `train.jsonl` (64 maps), `val.jsonl` (32 other maps), `heldout.jsonl` (128 others, drawn after
  them, for benchmarks/rl_gain.py): `{"task_id", "query", "answer": shortest path length,
  "metadata": {"map": [rows], "path": [moves]}}`. 4x4 lakes, S top left, G bottom right, 2 to 4
  holes, always solvable.
- `sft.jsonl`: one demonstration for each of the first 32 train maps, built by construction: the whole multi-turn episode
  of the shortest path (observation, `<action>move</action>`, next observation, ...), exactly as
  the workflow would hold it.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from agent import SYSTEM_PROMPT
from frozenlake import Lake, shortest_path

from ajet.jsonl import write_jsonl_files

SEED = 5
N_TRAIN, N_VAL, N_SFT, SIZE = 64, 32, 32, 4
N_HELDOUT = 128
HERE = Path(__file__).resolve().parent


def make_map(rng: random.Random) -> list[str]:
    """A random solvable SIZE x SIZE lake."""
    while True:
        cells = [["F"] * SIZE for _ in range(SIZE)]
        cells[0][0], cells[-1][-1] = "S", "G"
        inner = [(r, c) for r in range(SIZE) for c in range(SIZE) if (r, c) not in ((0, 0), (SIZE - 1, SIZE - 1))]
        for r, c in rng.sample(inner, rng.randint(2, 4)):
            cells[r][c] = "H"
        rows = ["".join(row) for row in cells]
        if shortest_path(rows) is not None:
            return rows


def demonstration(rows: list[str]) -> dict[str, Any]:
    """The shortest path played out: every observation and every move, as the workflow sends them."""
    lake = Lake(rows)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": lake.observation()}]
    for move in shortest_path(rows) or []:
        messages.append({"role": "assistant", "content": f"<action>{move}</action>"})
        step = lake.step(move)
        if step.done:
            assert step.event == "goal", step
            break
        messages.append({"role": "user", "content": step.observation})
    return {"messages": messages}


def build(out_dir: Path) -> dict[str, int]:
    """Generate every file into `out_dir`; return the row count of each."""
    rng = random.Random(SEED)
    maps: list[list[str]] = []
    while len(maps) < N_TRAIN + N_VAL + N_HELDOUT:  # the held-out maps come after: train and val are unchanged
        rows = make_map(rng)
        if rows not in maps:
            maps.append(rows)
    rows_out: dict[str, list[dict]] = {}
    splits = {"train": maps[:N_TRAIN], "val": maps[N_TRAIN:N_TRAIN + N_VAL], "heldout": maps[N_TRAIN + N_VAL:]}
    for split, items in splits.items():
        rows_out[split] = [{"task_id": f"frozenlake-{split}-{i:03d}", "query": "\n".join(m),
                            "answer": len(shortest_path(m) or []), "metadata": {"map": m, "path": shortest_path(m)}}
                           for i, m in enumerate(items)]
    rows_out["sft"] = [demonstration(m) for m in maps[:N_SFT]]
    return write_jsonl_files(out_dir, rows_out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the files into (default: this folder)")
    args = parser.parse_args(argv)
    print(" ".join(f"{name}={n}" for name, n in build(args.out).items()))


if __name__ == "__main__":
    main()
