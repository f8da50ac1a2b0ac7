"""A workflow and a judge for the swift backbone's GRPO test (loaded by path inside swift's process).

`ScriptedToolAgent` is the tool agent with its tool calls scripted: it asks the model once per
expected call of the task (with the tutorial's tool specs), appends the model's reply as returned and
then that call's tool result, and asks once more for the answer. The tiny test model cannot call
tools, so scripting the calls is what makes every episode multi-turn whatever the model says; the
model's own turns are the ones GRPO must train, and the tool results must stay masked. Every
`fail_every`-th episode raises, to check failures are counted and train nothing.

`VariedJudge` gives rewards that differ between episodes (from the answer text), so GRPO groups
have a spread and the rewards visibly reach swift.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from ajet import Judge, Reward, Task, Tuner, Workflow, WorkflowOutput

TOOLS = json.loads((Path(__file__).resolve().parents[2] / "tutorial" / "example_tool_agent" / "sft.jsonl")
                   .read_text(encoding="utf-8").splitlines()[0])["tools"]
TOOL_RESULT = "TOOL-RESULT {name} ok"


class ScriptedToolAgent(Workflow):
    _episodes = itertools.count(1)

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        if self.kwargs.get("fail_every") and next(self._episodes) % int(self.kwargs["fail_every"]) == 0:
            raise RuntimeError(f"scripted failure on {task.task_id}")
        llm = tuner.openai_client()
        messages: list[dict[str, Any]] = [{"role": "user", "content": task.query}]
        records = []
        for call in task.answer["calls"]:
            reply = (await llm.chat.completions.create(model=tuner.model, messages=messages, tools=TOOLS)).choices[0]
            messages.append(_as_dict(reply.message))
            messages.append({"role": "tool", "tool_call_id": "scripted",
                             "content": TOOL_RESULT.format(name=call["name"])})
            records.append({"name": call["name"], "arguments": call["arguments"], "result": "ok"})
        final = (await llm.chat.completions.create(model=tuner.model, messages=messages, tools=TOOLS)).choices[0]
        messages.append(_as_dict(final.message))
        return WorkflowOutput(answer=final.message.content or "", messages=messages, tool_calls=records)


def _as_dict(message: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        entry["tool_calls"] = [{"id": c.id, "type": "function",
                                "function": {"name": c.function.name, "arguments": c.function.arguments}}
                               for c in message.tool_calls]
    return entry


class VariedJudge(Judge):
    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        text = str(output.answer or "")
        return Reward(total=(sum(map(ord, text)) % 5) / 4, parts={"spread": (len(text) % 3) / 2})
