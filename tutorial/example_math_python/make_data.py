"""Write the Python tutorial's problems and demonstrations (seeded: reproduced byte for byte).

    python make_data.py [--out DIR]

- `train.jsonl` (64 tasks), `val.jsonl` (32 other tasks): `{"task_id", "query", "answer": integer,
  "metadata": {"category", "code"}}`. Each problem is easy to program and hard to do in one's head
  (count primes, digit sums of powers, modular powers, ...), so writing code is what pays.
- `sft.jsonl`: for each train task, a demonstration built by construction (not sampled from a model):
  a `python` call with the task's program, the program's output, then "The answer is \\boxed{N}.".
- `heldout.jsonl` (128 more problems, in neither train nor val; drawn after them from the same seeded
  stream, so the files above are unchanged): what `benchmarks/rl_gain.py --task math_python` scores.

`answer` is what `code` prints, computed here by running it (trusted code, written below).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from python_tool import PYTHON_SPEC, SYSTEM_PROMPT

from ajet.jsonl import write_jsonl_files

SEED = 11
N_TRAIN, N_VAL, N_HELDOUT = 64, 32, 128
HERE = Path(__file__).resolve().parent

# Each generator draws numbers and returns (query, program). The program prints one whole number.
Generator = Callable[[random.Random], tuple[str, str]]


def _multiples(r: random.Random) -> tuple[str, str]:
    n, k = r.randint(50, 400), r.randint(3, 9)
    return (f"What is the sum of all whole numbers from 1 to {n} that are divisible by {k}?",
            f"print(sum(i for i in range(1, {n} + 1) if i % {k} == 0))")


def _primes(r: random.Random) -> tuple[str, str]:
    n = r.randint(30, 300)
    return (f"How many prime numbers are smaller than {n}?",
            f"print(sum(all(p % d for d in range(2, p)) for p in range(2, {n})))")


def _digit_sum(r: random.Random) -> tuple[str, str]:
    a, b = r.randint(2, 9), r.randint(20, 60)
    return (f"What is the sum of the digits of {a} to the power {b}?",
            f"print(sum(int(d) for d in str({a} ** {b})))")


def _divisors(r: random.Random) -> tuple[str, str]:
    n = r.randint(60, 999)
    return (f"How many positive divisors does {n} have?",
            f"print(sum(1 for d in range(1, {n} + 1) if {n} % d == 0))")


def _modpow(r: random.Random) -> tuple[str, str]:
    a, b, m = r.randint(2, 19), r.randint(20, 90), r.randint(7, 97)
    return (f"What is the remainder when {a} to the power {b} is divided by {m}?", f"print(pow({a}, {b}, {m}))")


def _lcm(r: random.Random) -> tuple[str, str]:
    a, b, c = r.randint(4, 30), r.randint(4, 30), r.randint(4, 30)
    return (f"What is the least common multiple of {a}, {b} and {c}?", f"import math\nprint(math.lcm({a}, {b}, {c}))")


def _squares(r: random.Random) -> tuple[str, str]:
    n = r.randint(10, 60)
    return (f"What is the sum of the squares of the whole numbers from 1 to {n}?",
            f"print(sum(i * i for i in range(1, {n} + 1)))")


def _fibonacci(r: random.Random) -> tuple[str, str]:
    n = r.randint(12, 40)
    return (f"The Fibonacci sequence starts 1, 1, 2, 3, 5. What is its term number {n}?",
            f"a, b = 1, 1\nfor _ in range({n} - 1):\n    a, b = b, a + b\nprint(a)")


GENERATORS: dict[str, Generator] = {
    "multiples": _multiples, "primes": _primes, "digit_sum": _digit_sum, "divisors": _divisors,
    "modpow": _modpow, "lcm": _lcm, "squares": _squares, "fibonacci": _fibonacci,
}


def run_trusted(code: str) -> int:
    """What one of the programs above prints (they are ours: run in-process, no sandbox needed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {})
    return int(out.getvalue())


def make_tasks(rng: random.Random, n: int, exclude: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """`n` distinct problems, none asking a query in `exclude`, cycling through the categories so each
    is equally represented."""
    tasks, seen = [], set(exclude)
    categories = list(GENERATORS)
    while len(tasks) < n:
        category = categories[len(tasks) % len(categories)]
        query, code = GENERATORS[category](rng)
        if query in seen:
            continue
        seen.add(query)
        tasks.append({"query": query, "answer": run_trusted(code), "metadata": {"category": category, "code": code}})
    return tasks


def demonstration(task: dict[str, Any]) -> dict[str, Any]:
    """A python call with the task's program, its output, and the boxed answer."""
    code, answer = task["metadata"]["code"], task["answer"]
    return {
        "tools": [PYTHON_SPEC],
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task["query"]},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function", "function": {
                "name": "python", "arguments": json.dumps({"code": code})}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": str(answer)},
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
    splits = {"train": tasks[:N_TRAIN], "val": tasks[N_TRAIN:], "heldout": heldout}
    rows: dict[str, list[dict]] = {}
    for split, items in splits.items():
        rows[split] = [{"task_id": f"py-{split}-{i:03d}", **task} for i, task in enumerate(items)]
    rows["sft"] = [demonstration(task) for task in splits["train"]]
    return write_jsonl_files(out_dir, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the files into (default: this folder)")
    args = parser.parse_args(argv)
    counts = build(args.out)
    print(" ".join(f"{name}={n}" for name, n in counts.items()))


if __name__ == "__main__":
    main()
