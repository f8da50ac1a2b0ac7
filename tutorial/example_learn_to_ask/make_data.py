"""Write the learning-to-ask cases and demonstrations (seeded: reproduced byte for byte).

    python make_data.py [--out DIR]

- `train.jsonl` (64 cases), `val.jsonl` (32 other cases), `heldout.jsonl` (128 others, drawn after
  them, for benchmarks/rl_gain.py): `{"task_id", "query": the patient's opening
  line, "answer": {"facts": {topic: fact}, "advice": text}, "metadata": {"complaint"}}`. The facts are
  the hidden record: the patient reveals one only when asked about its topic.
- `sft.jsonl`: for each train case, a consultation built by construction (not sampled from a model):
  the canonical question of each hidden topic, in the complaint's order, the patient's answer, then
  the advice. Like real transcripts, they are not all perfect: in three of every four (RECHECK_SHARE)
  the doctor double-checks how long it has lasted before advising, a question whose answer is known
  (redundant: the judge takes 0.15 off and it is no success). SFT copies the habit; the judge's reward
  is what can teach the model to drop it (benchmarks/rl_gain.py --task learn_to_ask measures that).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from consult import SYSTEM_PROMPT, TOPICS, scripted_answer

from ajet.jsonl import write_jsonl_files

SEED = 5
N_TRAIN, N_VAL, N_HELDOUT = 64, 32, 128
RECHECK_SHARE = 0.75  # of the demonstrations, those that re-ask a known answer before the advice
RECHECK = "Just to be sure, how long has this been going on?"
HERE = Path(__file__).resolve().parent

# complaint -> (opening line, the topics its hidden record covers in the order a doctor asks, advice)
COMPLAINTS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "cough": ("I've had a bad cough.", ("duration", "fever", "breathing"),
              "Rest, drink plenty of fluids, and see a doctor in person if your breathing gets worse."),
    "headache": ("I keep getting headaches.", ("duration", "severity", "vision", "sleep"),
                 "Keep a headache diary, sleep regularly, and get your eyes checked."),
    "stomach": ("My stomach hurts.", ("duration", "food", "fever"),
                "Eat plain food, drink small sips of water, and come back if the pain gets worse."),
    "rash": ("I have an itchy rash on my arm.", ("duration", "allergies", "medication"),
             "Avoid the likely trigger, use a mild cream, and come back if it spreads."),
    "throat": ("My throat is sore.", ("duration", "fever", "medication"),
               "Drink warm fluids, rest your voice, and return if it lasts more than a week."),
    "back": ("My lower back hurts.", ("duration", "severity", "medication", "sleep"),
             "Keep moving gently, use a warm pack, and see a physiotherapist if it lasts."),
    "dizzy": ("I feel dizzy sometimes.", ("duration", "vision", "food", "medication"),
              "Stand up slowly, eat regular meals, and let us check your blood pressure."),
    "tired": ("I feel tired all the time.", ("duration", "sleep", "travel"),
              "Keep a regular sleep schedule, and we will run a blood test."),
}


def fact(topic: str, r: random.Random) -> str:
    """A random hidden fact about `topic`, as the patient would say it."""
    if topic == "duration":
        return f"It started {r.randint(2, 14)} days ago."
    if topic == "fever":
        return r.choice([f"Yes, about {r.randint(381, 395) / 10} degrees.", "No, I have no fever."])
    if topic == "medication":
        return r.choice(["I take ibuprofen.", "I use an inhaler.", "I take blood pressure pills.", "I'm not taking anything."])
    if topic == "allergies":
        return r.choice(["I'm allergic to penicillin.", "I'm allergic to peanuts.", "I'm allergic to cats.",
                         "No allergies that I know of."])
    if topic == "severity":
        return f"About {r.randint(3, 9)} out of 10."
    if topic == "breathing":
        return r.choice(["I get short of breath on the stairs.", "No, my breathing is fine."])
    if topic == "vision":
        return r.choice(["Things look blurry sometimes.", "No, my vision is fine."])
    if topic == "food":
        return f"I had {r.choice(['seafood', 'leftover rice', 'street food', 'a big curry'])} the day before."
    if topic == "sleep":
        return f"I sleep about {r.randint(4, 7)} hours a night."
    if topic == "travel":
        return r.choice(["I came back from Brazil last week.", "I came back from India last month.", "No, I've been home."])
    raise ValueError(f"no fact template for topic {topic!r}")


def _key(case: dict[str, Any]) -> str:
    return json.dumps([case["metadata"]["complaint"], case["query"], case["answer"]["facts"]])


def make_cases(rng: random.Random, n: int, exclude: set[str] = frozenset()) -> list[dict[str, Any]]:
    """`n` distinct cases, none in `exclude` (`_key`s), cycling through the complaints so each is equally
    represented."""
    cases, seen = [], set(exclude)
    names = list(COMPLAINTS)
    while len(cases) < n:
        complaint = names[len(cases) % len(names)]
        opening, topics, advice = COMPLAINTS[complaint]
        age = rng.randint(18, 80)
        facts = {topic: fact(topic, rng) for topic in topics}
        case = {"query": f"Hello doctor. I'm {age}. {opening}", "answer": {"facts": facts, "advice": advice},
                "metadata": {"complaint": complaint}}
        if _key(case) in seen:
            continue
        seen.add(_key(case))
        cases.append(case)
    return cases


def demonstration(case: dict[str, Any], recheck: bool = False) -> dict[str, Any]:
    """The canonical question of each hidden topic, the patient's answer, then the advice; with `recheck`,
    RECHECK asked before the advice and answered as the scripted patient answers it."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": case["query"]}]
    facts = case["answer"]["facts"]
    for topic, answer in facts.items():
        messages += [{"role": "assistant", "content": TOPICS[topic][1]}, {"role": "user", "content": answer}]
    if recheck:
        messages += [{"role": "assistant", "content": RECHECK}, {"role": "user", "content": scripted_answer(RECHECK, facts)}]
    messages.append({"role": "assistant", "content": f"Advice: {case['answer']['advice']}"})
    return {"messages": messages}


def build(out_dir: Path) -> dict[str, int]:
    """Generate every file into `out_dir`; return the row count of each."""
    rng = random.Random(SEED)
    cases = make_cases(rng, N_TRAIN + N_VAL)
    rng.shuffle(cases)
    splits = {"train": cases[:N_TRAIN], "val": cases[N_TRAIN:],
              "heldout": make_cases(rng, N_HELDOUT, {_key(c) for c in cases})}  # after: the others are unchanged
    rows: dict[str, list[dict]] = {}
    for split, items in splits.items():
        rows[split] = [{"task_id": f"ask-{split}-{i:03d}", **case} for i, case in enumerate(items)]
    # its own generator: the cases above stay byte for byte what they were before demonstrations re-checked
    rechecked = set(random.Random(SEED).sample(range(N_TRAIN), round(RECHECK_SHARE * N_TRAIN)))
    rows["sft"] = [demonstration(case, i in rechecked) for i, case in enumerate(splits["train"])]
    return write_jsonl_files(out_dir, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the files into (default: this folder)")
    args = parser.parse_args(argv)
    counts = build(args.out)
    print(" ".join(f"{name}={n}" for name, n in counts.items()))


if __name__ == "__main__":
    main()
