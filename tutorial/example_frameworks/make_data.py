"""Write the shop tasks and, for each framework, its SFT demonstrations (seeded: byte for byte again).

    python make_data.py [--out DIR] [--frameworks openai_agents,langgraph,...]

- `train.jsonl`, `val.jsonl`: tasks `{"task_id", "query", "answer": {"calls": [...], "numbers": [...]},
  "metadata": {"category"}}`. Every (category, item, currency) lies in one split only: val asks about
  combinations training never showed.
- `sft_<framework>.jsonl`: one demonstration per train task and trained sample, in OpenAI format
  (`tools` + `messages`). Each framework writes its own system prompt, tool specs, history and tool
  results, so a demonstration must be what THAT framework sends: it is recorded by running the real
  framework agent (`<framework>_agent.py`, through adapters.py's `FrameworkWorkflow` as training runs
  it) through ajet's gateway on a replay engine that plays the task's gold turns (`<tool_call>`
  blocks, then the answer), and taking each merged sample's last request plus the gold reply. Call
  ids are renumbered (`call_0`, ...) so the files are reproducible.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from ajet import Task, Tuner

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from adapters import FRAMEWORKS, FrameworkWorkflow  # noqa: E402
from shop_tools import ITEMS, RATES, convert_currency, get_price, get_stock  # noqa: E402

SEED = 20261128
CALL_ID = re.compile(r"call_[0-9a-f]{12}")  # the gateway's tool-call ids (ajet.gateway.tool_parser)
QUESTIONS = {
    "price": ["How much does a {item} cost?", "What is the price of a {item}?", "Price of one {item}, please."],
    "stock": ["How many units of {item} are in stock?", "How many {item} units does the shop have?"],
    "price_in": ["What does a {item} cost in {currency}?", "Give me the price of a {item} in {currency}."],
    "price_and_stock": ["What does a {item} cost, and how many are in stock?",
                        "Price and stock of the {item}?"],
}


def _task(category: str, item: str, currency: str | None, rng: random.Random) -> dict[str, Any]:
    price, stock = get_price(item)["price_usd"], get_stock(item)["in_stock"]
    if category == "price":
        turns, numbers, final = [[("get_price", {"item": item})]], [price], f"A {item} costs {price} USD."
    elif category == "stock":
        turns, numbers, final = [[("get_stock", {"item": item})]], [stock], f"The shop has {stock} of the {item} in stock."
    elif category == "price_in":
        amount = convert_currency(price, currency)["amount"]
        turns = [[("get_price", {"item": item})], [("convert_currency", {"amount_usd": price, "currency": currency})]]
        numbers, final = [amount], f"A {item} costs {amount} {currency}."
    else:  # two calls in one turn: the framework runs them in parallel
        turns = [[("get_price", {"item": item}), ("get_stock", {"item": item})]]
        numbers, final = [price, stock], f"A {item} costs {price} USD, and {stock} are in stock."
    query = rng.choice(QUESTIONS[category]).format(item=item, currency=currency)
    calls = [{"name": n, "arguments": a} for turn in turns for n, a in turn]
    return {"query": query, "answer": {"calls": calls, "numbers": numbers},
            "metadata": {"category": category, "turns": [[list(c) for c in t] for t in turns], "final": final}}


def tasks() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, val): every combination once, shuffled, a quarter of each category held out for val."""
    rng = random.Random(SEED)
    train, val = [], []
    for category in QUESTIONS:
        combos = [(item, c) for item in ITEMS for c in (RATES if category == "price_in" else [None])]
        rng.shuffle(combos)
        if category == "price_in":
            combos = combos[:40]  # of 80 combinations, as many as two categories' tasks
        cut = len(combos) // 4
        val += [_task(category, item, c, rng) for item, c in combos[:cut]]
        train += [_task(category, item, c, rng) for item, c in combos[cut:]]
    rng.shuffle(train)
    rng.shuffle(val)
    for split, rows in (("train", train), ("val", val)):
        for i, row in enumerate(rows):
            row["task_id"] = f"shop-{split}-{i:03d}"
    return [_ordered(r) for r in train], [_ordered(r) for r in val]


