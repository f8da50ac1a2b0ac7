"""A deterministic tool set of up to 1,000 near-duplicate tools, with train and held-out queries.

Names are `get_{commodity}_{measure}_{scope}` (get_gas_price_city, get_gas_price_state,
get_electricity_price_city, ...): every tool shares two of its three name words with dozens of others,
and the descriptions come from one template. Queries name the commodity and measure by a synonym
("power", "cost") and the scope only through a place ("in Denver" -> city, "in Ohio" -> state), so a
retriever must learn the vocabulary rather than match words. Held-out queries use other sentence
frames and other places than the training ones.

    python -m ajet.retrieval.synthetic OUT_DIR [--commodities 10 --measures 10 --scopes 10]
    # writes tools.json, train.jsonl and heldout.jsonl (tasks: query + answer.calls[0]: name, arguments)
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

# key -> (description phrase, query synonyms)
COMMODITIES: dict[str, tuple[str, list[str]]] = {
    "gas": ("natural gas", ["natural gas", "gas", "methane gas"]),
    "electricity": ("electricity", ["electricity", "power", "electric power"]),
    "water": ("municipal water", ["water", "tap water", "drinking water"]),
    "diesel": ("diesel fuel", ["diesel", "diesel fuel", "truck fuel"]),
    "gasoline": ("gasoline", ["gasoline", "petrol", "unleaded fuel"]),
    "propane": ("propane", ["propane", "LPG", "bottled gas"]),
    "coal": ("thermal coal", ["coal", "thermal coal", "steam coal"]),
    "heating_oil": ("heating oil", ["heating oil", "fuel oil", "home heating fuel"]),
    "hydrogen": ("hydrogen", ["hydrogen", "H2", "hydrogen fuel"]),
    "ethanol": ("fuel ethanol", ["ethanol", "bioethanol", "corn ethanol"]),
}
MEASURES: dict[str, tuple[str, list[str]]] = {
    "price": ("current price", ["price", "cost", "rate"]),
    "consumption": ("total consumption", ["consumption", "usage", "how much is used"]),
    "production": ("production volume", ["production", "output", "how much is produced"]),
    "demand": ("demand forecast", ["demand forecast", "expected demand", "projected demand"]),
    "supply": ("available supply", ["supply", "availability", "supply on hand"]),
    "tax": ("tax rate", ["tax", "levy", "tax rate"]),
    "emissions": ("CO2 emissions", ["emissions", "carbon footprint", "CO2 output"]),
    "storage": ("storage level", ["storage level", "inventory", "stockpile"]),
    "imports": ("import volume", ["imports", "import volume", "amount imported"]),
    "outages": ("reported outages", ["outages", "supply disruptions", "service interruptions"]),
}
# key -> (parameter, description phrase, training places, held-out places)
SCOPES: dict[str, tuple[str, str, list[str], list[str]]] = {
    "city": ("city", "city", ["Denver", "Boston", "Seattle", "Chicago", "Houston", "Atlanta"],
             ["Phoenix", "Portland", "Miami", "Dallas"]),
    "state": ("state", "US state", ["Texas", "Ohio", "Oregon", "Florida", "Nevada", "Utah"],
              ["Georgia", "Montana", "Kansas", "Vermont"]),
    "country": ("country", "country", ["Canada", "Germany", "Japan", "Brazil", "India", "France"],
                ["Mexico", "Italy", "Kenya", "Norway"]),
    "county": ("county", "county", ["Cook County", "Harris County", "Orange County", "King County"],
               ["Dade County", "Wayne County", "Travis County"]),
    "zip": ("zip_code", "US zip code", ["80202", "02108", "98101", "60601", "77002"], ["30303", "85004", "97201"]),
    "region": ("region", "multi-state region", ["New England", "the Midwest", "the Gulf Coast", "the Southwest"],
               ["the Pacific Northwest", "the Great Plains", "the Mid-Atlantic"]),
    "port": ("port", "shipping port", ["the Port of Houston", "the Port of Rotterdam", "the Port of Singapore"],
             ["the Port of Antwerp", "the Port of Long Beach"]),
    "utility": ("utility", "utility company", ["PG&E", "Con Edison", "Duke Energy", "Xcel Energy"],
                ["Dominion Energy", "Southern Company"]),
    "hub": ("hub", "trading hub", ["Henry Hub", "the Waha hub", "the Chicago Citygate hub"],
            ["the Algonquin hub", "the Dawn hub"]),
    "continent": ("continent", "continent", ["Europe", "Asia", "Africa"], ["South America", "Oceania"]),
}
TRAIN_FRAMES = [
    "What is the {m} of {c} in {p}?",
    "Tell me the {c} {m} for {p}.",
    "I need the {m} for {c} at {p}.",
    "Look up {c} {m} in {p}, please.",
]
HELDOUT_FRAMES = [
    "Could you find out {p}'s {c} {m} today?",
    "For {p}, how does the {c} {m} look right now?",
    "Give me the latest numbers on {m} of {c} around {p}.",
]


def tool_key(commodity: str, measure: str, scope: str) -> str:
    return f"get_{commodity}_{measure}_{scope}"


def build_tools(commodities: int = 10, measures: int = 10, scopes: int = 10) -> list[dict[str, Any]]:
    """commodities x measures x scopes OpenAI function specs (10 x 10 x 10 = 1,000)."""
    tools = []
    for c in list(COMMODITIES)[:commodities]:
        for m in list(MEASURES)[:measures]:
            for s in list(SCOPES)[:scopes]:
                param, scope_phrase = SCOPES[s][0], SCOPES[s][1]
                tools.append({"type": "function", "function": {
                    "name": tool_key(c, m, s),
                    "description": f"Get the {MEASURES[m][0]} of {COMMODITIES[c][0]} for one {scope_phrase}.",
                    "parameters": {"type": "object", "required": [param], "properties": {
                        param: {"type": "string", "description": f"Name of the {scope_phrase}"},
                        "date": {"type": "string", "description": "Day as YYYY-MM-DD; default today"}}},
                }})
    return tools


def _queries(tool: str, frames: list[str], places_at: int, n: int, rng: random.Random) -> list[tuple[str, str]]:
    """Up to n distinct (query, place) pairs for `tool`."""
    _, c, m, s = _parts(tool)
    out: dict[str, str] = {}
    for _ in range(n * 4):  # a few draws per wanted query: repeats are dropped
        # drawn in this order (frame, commodity, measure, place) since the first version: same seed, same rows
        frame, commodity, measure = rng.choice(frames), rng.choice(COMMODITIES[c][1]), rng.choice(MEASURES[m][1])
        place = rng.choice(SCOPES[s][places_at])
        text = frame.format(c=commodity, m=measure, p=place)
        out.setdefault(text[0].upper() + text[1:], place)
        if len(out) == n:
            break
    return list(out.items())


def _parts(tool: str) -> tuple[str, str, str, str]:
    body = tool[len("get_"):]
    c = next(k for k in sorted(COMMODITIES, key=len, reverse=True) if body.startswith(k + "_"))
    rest = body[len(c) + 1:]
    m = next(k for k in MEASURES if rest.startswith(k + "_"))
    return "get", c, m, rest[len(m) + 1:]


def build_queries(tools: list[dict[str, Any]], train_per_tool: int = 3, heldout_per_tool: int = 1,
                  seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train tasks, held-out tasks), each {task_id, query, answer: {calls: [{name, arguments}]}}, the
    argument being the place the query names; same seed, same rows."""
    rng = random.Random(seed)
    train, heldout = [], []
    for tool in tools:
        name, param = tool["function"]["name"], tool["function"]["parameters"]["required"][0]
        for split, frames, at, n in ((train, TRAIN_FRAMES, 2, train_per_tool), (heldout, HELDOUT_FRAMES, 3, heldout_per_tool)):
            for q, place in _queries(name, frames, at, n, rng):
                split.append({"task_id": f"{name}-{len(split)}", "query": q,
                              "answer": {"calls": [{"name": name, "arguments": {param: place}}]}})
    return train, heldout


