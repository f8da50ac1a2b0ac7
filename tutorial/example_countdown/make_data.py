"""Write the countdown tutorial's puzzles and demonstrations (seeded: reproduced byte for byte).

    python make_data.py [--out DIR]

- `train.jsonl` (96 tasks), `val.jsonl` (32 other tasks), `heldout.jsonl` (128 others, for
  benchmarks/rl_gain.py): `{"task_id", "query", "answer": target, "metadata": {"numbers": [a, b, c],
  "target": N, "ops": 1 or 2, "solution": expression,
  "category": "one_op" or "two_op"}}`. Three numbers from 1 to 10; sized so the 135M
  model can solve some: half the targets take one operation on two of the numbers (`3 + 7`), half two
  operations on all three and no fewer, with + - * (a whole number from 1 to 50, none of the numbers
  itself). The rule is Countdown's own: each number at most once, at least two of them.
- `sft.jsonl`: one demonstration per train task and per puzzle of N_SFT_EXTRA more (drawn after the
  held-out ones, in none of the splits), built by construction: the solver's shortest expression in
  `<answer></answer>`, with the same system prompt the AgentScope agent sends. 96 demonstrations taught
  the format but solved 9% of the held-out puzzles; the extra ones teach the arithmetic.
- `sft_search.jsonl`: the same puzzles, demonstrated in the agent's `search` style: the search of
  `countdown.search_trace` written out, then `<answer></answer>` (the SEARCH_PROMPT system prompt).
- `heldout2.jsonl` (128 more, in none of the above; drawn last, 2026-11-30, after ten RL arms had been
  scored on `heldout.jsonl`): a second held-out set that confirms an arm chosen on the first
  (`benchmarks/rl_gain.py --heldout`).
- `heldout3.jsonl` (128 more, in none of the above; drawn after heldout2, 2026-11-30, after the 24-step
  groups-of-8 arm had scored +7.8 on `heldout.jsonl` and +0.4 on `heldout2.jsonl`): a third set, scored only
  by runs whose settings were fixed before it was drawn.
"""

from __future__ import annotations

import argparse
import itertools
import random
from pathlib import Path
from typing import Any

from countdown import expressions, parse, search_trace, solve, verify
from countdown_agent import SEARCH_PROMPT, SYSTEM_PROMPT

from ajet.jsonl import write_jsonl_files

SEED = 11
N_TRAIN, N_VAL, N_HELDOUT = 96, 32, 128
N_SFT_EXTRA = 672
LATER_HELDOUT = ("heldout2", "heldout3")
# metadata.category: what rollout.task_weights samples RL tasks by
CATEGORY = {1: "one_op", 2: "two_op"}
N_NUMBERS, LOW, HIGH, MAX_TARGET = 3, 1, 10, 50
HERE = Path(__file__).resolve().parent


def query(numbers: list[int], target: int) -> str:
    """The user message of a puzzle."""
    return f"Numbers: {', '.join(map(str, numbers))}. Target: {target}."


def reachable(numbers: tuple[int, ...]) -> set[int]:
    """Whole numbers from 1 to MAX_TARGET that + - * make of exactly these numbers, none of them itself."""
    return {int(v) for e, v in expressions(numbers)
            if "/" not in e and v.denominator == 1 and 1 <= v <= MAX_TARGET and v not in numbers}


PuzzleKey = tuple[tuple[int, ...], int]


def puzzle_key(numbers: list[int], target: int) -> PuzzleKey:
    """What makes two puzzles the same: their numbers in any order and their target."""
    return tuple(sorted(numbers)), target


def make_tasks(rng: random.Random, n: int, exclude: set[PuzzleKey] | None = None) -> list[dict[str, Any]]:
    """`n` distinct solvable puzzles, none in `exclude` (`puzzle_key`s), alternating one- and two-operation targets."""
    tasks, seen = [], set(exclude or ())
    while len(tasks) < n:
        numbers = [rng.randint(LOW, HIGH) for _ in range(N_NUMBERS)]
        one = set().union(*(reachable(pair) for pair in itertools.combinations(numbers, 2)))
        wanted = 1 if len(tasks) % 2 == 0 else 2
        values = sorted(one if wanted == 1 else reachable(tuple(numbers)) - one)
        if not values:
            continue
        target = rng.choice(values)
        key = puzzle_key(numbers, target)
        solution = solve(numbers, target, use_all=False)  # the fewest numbers first
        assert solution is not None and verify(solution, numbers, target, use_all=False)[0]
        ops = len(parse(solution)[1]) - 1
        if key in seen or ops != wanted:  # a division of two numbers may reach a "two-operation" target
            continue
        seen.add(key)
        tasks.append({"query": query(numbers, target), "answer": target,
                      "metadata": {"numbers": numbers, "target": target, "ops": ops, "solution": solution,
                                   "category": CATEGORY[ops]}})
    return tasks


def conversation(system: str, query: str, reply: str) -> dict[str, Any]:
    """One demonstration: the agent's system prompt, the puzzle, and its reply."""
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": query},
                         {"role": "assistant", "content": reply}]}


def demonstration(task: dict[str, Any]) -> dict[str, Any]:
    """The agent's prompt and the solver's answer, as the agent would send and receive them."""
    return conversation(SYSTEM_PROMPT, task["query"], f"<answer>{task['metadata']['solution']}</answer>")


def search_demonstration(task: dict[str, Any]) -> dict[str, Any]:
    """The agent's `search`-style prompt, the worked search and its answer."""
    numbers, target = task["metadata"]["numbers"], task["answer"]
    trace, answer = search_trace(numbers, target)
    assert answer is not None and verify(answer, numbers, target, use_all=False)[0], task
    return conversation(SEARCH_PROMPT, task["query"], f"{trace}\n<answer>{answer}</answer>")


def build(out_dir: Path) -> dict[str, int]:
    """Generate every file into `out_dir`; return the row count of each."""
    rng = random.Random(SEED)
    tasks = make_tasks(rng, N_TRAIN + N_VAL + N_HELDOUT)
    splits = {"train": tasks[:N_TRAIN], "val": tasks[N_TRAIN:N_TRAIN + N_VAL], "heldout": tasks[N_TRAIN + N_VAL:]}
    rows: dict[str, list[dict]] = {
        split: [{"task_id": f"countdown-{split}-{i:03d}", **t} for i, t in enumerate(items)]
        for split, items in splits.items()}
    # drawn after the held-out puzzles, so those stay as committed
    extra = make_tasks(rng, N_SFT_EXTRA, {puzzle_key(t["metadata"]["numbers"], t["answer"]) for t in tasks})
    rows["sft"] = [demonstration(t) for t in splits["train"] + extra]
    rows["sft_search"] = [search_demonstration(t) for t in splits["train"] + extra]
    # drawn after everything above, each after the one before, so every earlier file stays as committed:
    # held-out sets for confirming an arm chosen after several were scored on the sets before it
    drawn = tasks + extra
    for split in LATER_HELDOUT:
        fresh = make_tasks(rng, N_HELDOUT, {puzzle_key(t["metadata"]["numbers"], t["answer"]) for t in drawn})
        rows[split] = [{"task_id": f"countdown-{split}-{i:03d}", **t} for i, t in enumerate(fresh)]
        drawn += fresh
    return write_jsonl_files(out_dir, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the files into (default: this folder)")
    args = parser.parse_args(argv)
    print(" ".join(f"{name}={n}" for name, n in build(args.out).items()))


if __name__ == "__main__":
    main()
