"""Write the countdown tutorial's puzzles and demonstrations (seeded: reproduced byte for byte).

    python make_data.py [--out DIR]

- `train.jsonl` (96 tasks), `val.jsonl` (32 other tasks): `{"task_id", "query", "answer": target,
  "metadata": {"numbers": [a, b, c], "target": N, "solution": expression}}`. Three numbers from 1 to
  12; the target is the value of a random expression of them (+, -, *, and / when it divides
  exactly), a whole number from 1 to 100, so every puzzle has a solution.
- `sft.jsonl`: one demonstration per train task, built by construction: the solver's expression in
  `<answer></answer>`, with the same system prompt the AgentScope agent sends.
"""

from __future__ import annotations

import argparse
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

from countdown import expressions, solve, verify
from countdown_agent import SYSTEM_PROMPT

from ajet.jsonl import write_jsonl_files

SEED = 11
N_TRAIN, N_VAL = 96, 32
N_NUMBERS, LOW, HIGH, MAX_TARGET = 3, 1, 12, 100
HERE = Path(__file__).resolve().parent


def query(numbers: list[int], target: int) -> str:
    """The user message of a puzzle."""
    return f"Numbers: {', '.join(map(str, numbers))}. Target: {target}."


def make_tasks(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """`n` distinct solvable puzzles."""
    tasks, seen = [], set()
    while len(tasks) < n:
        numbers = [rng.randint(LOW, HIGH) for _ in range(N_NUMBERS)]
        values = sorted({int(v) for _, v in expressions(tuple(numbers))
                         if v.denominator == 1 and 1 <= v <= MAX_TARGET and v not in numbers})
        if not values:
            continue
        target = rng.choice(values)
        key = (tuple(sorted(numbers)), target)
        if key in seen:
            continue
        seen.add(key)
        solution = solve(numbers, target)
        assert solution is not None and verify(solution, numbers, target)[0]
        tasks.append({"query": query(numbers, target), "answer": target,
                      "metadata": {"numbers": numbers, "target": target, "solution": solution}})
    return tasks


def demonstration(task: dict[str, Any]) -> dict[str, Any]:
    """The agent's prompt and the solver's answer, as the agent would send and receive them."""
    return {"messages": [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task["query"]},
        {"role": "assistant", "content": f"<answer>{task['metadata']['solution']}</answer>"},
    ]}


def build(out_dir: Path) -> dict[str, int]:
    """Generate every file into `out_dir`; return the row count of each."""
    rng = random.Random(SEED)
    tasks = make_tasks(rng, N_TRAIN + N_VAL)
    splits = {"train": tasks[:N_TRAIN], "val": tasks[N_TRAIN:]}
    rows: dict[str, list[dict]] = {
        split: [{"task_id": f"countdown-{split}-{i:03d}", **t} for i, t in enumerate(items)]
        for split, items in splits.items()}
    rows["sft"] = [demonstration(t) for t in splits["train"]]
    return write_jsonl_files(out_dir, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the files into (default: this folder)")
    args = parser.parse_args(argv)
    print(" ".join(f"{name}={n}" for name, n in build(args.out).items()))


if __name__ == "__main__":
    main()