def recall(retriever: Any, tasks: list[dict[str, Any]], k: int) -> float:
    """The share of `tasks` (as build_queries makes them) whose tool `retriever` ranks in its top k."""
    ranked = retriever.top_k_many([t["query"] for t in tasks], k)
    return sum(t["answer"]["calls"][0]["name"] in top for t, top in zip(tasks, ranked)) / len(tasks)


def write_benchmark(out: Path, commodities: int = 10, measures: int = 10, scopes: int = 10,
                    train_per_tool: int = 3, heldout_per_tool: int = 1, seed: int = 0) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    tools = build_tools(commodities, measures, scopes)
    train, heldout = build_queries(tools, train_per_tool, heldout_per_tool, seed)
    (out / "tools.json").write_text(json.dumps(tools, indent=1))
    for name, rows in (("train", train), ("heldout", heldout)):
        (out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"tools": len(tools), "train": len(train), "heldout": len(heldout)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    for key in ("commodities", "measures", "scopes"):
        parser.add_argument(f"--{key}", type=int, default=10)
    parser.add_argument("--train-per-tool", type=int, default=3)
    parser.add_argument("--heldout-per-tool", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    print(write_benchmark(a.out, a.commodities, a.measures, a.scopes, a.train_per_tool, a.heldout_per_tool, a.seed))
