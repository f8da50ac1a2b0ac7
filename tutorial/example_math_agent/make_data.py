"""Write the math tutorial's word problems and demonstrations (seeded: reproduced byte for byte).

    python make_data.py [--out DIR]

- `train.jsonl` (64 tasks), `val.jsonl` (32 tasks, other problems): `{"task_id", "query",
  "answer": integer, "metadata": {"category", "expression"}}`.
- `sft.jsonl`: for each of the first 32 train tasks, a demonstration in OpenAI format: a
  `calculator` call on the task's expression, the tool's result, then "The answer is \\boxed{N}.".
- `heldout.jsonl` (128 more problems, in neither train nor val; drawn after them from the same seeded
  stream, so the files above are unchanged): what `benchmarks/rl_gain.py --task math_agent` scores.
- `heldout2.jsonl` (128 more, in none of the above, drawn after them): a second held-out set that confirms
  an arm chosen on the first (`rl_gain.py --heldout heldout2.jsonl`).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from math_tools import CALCULATOR_SPEC, SYSTEM_PROMPT, evaluate

from ajet.jsonl import write_jsonl_files

SEED = 7
N_TRAIN, N_VAL, N_SFT, N_HELDOUT = 64, 32, 32, 128
HERE = Path(__file__).resolve().parent

# Each generator draws numbers and returns (query, expression). Answers are whole numbers.
Generator = Callable[[random.Random], tuple[str, str]]
NAMES = ["Maria", "Tom", "Aisha", "Kenji", "Lena", "Omar", "Sofia", "Diego", "Priya", "Noah"]


def _add(r: random.Random) -> tuple[str, str]:
    a, b = r.randint(12, 480), r.randint(12, 480)
    return f"{r.choice(NAMES)} has {a} marbles and wins {b} more. How many marbles does {'she' if r.random() < .5 else 'he'} have now?", f"{a} + {b}"


def _subtract(r: random.Random) -> tuple[str, str]:
    a = r.randint(60, 900)
    b = r.randint(10, a - 5)
    return f"A train leaves with {a} passengers and {b} get off at the first stop. How many passengers are still on the train?", f"{a} - {b}"


def _multiply(r: random.Random) -> tuple[str, str]:
    a, b = r.randint(3, 48), r.randint(4, 36)
    return f"A box holds {a} pencils. How many pencils are in {b} boxes?", f"{a} * {b}"


def _divide(r: random.Random) -> tuple[str, str]:
    n, each = r.randint(3, 24), r.randint(4, 40)
    return f"{n * each} cookies are shared equally among {n} children. How many cookies does each child get?", f"{n * each} / {n}"


def _shop(r: random.Random) -> tuple[str, str]:
    n, price = r.randint(2, 15), r.randint(5, 60)
    discount = r.randint(1, n * price // 4)
    return (f"A shop sells {n} shirts at {price} dollars each and takes {discount} dollars off the total. "
            f"How many dollars does the customer pay?", f"{n} * {price} - {discount}")


def _reading(r: random.Random) -> tuple[str, str]:
    pages, days, extra = r.randint(8, 45), r.randint(3, 14), r.randint(5, 60)
    name = r.choice(NAMES)
    return (f"{name} reads {pages} pages a day for {days} days, then {extra} more pages on the weekend. "
            f"How many pages does {name} read in total?", f"{pages} * {days} + {extra}")


def _garden(r: random.Random) -> tuple[str, str]:
    rows, per_row = r.randint(3, 20), r.randint(4, 25)
    dead = r.randint(1, rows * per_row // 3)
    return (f"A farmer plants {rows} rows of {per_row} tomato plants, and {dead} plants die. "
            f"How many plants are left?", f"{rows} * {per_row} - {dead}")


def _trip(r: random.Random) -> tuple[str, str]:
    speed, hours, stops = r.randint(30, 90), r.randint(2, 8), r.randint(2, 5)
    each = r.randint(5, 20)
    return (f"A bus drives {hours} hours at {speed} km per hour, then {stops} more short legs of {each} km each. "
            f"How many km does it travel?", f"{speed} * {hours} + {stops} * {each}")


GENERATORS: dict[str, Generator] = {
    "add": _add, "subtract": _subtract, "multiply": _multiply, "divide": _divide,
    "shop": _shop, "reading": _reading, "garden": _garden, "trip": _trip,
}


def make_tasks(rng: random.Random, n: int, exclude: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """`n` distinct problems, none asking a query in `exclude`, cycling through the categories so each
    is equally represented."""
    tasks, seen = [], set(exclude)
    categories = list(GENERATORS)
    while len(tasks) < n:
        category = categories[len(tasks) % len(categories)]
        query, expression = GENERATORS[category](rng)
        if query in seen:
            continue
        seen.add(query)
        answer = evaluate(expression)
        if not isinstance(answer, int):
            raise ValueError(f"{category} made a non-integer answer {answer!r} for {expression!r}")
        tasks.append({"query": query, "answer": answer, "metadata": {"category": category, "expression": expression}})
    return tasks


def demonstration(task: dict[str, Any]) -> dict[str, Any]:
    """A calculator call on the task's expression, its result, and the boxed answer."""
    expression, answer = task["metadata"]["expression"], task["answer"]
    return {
        "tools": [CALCULATOR_SPEC],
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task["query"]},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function", "function": {
                "name": "calculator", "arguments": json.dumps({"expression": expression})}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": str(evaluate(expression))},
            {"role": "assistant", "content": f"The answer is \\boxed{{{answer}}}."},
        ],
    }


def build(out_dir: Path) -> dict[str, int]:
    """Generate every file into `out_dir`; return the row count of each."""
    rng = random.Random(SEED)
    tasks = make_tasks(rng, N_TRAIN + N_VAL)
    rng.shuffle(tasks)
    # drawn after the shuffle, so train and val are what they were before held-out tasks existed
    heldout = make_tasks(rng, N_HELDOUT, exclude=frozenset(t["query"] for t in tasks))
    # heldout2: drawn after heldout (2026-12-07), once GRPO at the YAML's settings had been scored on it and
    # before a groups-of-8, dynamic-sampling arm was: a fresh set to confirm an arm chosen after that score
    heldout2 = make_tasks(rng, N_HELDOUT, exclude=frozenset(t["query"] for t in tasks + heldout))
    splits = {"train": tasks[:N_TRAIN], "val": tasks[N_TRAIN:], "heldout": heldout, "heldout2": heldout2}
    rows: dict[str, list[dict]] = {}
    for split, items in splits.items():
        rows[split] = [{"task_id": f"math-{split}-{i:03d}", **task} for i, task in enumerate(items)]
    rows["sft"] = [demonstration(task) for task in splits["train"][:N_SFT]]
    return write_jsonl_files(out_dir, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the files into (default: this folder)")
    args = parser.parse_args(argv)
    counts = build(args.out)
    print(" ".join(f"{name}={n}" for name, n in counts.items()))


if __name__ == "__main__":
    main()
