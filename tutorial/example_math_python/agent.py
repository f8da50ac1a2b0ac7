"""`PythonMathAgent`: solves math problems by writing Python that runs in ajet's sandbox.

The loop of the calculator tutorial (call the model, run the calls it makes, feed the results back,
stop on a plain-text reply or when the turn budget is spent), with a `python` tool whose code runs in
a process confined by `ajet.sandbox` (bubblewrap: no network, no view of the task files, a fresh folder). How each program ended is counted per episode in
`WorkflowOutput.metrics` (`code_runs`, `code_ok`, `code_error`, `code_timeout`, `code_memory`,
`code_output_limit`, `code_blocked`, `code_bad_call`), which the run averages into its report.

Workflow arguments (YAML `workflow_args`):
    max_turns: LLM calls per episode when the tuner sets none (default 3).
    wall_s, cpu_s, memory_mb, max_output_bytes: the sandbox limits of one program.
    sandbox: the isolation, `bwrap` (default; the workflow refuses to start where bubblewrap does not
        work) or `unsafe_audit_hook` (a Python audit hook only, which the code can switch off: for code
        you would run yourself; docs/reliability.md).
"""

from __future__ import annotations

from typing import Any

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from ajet.sandbox import SandboxLimits, check_isolation
from python_tool import PYTHON_SPEC, STATUSES, SYSTEM_PROMPT, run_python_call


class PythonMathAgent(Workflow):
    """Answers a math problem, running the Python it writes in the sandbox."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.limits = SandboxLimits(
            wall_s=float(kwargs.get("wall_s", 5)), cpu_s=int(kwargs.get("cpu_s", 5)),
            memory_mb=int(kwargs.get("memory_mb", 512)), max_output_bytes=int(kwargs.get("max_output_bytes", 16384)))
        self.isolation = kwargs.get("sandbox", "bwrap")
        check_isolation(self.isolation)  # no sandbox here: refuse now, before any episode runs

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        max_turns = tuner.max_turns or int(self.kwargs.get("max_turns", 3))
        llm = tuner.openai_client(agent="assistant")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task.query},
        ]
        records: list[dict[str, Any]] = []
        answer, stop = "", "max_turns"
        for _ in range(max_turns):
            try:
                response = await llm.chat.completions.create(model=tuner.model, messages=messages, tools=[PYTHON_SPEC])
            except openai.BadRequestError as exc:  # e.g. prompt too long: end here, the judge scores it
                stop = f"llm_refused: {exc.message}"
                break
            message = response.choices[0].message
            answer = message.content or ""
            messages.append(message.model_dump(exclude_none=True))  # unchanged: the exact tokens train
            if not message.tool_calls:
                stop = "answered"
                break
            for call in message.tool_calls:
                if call.function.name != "python":
                    content = f"Error: unknown tool {call.function.name!r}; the only tool is 'python'"
                    records.append({"name": call.function.name, "arguments": call.function.arguments,
                                    "error": content, "status": "bad_call"})
                else:
                    content, record = await run_python_call(call.function.arguments, self.limits, self.isolation)
                    records.append(record)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return WorkflowOutput(answer=answer, messages=messages, tool_calls=records,
                              metadata={"tools": [PYTHON_SPEC], "stop_reason": stop}, metrics=code_metrics(records))


def code_metrics(records: list[dict[str, Any]]) -> dict[str, float]:
    """Per-episode counts of how the programs ended: code_runs, code_ok, code_error, ..."""
    metrics = {f"code_{status}": 0.0 for status in (*STATUSES, "bad_call")}
    for record in records:
        metrics[f"code_{record.get('status', 'bad_call')}"] += 1
    metrics["code_runs"] = float(sum(r.get("status") in STATUSES for r in records))
    return metrics
