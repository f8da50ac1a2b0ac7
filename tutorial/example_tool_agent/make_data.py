"""Write the tool agent's tasks and SFT demonstrations (seeded: the files are reproduced byte for byte).

    python make_data.py [--out DIR]

Writes four files (default: this folder):

- `train.jsonl`, `val.jsonl`: tasks `{"task_id", "query", "answer": {"calls": [...], "final": number},
  "metadata": {"category", "result_key", "num_calls"}}`. Val uses other arguments than train in
  every category, so it measures generalisation, not recall.
- `heldout.jsonl`: 128 more tasks with arguments in neither train nor val, in the categories' train +
  val proportions where they have that many left (for benchmarks/rl_gain.py). Made after the
  others from a generator of its own, so train, val and the demonstrations are what they were.
- `sft.jsonl`: one demonstration per train task in OpenAI format (`tools` + `messages` with
  `tool_calls` and `tool` results), made by running the task's expected calls against the real
  MCP server in memory, through the same MCP helpers the built-in `mcp_agent` workflow uses. The final answer sentence states exactly one number: `final`.
- `sft_sharegpt.jsonl`: the same demonstrations as `conversations` (human / function_call /
  observation / gpt) with `system` and `tools`, the format of MCPTrainAgent and LLaMA-Factory.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from energy_server import (
    GAS_PRICES, PIPELINES, PRODUCTION_BCF, PRODUCTION_YEARS, STORAGE, TEMPERATURES_F, UNIT_JOULES,
)

from ajet.jsonl import write_jsonl_files
from ajet.mcp_client import ToolOutcome, call_tool, list_openai_tools, open_client

SEED = 20240115
N_HELDOUT = 128
HERE = Path(__file__).resolve().parent
# The demonstrations show the model the very system prompt the workflow sends (one source: the YAML).
SYSTEM_PROMPT = yaml.safe_load((HERE / "tool_agent.yaml").read_text())["ajet"]["workflow_args"]["system_prompt"]

# category -> (train count, val count)
COUNTS: dict[str, tuple[int, int]] = {
    "price": (6, 3),
    "compare": (8, 4),
    "storage_bcf": (3, 2),
    "storage_percent": (3, 2),
    "pipeline_flow": (4, 2),
    "pipeline_utilization": (4, 2),
    "weather": (6, 3),
    "production": (8, 4),
    "convert": (10, 5),
    "price_convert": (14, 7),
    "compare_convert": (8, 4),
}

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Category:
    """How to phrase, call and answer one kind of task.

    `queries` and `answer` are format strings: queries take the task's slots (the first call's
    arguments, plus `unit` for two-call tasks); the answer takes the fields of the call results and
    `value`, the final number. With `then` set, a second call converts that field of the first
    result with `convert_price` from MMBtu to the slot `unit`.
    """

    tool: str
    result_key: str
    queries: tuple[str, ...]
    answer: str
    slots: Callable[[random.Random], list[dict[str, Any]]]
    then: str | None = None


def fmt(value: Any) -> str:
    """A number as the answer sentence writes it: no trailing '.0', no exponent, no separators."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _price_pairs(rng: random.Random) -> list[dict[str, str]]:
    """(pricier, cheaper) city pairs, so 'how much more' has a positive answer."""
    pairs = []
    for a, b in itertools.combinations(GAS_PRICES, 2):
        if GAS_PRICES[a][1] != GAS_PRICES[b][1]:
            a, b = (a, b) if GAS_PRICES[a][1] > GAS_PRICES[b][1] else (b, a)
            pairs.append({"city_a": a, "city_b": b})
    return pairs


def _mixed_pairs(rng: random.Random) -> list[dict[str, str]]:
    """Price pairs × unit, the cheaper city placed first or second at random."""
    out = []
    for pair, unit in itertools.product(_price_pairs(rng), ("therm", "GJ")):
        a, b = pair["city_a"], pair["city_b"]
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
        out.append({"city_a": a, "city_b": b, "unit": unit})
    return out


