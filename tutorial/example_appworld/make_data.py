"""Write the appworld tutorial's tasks and demonstrations (seeded: reproduced byte for byte).

    python make_data.py [--out DIR]

- `train.jsonl` (45 tasks), `val.jsonl` (18 other tasks): `{"task_id", "query", "answer":
  {"calls": [...], "changes": [...]}, "metadata": {"category"}}`. `calls` are the reference tool
  calls; `changes` are the facts they leave in a fresh world (`appworld_env.changes`), which the
  judge compares with the episode's final state.
- `heldout.jsonl` (128 tasks in neither, for benchmarks/rl_gain.py): 64 payments and 64 meetings
  (every cancellation is already in train or val), shuffled by a generator of its own so that the
  files above are what they were.
- `sft.jsonl`: one demonstration per train task in OpenAI format (`tools` + `messages`): the
  reference calls, the results the apps really return, then a short confirmation.

Three kinds of task, each needing two apps or two calls: pay a contact (search_contacts, then
send_money), meet a contact (search_contacts, then create_event), cancel an event (list_events,
then cancel_event with the id found).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path
from typing import Any

from appworld_env import INITIAL, SYSTEM_PROMPT, TOOLS, World, changes

from ajet.jsonl import write_jsonl_files

SEED = 5
COUNTS = {"pay": (20, 8), "meet": (20, 8), "cancel": (5, 2)}  # category -> (train, val)
HELDOUT = {"pay": 64, "meet": 64}  # category -> held-out tasks (the 7 cancellations are all used above)
HERE = Path(__file__).resolve().parent

NAMES = [c["name"] for c in INITIAL["contacts"]]
NOTES = ["lunch", "rent", "concert tickets", "taxi", "groceries", "birthday gift"]
AMOUNTS = [12, 20, 25, 40, 55, 80, 15.5]
TITLES = ["Budget review", "Coffee chat", "Project sync", "Design review", "Tennis"]
DATES = [f"2026-03-{d:02d}" for d in range(2, 10)]
TIMES = ["09:00", "10:30", "14:00", "16:00"]

PAY = ["Send {amount} dollars to {name} for {note}.", "Pay {name} {amount} dollars for the {note}.",
       "Transfer {amount} dollars to {name}, note: {note}."]
MEET = ["Schedule '{title}' with {name} on {date} at {time}.",
        "Put a meeting '{title}' with {name} in my calendar on {date} at {time}.",
        "Book '{title}' with {name} for {date} at {time}."]
CANCEL = ["Cancel my {title} on {date}.", "Delete the event '{title}' on {date} from my calendar.",
          "Remove {title} from my calendar on {date}."]


def _fmt(amount: float) -> str:
    return str(int(amount)) if float(amount).is_integer() else str(amount)


def _contact_id(name: str) -> str:
    return next(c["id"] for c in INITIAL["contacts"] if c["name"] == name)


def _pool(category: str, rng: random.Random) -> list[tuple[str, list[tuple[str, dict[str, Any]]], str]]:
    """Every candidate (query, reference calls, confirmation) of a category, in a fixed order."""
    out = []
    if category == "pay":
        for name, note, amount in itertools.product(NAMES, NOTES, AMOUNTS):
            query = rng.choice(PAY).format(name=name, note=note, amount=_fmt(amount))
            calls = [("search_contacts", {"name": name}),
                     ("send_money", {"contact_id": _contact_id(name), "amount": amount, "note": note})]
            out.append((query, calls, f"Done: I sent {_fmt(amount)} dollars to {name} for {note}."))
    elif category == "meet":
        for name, title, date, time in itertools.product(NAMES, TITLES, DATES, TIMES):
            query = rng.choice(MEET).format(name=name, title=title, date=date, time=time)
            calls = [("search_contacts", {"name": name}),
                     ("create_event", {"title": title, "date": date, "time": time, "contact_id": _contact_id(name)})]
            out.append((query, calls, f"Done: '{title}' with {name} is in your calendar on {date} at {time}."))
    else:
        for event in INITIAL["events"]:
            query = rng.choice(CANCEL).format(title=event["title"], date=event["date"])
            calls = [("list_events", {"date": event["date"]}), ("cancel_event", {"event_id": event["id"]})]
            out.append((query, calls, f"Done: I cancelled {event['title']} on {event['date']}."))
    return out


def _run(calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[list[Any]]]:
    """Run the reference calls on a fresh world: (each call's tool message, the changes they make)."""
    world = World()
    contents = []
    for name, args in calls:
        content, record = world.call(name, args)
        if "error" in record:
            raise RuntimeError(f"reference call {name}({args}) failed: {record['error']}")
        contents.append(content)
    return contents, changes(INITIAL, world.state)


def _demo(query: str, calls: list[tuple[str, dict[str, Any]]], contents: list[str], confirmation: str) -> dict:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": query}]
    for i, ((name, args), content) in enumerate(zip(calls, contents)):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": content})
    messages.append({"role": "assistant", "content": confirmation})
    return {"tools": TOOLS, "messages": messages}


def build(out_dir: Path) -> dict[str, int]:
    """Generate every file into `out_dir`; return the row count of each."""
    rng = random.Random(SEED)
    rows: dict[str, list[dict]] = {"train": [], "val": [], "heldout": [], "sft": []}
    picked: dict[str, list] = {"train": [], "val": [], "heldout": []}
    for category, (n_train, n_val) in COUNTS.items():
        pool = _pool(category, rng)
        rng.shuffle(pool)
        picked["val"] += [(category, *item) for item in pool[:n_val]]  # val takes other tasks than train
        picked["train"] += [(category, *item) for item in pool[n_val:n_val + n_train]]
        rest = pool[n_val + n_train:]
        picked["heldout"] += [(category, *item) for item in rest[:HELDOUT.get(category, 0)]]
    for split, items in picked.items():
        (random.Random(SEED + 1) if split == "heldout" else rng).shuffle(items)
        for i, (category, query, calls, confirmation) in enumerate(items):
            contents, facts = _run(calls)
            rows[split].append({"task_id": f"appworld-{split}-{i:03d}", "query": query,
                                "answer": {"calls": [{"name": n, "arguments": a} for n, a in calls], "changes": facts},
                                "metadata": {"category": category}})
            if split == "train":
                rows["sft"].append(_demo(query, calls, contents, confirmation))
    return write_jsonl_files(out_dir, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the files into (default: this folder)")
    args = parser.parse_args(argv)
    print(" ".join(f"{name}={n}" for name, n in build(args.out).items()))


if __name__ == "__main__":
    main()
