"""The agent half of benchmarks/tool_retrieval.py: SmolLM2 trained on demonstrations over the 1,000-tool
server, then evaluated on held-out queries with the trained retriever's top 8, and with the right tool
put among them (`include_reference`). Every stage is the installed CLI in a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
from pathlib import Path
from typing import Any

from ajet.jsonl import write_jsonl
from ajet.retrieval.load import select_tools
from ajet.mcp_client import call_tool, open_client

SYSTEM = ("You answer questions about energy and utility figures. Call the one tool that fits the question, "
          "with the place it names; when you have the result, reply with one short sentence that states the value.")
SERVER = "from ajet.retrieval.server import build_server\n\nmcp = build_server()\n"
YAML = """\
defaults:
  - workflow: mcp_agent
ajet:
  project: tool_retrieval
  model: {{path: smollm2-135m-instruct}}
  workflow_args:
    server: server.py
    system_prompt: "{system}"
    tool_retrieval: {{top_k: 8, retriever: retriever, include_reference: false}}
  task_reader: {{type: jsonl, train: train_tasks.jsonl, val: val.jsonl}}
  judge:
    type: composite
    args:
      parts:
        - {{name: calls, weight: 0.5, judge: {{type: function_call, args: {{expected_key: calls}}}}}}
        - {{name: answer, weight: 0.5, judge: {{type: exact_match, args: {{answer_key: final, mode: number}}}}}}
  algorithm: [sft]
  sft: {{data: sft.jsonl, epochs: 2, batch_size: 8, lr: 3.0e-4}}
  rollout: {{max_turns: 3, max_tokens_per_turn: 96, concurrency: 16}}
  eval: {{group_size: 1}}
"""


def _sentence(tool: dict[str, Any], place: str, value: Any) -> str:
    """'Get the price of natural gas for one city.' -> 'The price of natural gas for Denver is 41.2.'"""
    what = tool["function"]["description"].removeprefix("Get the ").split(" for one ")[0]
    return f"The {what} for {place} is {value}."


async def _run_references(server: Path, tasks: list[dict]) -> list[dict]:
    """`tasks` with `answer.final` and `content`: each reference call run once on the real server."""
    scored = []
    async with open_client(str(server)) as client:
        for task in tasks:
            call = task["answer"]["calls"][0]
            outcome = await call_tool(client, call["name"], call["arguments"])
            if outcome.error is not None:
                raise RuntimeError(f"{call}: {outcome.error}")
            scored.append({**task, "answer": {**task["answer"], "final": outcome.result["value"]},
                           "content": outcome.content})
    return scored


def _demo(task: dict, tools: list[dict], retriever: Any) -> dict:
    """An SFT row: the retriever's top 8 with the right tool among them, the call, its result, a sentence."""
    call = task["answer"]["calls"][0]
    spec = next(t for t in tools if t["function"]["name"] == call["name"])
    return {"tools": select_tools(retriever, tools, task["query"], 8, [call["name"]]), "messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task["query"]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function", "function": {
            "name": call["name"], "arguments": json.dumps(call["arguments"])}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": task["content"]},
        {"role": "assistant", "content": _sentence(spec, next(iter(call["arguments"].values())),
                                                   task["answer"]["final"])}]}


def compare_agents(root: Path, tools: list[dict], train: list[dict], heldout: list[dict], retriever: Any,
                   n_demos: int, n_val: int, overrides: list[str] | None = None) -> dict[str, float]:
    """Train the agent under `root` and return its val success with retrieval and with the right tools.
    overrides: key=value for every ajet command (model.path=tiny-random for a quick check)."""
    overrides = list(overrides or [])
    rng = random.Random(0)
    demo_tasks, val_tasks = rng.sample(train, min(n_demos, len(train))), rng.sample(heldout, min(n_val, len(heldout)))
    (root / "server.py").write_text(SERVER)
    scored = asyncio.run(_run_references(root / "server.py", demo_tasks + val_tasks))
    scored_train, scored_val = scored[:len(demo_tasks)], scored[len(demo_tasks):]
    sft = [_demo(task, tools, retriever) for task in scored_train]
    write_jsonl(root / "sft.jsonl", sft)
    for name, rows in (("train_tasks", scored_train), ("val", scored_val)):
        write_jsonl(root / f"{name}.jsonl", [{k: v for k, v in r.items() if k != "content"} for r in rows])
    conf = root / "agent.yaml"
    conf.write_text(YAML.format(system=SYSTEM))
    print(f"agent: SFT on {len(sft)} demonstrations, eval on {len(scored_val)} held-out queries", flush=True)
    subprocess.run(["ajet", "--conf", str(conf), "--backbone=debug", f"output_dir={root / 'run'}", *overrides],
                   check=True)
    results = {}
    for name, extra in (("retrieved", []), ("right_tools", ["workflow_args.tool_retrieval.include_reference=true"])):
        out = root / f"eval_{name}"
        subprocess.run(["ajet", "eval", "--conf", str(conf), "--model", str(root / "run"), f"output_dir={out}", *extra,
                        *overrides], check=True)
        report = json.loads((out / "eval.json").read_text())
        results[name] = report["success_rate"]
        tools_right = report.get("agent_metrics", {}).get("tool_selection_accuracy", {}).get("mean")
        print(f"agent ({name}): success {report['success_rate']:.3f}, tool selection accuracy {tools_right}",
              flush=True)
    return results