def _conversions(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    amounts = (1, 2.5, 10, 40, 100, 250, 500, 1200)
    for value, (f, t) in itertools.product(amounts, itertools.permutations(UNIT_JOULES, 2)):
        if 0.01 <= value * UNIT_JOULES[f] / UNIT_JOULES[t] < 1e6:  # answers a small model can copy
            out.append({"value": value, "from_unit": f, "to_unit": t})
    return out


def _each(key: str, names: Any) -> Callable[[random.Random], list[dict[str, Any]]]:
    return lambda rng: [{key: name} for name in names]


CATEGORIES: dict[str, Category] = {
    "price": Category("get_gas_price", "price_usd_per_mmbtu", (
        "What is the natural gas price in {city}?", "How much does natural gas cost in {city} per MMBtu?",
        "Give me today's spot gas price for {city}.", "What's the current gas price at the hub serving {city}?"),
        "Natural gas in {city} costs {value} USD per MMBtu.", _each("city", GAS_PRICES)),
    "compare": Category("compare_prices", "difference", (
        "How much more expensive is natural gas in {city_a} than in {city_b}?",
        "Compare gas prices in {city_a} and {city_b}: how much higher is {city_a}, per MMBtu?",
        "By how many dollars per MMBtu does the gas price in {city_a} exceed the one in {city_b}?"),
        "Gas in {city_a} costs {value} USD per MMBtu more than in {city_b}.", _price_pairs),
    "storage_bcf": Category("get_storage_level", "storage_bcf", (
        "How much working gas is in storage in the {region} region?",
        "How many Bcf of gas are stored in the {region} region?"),
        "The {region} region has {value} Bcf of working gas in storage.", _each("region", STORAGE)),
    "storage_percent": Category("get_storage_level", "percent_full", (
        "How full is gas storage in the {region} region, in percent?",
        "What percentage of storage capacity is used in the {region} region?"),
        "Storage in the {region} region is {value}% full.", _each("region", STORAGE)),
    "pipeline_flow": Category("get_pipeline_flow", "flow_mmcf_per_day", (
        "How much gas is flowing on the {pipeline} pipeline today?",
        "What is the scheduled flow of the {pipeline} pipeline in MMcf per day?"),
        "{pipeline} is flowing {value} MMcf per day.", _each("pipeline", PIPELINES)),
    "pipeline_utilization": Category("get_pipeline_flow", "utilization_percent", (
        "How close to capacity is the {pipeline} pipeline running, in percent?",
        "What is the utilization of the {pipeline} pipeline?"),
        "{pipeline} is running at {value}% of its capacity.", _each("pipeline", PIPELINES)),
    "weather": Category("get_weather_demand", "heating_degree_days", (
        "How many heating degree days does {city} have today?",
        "How cold is it in {city}? Give the heating degree days.",
        "What is today's heating demand in {city}, in heating degree days?"),
        "{city} has {value} heating degree days today, so heating demand is {demand_level}.",
        _each("city", TEMPERATURES_F)),
    "production": Category("get_production", "production_bcf", (
        "How much natural gas did {state} produce in {year}?",
        "What was the marketed gas production of {state} in {year}, in Bcf?",
        "Tell me {state}'s natural gas output for {year}."),
        "{state} produced {value} Bcf of natural gas that year.",
        lambda rng: [{"state": s, "year": y} for s in PRODUCTION_BCF for y in PRODUCTION_YEARS]),
    "convert": Category("convert_units", "result", (
        "Convert {value} {from_unit} to {to_unit}.", "How many {to_unit} is {value} {from_unit}?",
        "I have {value} {from_unit} of gas energy. What is that in {to_unit}?"),
        "That is {value} {to_unit}.", _conversions),
    "price_convert": Category("get_gas_price", "converted_price", (
        "What does natural gas cost in {city} in USD per {unit}?",
        "Give me the gas price in {city}, expressed per {unit}.",
        "How much is gas in {city} per {unit}?"),
        "In {city}, natural gas costs {value} USD per {to_unit}.",
        lambda rng: [{"city": c, "unit": u} for c in GAS_PRICES for u in ("therm", "GJ", "MWh", "Mcf")],
        then="price_usd_per_mmbtu"),
    "compare_convert": Category("compare_prices", "converted_price", (
        "Which city has cheaper natural gas, {city_a} or {city_b}? Give that price in USD per {unit}.",
        "Between {city_a} and {city_b}, take the cheaper gas price and convert it to USD per {unit}."),
        "{cheaper} is cheaper: its gas costs {value} USD per {to_unit}.", _mixed_pairs, then="cheaper_price"),
}


@dataclass
class Draft:
    """One task before its calls are run."""

    category: str
    query: str
    slots: dict[str, Any]


def _drafts(name: str, rng: random.Random) -> list[Draft]:
    """Every candidate task of a category, one per distinct argument set, in a fixed order."""
    category = CATEGORIES[name]
    return [Draft(name, rng.choice(category.queries).format(**slots), slots) for slots in category.slots(rng)]


async def _run(client: Any, draft: Draft) -> tuple[list[Call], list[ToolOutcome], Any, str]:
    """Run the draft's calls on the server: (calls, outcomes, final value, final sentence)."""
    category = CATEGORIES[draft.category]
    calls: list[Call] = [(category.tool, {k: v for k, v in draft.slots.items() if k != "unit"})]
    outcomes = []
    for i in range(2 if category.then else 1):
        if i == 1:
            price = outcomes[0].result[category.then]
            calls.append(("convert_price", {"price": price, "from_unit": "MMBtu", "to_unit": draft.slots["unit"]}))
        outcome = await call_tool(client, *calls[i])
        if outcome.error is not None:
            raise RuntimeError(f"expected call {calls[i]} failed on the server: {outcome.error}")
        outcomes.append(outcome)
    final = outcomes[-1].result[category.result_key]
    fields = {k: v for o in outcomes for k, v in o.result.items()}
    fields["value"] = fmt(final)
    return calls, outcomes, final, category.answer.format(**fields)


def _demo(query: str, outcomes: list[ToolOutcome], sentence: str, tools: list[dict]) -> tuple[dict, dict]:
    """One demonstration in OpenAI format and in ShareGPT (seed 000) format."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": query}]
    conversations = [{"from": "human", "value": query}]
    for i, o in enumerate(outcomes):
        arguments = json.dumps(o.arguments, ensure_ascii=False)
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": o.name, "arguments": arguments}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": o.content})
        call = json.dumps({"name": o.name, "arguments": o.arguments}, ensure_ascii=False)
        conversations += [{"from": "function_call", "value": call}, {"from": "observation", "value": o.content}]
    messages.append({"role": "assistant", "content": sentence})
    conversations.append({"from": "gpt", "value": sentence})
    sharegpt = {"conversations": conversations, "system": SYSTEM_PROMPT, "tools": [t["function"] for t in tools]}
    return {"tools": tools, "messages": messages}, sharegpt


def _heldout(left: dict[str, list[Draft]]) -> list[Draft]:
    """N_HELDOUT drafts from what train and val left: each category's share of train + val where it has that
    many left, the rest from the categories with drafts to spare, in COUNTS order."""
    total = sum(a + b for a, b in COUNTS.values())
    take = {c: min(len(left[c]), round(N_HELDOUT * sum(COUNTS[c]) / total)) for c in COUNTS}
    while sum(take.values()) < N_HELDOUT:
        spare = [c for c in COUNTS if take[c] < len(left[c])]
        if not spare:
            raise ValueError(f"only {sum(take.values())} distinct tasks are left for the held-out split")
        for c in spare[: N_HELDOUT - sum(take.values())]:
            take[c] += 1
    return [d for c in COUNTS for d in left[c][: take[c]]]


async def build(out_dir: Path) -> dict[str, int]:
    """Generate every file into `out_dir`; return the row count of each."""
    rng = random.Random(SEED)
    splits: dict[str, list[Draft]] = {"train": [], "val": []}
    left: dict[str, list[Draft]] = {}
    for category, (n_train, n_val) in COUNTS.items():
        pool = _drafts(category, rng)
        rng.shuffle(pool)
        if len(pool) < n_train + n_val:
            raise ValueError(f"category {category!r} has {len(pool)} distinct tasks, fewer than {n_train + n_val}")
        splits["val"] += pool[:n_val]  # val takes other arguments than train
        splits["train"] += pool[n_val:n_val + n_train]
        left[category] = pool[n_val + n_train:]
    splits["heldout"] = _heldout(left)
    rows: dict[str, list[dict]] = {"train": [], "val": [], "heldout": [], "sft": [], "sft_sharegpt": []}
    async with open_client("energy_server.py", HERE) as client:
        tools = await list_openai_tools(client)
        for split, drafts in splits.items():
            # held out: a generator of its own, so adding the split left the others as they were
            (random.Random(SEED + 1) if split == "heldout" else rng).shuffle(drafts)
            for i, draft in enumerate(drafts):
                calls, outcomes, final, sentence = await _run(client, draft)
                rows[split].append({
                    "task_id": f"energy-{split}-{i:03d}", "query": draft.query,
                    "answer": {"calls": [{"name": name, "arguments": args} for name, args in calls], "final": final},
                    "metadata": {"category": draft.category, "result_key": CATEGORIES[draft.category].result_key,
                                 "num_calls": len(calls)},
                })
                if split == "train":
                    openai_demo, sharegpt_demo = _demo(draft.query, outcomes, sentence, tools)
                    rows["sft"].append(openai_demo)
                    rows["sft_sharegpt"].append(sharegpt_demo)
    return write_jsonl_files(out_dir, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the files into (default: this folder)")
    args = parser.parse_args(argv)
    counts = asyncio.run(build(args.out))
    print(" ".join(f"{name}={n}" for name, n in counts.items()))


if __name__ == "__main__":
    main()
