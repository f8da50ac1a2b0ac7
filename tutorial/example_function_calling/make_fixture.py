"""Write `xlam_fixture.json`: function-calling rows in the exact shape of xlam-function-calling-60k.

Each row is `{"id", "query", "tools", "answers"}` with `tools` and `answers` as JSON strings, xLAM's
parameter style (`{"type": "float", "description": ..., "default": ...}`, "str, optional"). The rows are
generated from the templates below with a fixed seed, so running the script again rewrites the same
file byte for byte. Every row lists its target tool(s) among 1-3 distractor tools, and about one row in
five needs two calls (xLAM's parallel calls). Nothing here comes from BFCL: BFCL is only evaluated on.

    python make_fixture.py [--out xlam_fixture.json] [--rows 240] [--seed 13] [--heldout-dir DIR]

It also writes `heldout.json`, `heldout2.json` and `heldout3.json`: 128 more rows each from the same seeded
stream, drawn after the fixture's (whose bytes do not change) and asking no query asked before them, for
`benchmarks/rl_gain.py --task function_calling` (heldout.json by default; another with `--heldout FILE`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from collections.abc import Iterator
from pathlib import Path

CITIES = ["Paris", "Tokyo", "Lima", "Oslo", "Nairobi", "Toronto", "Madrid", "Seoul", "Cairo", "Denver", "Hanoi",
          "Dublin", "Austin", "Prague", "Perth", "Quito"]
CURRENCIES = ["USD", "EUR", "JPY", "GBP", "CAD", "CHF", "INR", "BRL"]
WORDS = ["python tutorials", "electric cars", "banana bread", "jazz history", "solar panels", "chess openings",
         "marathon training", "ancient Rome", "sourdough", "deep sea fish"]
NAMES = ["Alice", "Bob", "Carla", "Deepak", "Elena", "Farid", "Grace", "Hiro"]
LANGS = ["French", "Spanish", "German", "Japanese", "Italian"]
PHRASES = ["good morning", "thank you very much", "where is the station", "see you tomorrow"]

P = lambda t, d, **kw: {"type": t, "description": d, **kw}  # noqa: E731  an xLAM parameter
# name -> (description, parameters, [(query template, argument builder)])
TOOLS = {
    "get_weather": ("Get the current weather for a city.",
                    {"city": P("str", "The city name."), "unit": P("str, optional", "celsius or fahrenheit.", default="celsius")},
                    [("What's the weather like in {city}?", lambda r, v: {"city": v["city"]}),
                     ("Tell me the temperature in {city} in fahrenheit.", lambda r, v: {"city": v["city"], "unit": "fahrenheit"})]),
    "convert_currency": ("Convert an amount of money from one currency to another.",
                         {"amount": P("float", "Amount to convert."), "from_currency": P("str", "ISO code to convert from."),
                          "to_currency": P("str", "ISO code to convert to.")},
                         [("Convert {amount} {cur1} to {cur2}.", lambda r, v: {"amount": v["amount"], "from_currency": v["cur1"], "to_currency": v["cur2"]}),
                          ("How much is {amount} {cur1} in {cur2}?", lambda r, v: {"amount": v["amount"], "from_currency": v["cur1"], "to_currency": v["cur2"]})]),
    "calculate_triangle_area": ("Calculate the area of a triangle from its base and height.",
                                {"base": P("int", "Base length."), "height": P("int", "Height.")},
                                [("Find the area of a triangle with base {a} and height {b}.", lambda r, v: {"base": v["a"], "height": v["b"]})]),
    "calculate_circle_area": ("Calculate the area of a circle.",
                              {"radius": P("float", "Radius of the circle.")},
                              [("What is the area of a circle with radius {x}?", lambda r, v: {"radius": v["x"]})]),
    "is_prime": ("Check whether an integer is a prime number.", {"number": P("int", "The number to check.")},
                 [("Is {n} a prime number?", lambda r, v: {"number": v["n"]}), ("Check if {n} is prime.", lambda r, v: {"number": v["n"]})]),
    "factorial": ("Compute the factorial of a non-negative integer.", {"n": P("int", "The integer.")},
                  [("Compute the factorial of {small}.", lambda r, v: {"n": v["small"]}), ("What is {small} factorial?", lambda r, v: {"n": v["small"]})]),
    "search_web": ("Search the web and return the top results.",
                   {"query": P("str", "Search terms."), "num_results": P("int, optional", "How many results.", default=5)},
                   [("Search the web for {word}.", lambda r, v: {"query": v["word"]}),
                    ("Find {k} web results about {word}.", lambda r, v: {"query": v["word"], "num_results": v["k"]})]),
    "send_email": ("Send an email.", {"to": P("str", "Recipient name or address."), "subject": P("str", "Subject line."),
                                      "body": P("str, optional", "Message text.", default="")},
                   [("Send an email to {name} with the subject '{word}'.", lambda r, v: {"to": v["name"], "subject": v["word"]})]),
    "translate_text": ("Translate text into another language.",
                       {"text": P("str", "Text to translate."), "target_language": P("str", "Language to translate into.")},
                       [("Translate '{phrase}' into {lang}.", lambda r, v: {"text": v["phrase"], "target_language": v["lang"]}),
                        ("How do you say '{phrase}' in {lang}?", lambda r, v: {"text": v["phrase"], "target_language": v["lang"]})]),
    "get_stock_price": ("Get the latest stock price of a ticker symbol.", {"symbol": P("str", "Ticker symbol, e.g. AAPL.")},
                        [("What is the stock price of {ticker}?", lambda r, v: {"symbol": v["ticker"]})]),
    "calculate_bmi": ("Calculate body mass index.", {"weight_kg": P("float", "Weight in kilograms."), "height_m": P("float", "Height in meters.")},
                      [("Calculate the BMI for someone weighing {kg} kg and {m} m tall.", lambda r, v: {"weight_kg": v["kg"], "height_m": v["m"]})]),
    "set_timer": ("Set a timer.", {"minutes": P("int", "Duration in minutes."), "label": P("str, optional", "A label.", default="")},
                  [("Set a timer for {k} minutes.", lambda r, v: {"minutes": v["k"]}),
                   ("Start a {k} minute timer called {word}.", lambda r, v: {"minutes": v["k"], "label": v["word"]})]),
    "get_distance": ("Distance between two cities in kilometers.", {"origin": P("str", "Start city."), "destination": P("str", "End city.")},
                     [("How far is {city} from {city2}?", lambda r, v: {"origin": v["city"], "destination": v["city2"]})]),
    "compound_interest": ("Compute compound interest.",
                          {"principal": P("float", "Initial amount."), "rate": P("float", "Annual rate as a decimal."), "years": P("int", "Number of years.")},
                          [("What does {amount} grow to at a rate of {rate} over {small} years with compound interest?",
                            lambda r, v: {"principal": v["amount"], "rate": v["rate"], "years": v["small"]})]),
    "book_flight": ("Book a flight.", {"origin": P("str", "Departure city."), "destination": P("str", "Arrival city."),
                                       "date": P("str", "Date, YYYY-MM-DD.")},
                    [("Book a flight from {city} to {city2} on {date}.", lambda r, v: {"origin": v["city"], "destination": v["city2"], "date": v["date"]})]),
    "sort_numbers": ("Sort a list of numbers.", {"numbers": P("List[int]", "The numbers."), "descending": P("bool, optional", "Sort from largest.", default=False)},
                     [("Sort these numbers: {nums}.", lambda r, v: {"numbers": v["numlist"]}),
                      ("Sort {nums} in descending order.", lambda r, v: {"numbers": v["numlist"], "descending": True})]),
}
TICKERS = ["AAPL", "MSFT", "TSLA", "NVDA", "AMZN", "GOOG"]


def _values(rng: random.Random) -> dict:
    city, city2 = rng.sample(CITIES, 2)
    cur1, cur2 = rng.sample(CURRENCIES, 2)
    nums = rng.sample(range(1, 99), rng.randint(3, 5))
    return {"city": city, "city2": city2, "cur1": cur1, "cur2": cur2, "amount": rng.choice([50, 120, 250, 1000, 75.5]),
            "a": rng.randint(2, 30), "b": rng.randint(2, 30), "x": rng.choice([1.5, 2.0, 3.0, 4.5, 7.0, 10.0]),
            "n": rng.choice([7, 12, 17, 21, 29, 97, 100]), "small": rng.randint(3, 10), "word": rng.choice(WORDS),
            "k": rng.choice([3, 5, 10, 15, 20]), "name": rng.choice(NAMES), "lang": rng.choice(LANGS),
            "phrase": rng.choice(PHRASES), "ticker": rng.choice(TICKERS), "kg": rng.choice([55, 62.5, 70, 81, 95]),
            "m": rng.choice([1.6, 1.7, 1.75, 1.82, 1.9]), "rate": rng.choice([0.03, 0.05, 0.07]),
            "date": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", "numlist": nums,
            "nums": ", ".join(map(str, nums))}


def _tool_spec(name: str) -> dict:
    description, parameters, _ = TOOLS[name]
    return {"name": name, "description": description, "parameters": parameters}


HELDOUT_ROWS = 128
# heldout2.json: drawn after heldout.json (2026-12-07), once GRPO at the YAML's 6 steps had been scored on it
# and before a 12-step arm was: a fresh set to confirm an arm chosen after that first score.
# heldout3.json: drawn after both had scored GRPO arms, before the judge.reward=success arm ran (README)
HELDOUT_FILES = ("heldout.json", "heldout2.json", "heldout3.json")


def draw(count: int, seed: int, n: int = HELDOUT_ROWS,
         sets: int = len(HELDOUT_FILES)) -> tuple[list[dict], list[list[dict]]]:
    """The fixture (the first `count` rows of the seeded stream) and `sets` held-out lists of `n` rows drawn after
    it, in order, each row asking a query no row before it asked (ids numbered on from the fixture's)."""
    stream = _stream(seed)
    fixture = [next(stream) for _ in range(count)]
    asked = {row["query"] for row in fixture}

    def fresh() -> Iterator[dict]:
        for row in stream:
            if row["query"] not in asked:
                asked.add(row["query"])
                yield row

    rows = fresh()
    return fixture, [[next(rows) for _ in range(n)] for _ in range(sets)]


def _stream(seed: int) -> Iterator[dict]:
    """Endless rows from `seed`: the same seed gives the same rows in the same order."""
    rng = random.Random(seed)
    names = sorted(TOOLS)
    for index in itertools.count():
        picked = rng.sample(names, 2 if rng.random() < 0.2 else 1)
        queries, calls = [], []
        for name in picked:
            template, build = rng.choice(TOOLS[name][2])
            values = _values(rng)
            queries.append(template.format(**values))
            calls.append({"name": name, "arguments": build(rng, values)})
        query = queries[0] if len(queries) == 1 else f"{queries[0]} Also, {queries[1][0].lower()}{queries[1][1:]}"
        distractors = rng.sample([n for n in names if n not in picked], rng.randint(1, 3))
        tools = [_tool_spec(n) for n in picked + distractors]
        rng.shuffle(tools)
        yield {"id": index, "query": query, "tools": json.dumps(tools), "answers": json.dumps(calls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).with_name("xlam_fixture.json")))
    parser.add_argument("--rows", type=int, default=240)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--heldout-dir", default=str(Path(__file__).parent),
                        help=f"folder for {', '.join(HELDOUT_FILES)} (default: this folder)")
    args = parser.parse_args()
    fixture, heldout = draw(args.rows, args.seed)
    outputs = {args.out: fixture}
    outputs.update({str(Path(args.heldout_dir) / name): rows for name, rows in zip(HELDOUT_FILES, heldout)})
    for out, rows in outputs.items():
        Path(out).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {len(rows)} rows to {out}")


if __name__ == "__main__":
    main()