def _ordered(row: dict[str, Any]) -> dict[str, Any]:
    return {"task_id": row["task_id"], **{k: row[k] for k in ("query", "answer", "metadata")}}


def gold_turns(task: dict[str, Any], framework: str) -> list[str]:
    """What the model should write, call by call: Hermes `<tool_call>` blocks, then the answer (for
    smolagents a call of its `final_answer` tool, the only way its ToolCallingAgent ends)."""
    def block(name: str, arguments: dict[str, Any]) -> str:
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"

    turns = ["\n".join(block(n, a) for n, a in turn) for turn in task["metadata"]["turns"]]
    final = task["metadata"]["final"]
    return [*turns, block("final_answer", {"answer": final}) if framework == "smolagents" else final]


async def demonstrations(framework: str, rows: list[dict[str, Any]], tokenizer: Any) -> list[dict[str, Any]]:
    """Run the framework's agent on each task through the gateway, replaying the gold turns."""
    from ajet.engine.replay import ReplayEngine
    from ajet.gateway.episodes import EpisodeSession
    from ajet.gateway.server import Gateway, GatewayServer, create_app
    from ajet.gateway.tool_parser import parse_tool_calls
    from ajet.tracker.episode import EpisodeTracker
    from ajet.tracker.merge import merge_calls

    class Recording(Gateway):
        """Keeps each request's tools: a demonstration needs the specs exactly as the framework sent them."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.tools: list[Any] = []

        async def _complete(self, session, agent, chat):
            self.tools.append(chat.tools)
            return await super()._complete(session, agent, chat)

    workflow = FrameworkWorkflow(framework=framework)
    out = []
    for row in rows:
        script = gold_turns(row, framework)
        gateway = Recording(ReplayEngine([{"text": t} for t in script], tokenizer), tokenizer)
        server = GatewayServer(create_app(gateway))
        url = await server.start()
        session = EpisodeSession(episode_id=row["task_id"], tracker=EpisodeTracker(row["task_id"]))
        task = Task(task_id=row["task_id"], query=row["query"], answer=row["answer"])
        try:
            result = await workflow.execute(task, Tuner(url, "policy", gateway.open_episode(session)))
        finally:
            await server.stop()
        # the workflow turns a refusal or a step limit into an empty answer: for a demonstration, an error
        if result.metadata["stop_reason"] != "answered":
            raise RuntimeError(f"{framework} stopped on {row['task_id']}: {result.metadata['stop_reason']}")
        calls = session.tracker.calls
        if len(calls) != len(script):
            raise RuntimeError(f"{framework} made {len(calls)} calls on {row['task_id']}; the gold has {len(script)}")
        for timeline in merge_calls(calls)[0]:
            last = timeline.last
            parsed = parse_tool_calls(script[last.index], None)
            reply = ({"role": "assistant", "content": parsed.content, "tool_calls": parsed.tool_calls}
                     if parsed.tool_calls else {"role": "assistant", "content": script[last.index]})
            out.append(_renumbered({"tools": gateway.tools[last.index], "messages": [*last.messages, reply]}))
    return out


def _renumbered(row: dict[str, Any]) -> dict[str, Any]:
    """The row with the gateway's call ids (random per run; smolagents also copies them into its
    history's text) as call_0, call_1, ... in order of appearance."""
    ids: dict[str, str] = {}
    text = CALL_ID.sub(lambda m: ids.setdefault(m.group(0), f"call_{len(ids)}"), json.dumps(row))
    return json.loads(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    from ajet.jsonl import write_jsonl_files
    from ajet.models import resolve_model_path

    train, val = tasks()
    files: dict[str, list[dict[str, Any]]] = {"train": train, "val": val}
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("tiny-random"))  # SmolLM2's tokenizer
    for framework in args.frameworks.split(","):
        files[f"sft_{framework}"] = asyncio.run(demonstrations(framework, train, tokenizer))
    print(write_jsonl_files(args.out, files))


if __name__ == "__main__":
    main()
