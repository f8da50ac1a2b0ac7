"""`ajet generate demos`: run the workflow with the teacher as the model and keep the good episodes
as SFT rows.

The tasks come from `--tasks FILE` (any jsonl task file), or else from the train split of the
config's task reader (so the val part of a `split_ratio` stays unseen). Every task runs `generate.demos.attempts`
episodes through the rollout stack, with the teacher behind the passthrough gateway (a chat
endpoint, or the run's own model served here for `--teacher self`); the `mcp_agent` workflow gets
`first_tool_choice` (default 'required' for self). An episode is kept when:

- its tool use is clean: at least one call, every call parsed and executed without error and
  without an error-shaped result (`{"error": ...}`, "Error: ...", empty: `ajet.tool_results`), and a
  final answer (`ajet.judge.grounded.tool_use_problem`);
- and, for a task with a reference answer, the run's judge (`judge:` in the YAML) calls it a
  success; for a task without one, `generate.demos.no_reference_check` passes: `grounding` (the
  answer states what the tools returned, `ajet.judge.grounded`) or `llm_judge` (the teacher endpoint
  grades it, score >= llm_judge_threshold).

Call-first tasks (`ajet generate tasks --from-calls`: gold calls with their real results in
`metadata.gold`) are not run at all: their demonstration is built from the gold calls
(ajet.generate.constructed), only the final sentence asked of the teacher
(`generate.demos.final_sentence`).

Kept episodes are written to `--out` as they finish (OpenAI `{task_id, tools, messages}` or ShareGPT
`{task_id, conversations, system, tools}`, the formats ajet's SFT reads), dropped ones to
`<out>.dropped.jsonl` with their reason. Tasks already in either file are skipped, so a second run
resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ajet.config.schema import AjetConfig, TaskReaderConfig
from ajet.errors import GenerateError
from ajet.generate.endpoint import endpoint_of, open_endpoint
from ajet.jsonl import JsonlAppender, dropped_path
from ajet.generate.server import server_of
from ajet.judge.base import Judge, Reward, success_of
from ajet.judge.grounded import grounding_problem, tool_use_problem
from ajet.workflow import Task, WorkflowOutput

console = Console()


@dataclass
class DemoReport:
    """What `ajet generate demos` did: rows kept, episodes run, drops by reason, tasks left without a demo."""

    kept: int = 0
    episodes: int = 0
    tasks: int = 0
    skipped_done: int = 0
    dropped: Counter = field(default_factory=Counter)
    tasks_with_demo: set[str] = field(default_factory=set)
    built: int = 0
    sentences: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {"kept": self.kept, "built": self.built, "episodes": self.episodes, "tasks": self.tasks,
                "skipped_done": self.skipped_done, "tasks_with_demo": len(self.tasks_with_demo),
                "final_sentence": dict(self.sentences), "dropped": dict(self.dropped)}


class DemoFilter(Judge):
    """Scores 1 (keep) or 0 (drop, feedback 'category: detail') per the rules in the module docstring."""

    def __init__(self, run_judge: Judge, no_reference: str, llm_judge: Judge | None, threshold: float) -> None:
        super().__init__()
        self.run_judge = run_judge
        self.no_reference = no_reference
        self.llm_judge = llm_judge
        self.threshold = threshold

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        problem = tool_use_problem(output)
        if problem is None and task.answer is not None:
            reward = Reward.of(await self.run_judge.score(task, output))
            ok = success_of(reward, self.run_judge.success_threshold, output.is_success)
            problem = None if ok else f"judge_failed: the run's judge scored {reward.total:.3f}"
        elif problem is None and self.no_reference == "llm_judge":
            assert self.llm_judge is not None
            reward = Reward.of(await self.llm_judge.score(task, output))
            problem = None if reward.total >= self.threshold else (
                f"llm_judge_below_threshold: scored {reward.total:.2f} < {self.threshold} ({reward.feedback})")
        elif problem is None:
            problem = grounding_problem(task, output)
        return Reward(total=0.0 if problem else 1.0, is_success=problem is None, feedback=problem or "kept")


class DemoWriter:
    """Receives every finished episode from the rollout runner (its `writer`) and files it."""

    def __init__(self, kept: JsonlAppender, dropped: JsonlAppender, fmt: str, keep_per_task: int,
                 report: DemoReport) -> None:
        self.kept, self.dropped, self.fmt, self.keep_per_task, self.report = kept, dropped, fmt, keep_per_task, report
        self.per_task: Counter = Counter()

    def write(self, episode: Any, **_: Any) -> None:
        self.report.episodes += 1
        task_id = episode.task.task_id
        if episode.error is not None:
            reason = f"episode_failed: {episode.error[:300]}"
        elif episode.judge_error is not None:
            reason = f"filter_failed: {episode.judge_error[:300]}"
        elif not episode.success:
            reason = episode.reward.feedback if episode.reward else "not scored"
        elif self.per_task[task_id] >= self.keep_per_task:
            reason = f"enough_for_task: {self.keep_per_task} demonstration(s) already kept"
        else:
            self.per_task[task_id] += 1
            self.kept.write(sft_row(task_id, episode.output, self.fmt))
            self.report.kept += 1
            self.report.tasks_with_demo.add(task_id)
            return
        self.report.dropped[reason.split(":")[0]] += 1
        out = episode.output
        self.dropped.write({"task_id": task_id, "query": episode.task.query, "reason": reason,
                            "answer": str(out.answer) if out else None,
                            "tool_calls": json.loads(json.dumps(out.tool_calls, default=str)) if out else []})

    def close(self) -> None:
        """The runner's writer protocol; the files are closed by their owners."""


def sft_row(task_id: str, output: WorkflowOutput, fmt: str) -> dict[str, Any]:
    """An episode as one SFT row: OpenAI {tools, messages} or ShareGPT {conversations, system, tools}."""
    tools = output.metadata.get("tools") or []
    messages = [dict(m) for m in output.messages]
    if fmt == "openai":
        return {"task_id": task_id, "tools": tools, "messages": messages}
    system = next((m["content"] for m in messages if m.get("role") == "system"), None)
    conversations = []
    for m in messages:
        role = m.get("role")
        if role == "user":
            conversations.append({"from": "human", "value": m.get("content") or ""})
        elif role == "tool":
            conversations.append({"from": "observation", "value": m.get("content") or ""})
        elif role == "assistant" and m.get("tool_calls"):
            calls = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"] or "{}")}
                     for c in m["tool_calls"]]
            conversations.append({"from": "function_call",
                                  "value": json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)})
        elif role == "assistant":
            conversations.append({"from": "gpt", "value": m.get("content") or ""})
    return {"task_id": task_id, "conversations": conversations, "system": system,
            "tools": [t["function"] for t in tools]}


def _demo_config(cfg: AjetConfig, teacher_is_self: bool) -> AjetConfig:
    """The config the rollout runs with: the mcp_agent workflow gets the first turn's tool_choice."""
    from ajet.plugins import load_object
    from ajet.workflows.mcp_agent import McpAgent

    cls = load_object(cfg.workflow, cfg.base_dir)
    choice = cfg.generate.demos.first_tool_choice or ("required" if teacher_is_self else "auto")
    # the workflow preset lists every argument, so "not set" is a None value, not a missing key
    if not (isinstance(cls, type) and issubclass(cls, McpAgent)):
        return cfg
    args = dict(cfg.workflow_args)
    if args.get("first_tool_choice") is None:
        args["first_tool_choice"] = choice
    if teacher_is_self and args.get("parallel_tool_calls") is None:
        # one call per reply: a small model forced to call keeps writing calls until max_tokens cuts
        # one, and a cut call makes the whole reply unparseable (0 calls in 60 of 120 cold-start episodes)
        args["parallel_tool_calls"] = False
    return cfg.model_copy(update={"workflow_args": args})


async def generate_demos(cfg: AjetConfig, tasks_path: Path | None, out: Path, *, fresh: bool = False) -> DemoReport:
    """Write demonstrations for the tasks in `tasks_path` (None: the train split of the config's task
    reader, so a split_ratio's val part stays unseen) to `out`; raises GenerateError on none.
    Call-first tasks (gold calls with their results) are built, the others sampled from the teacher."""
    from ajet.generate.constructed import is_constructible
    from ajet.task_reader import read_tasks

    opts = cfg.generate.demos
    source = cfg.task_reader if tasks_path is None else TaskReaderConfig(type="jsonl", train=str(tasks_path))
    tasks = read_tasks(source, "train", cfg.base_dir).tasks
    teacher = endpoint_of(cfg, "teacher")
    report = DemoReport()
    with JsonlAppender(out, fresh) as kept, JsonlAppender(dropped_path(out), fresh) as dropped:
        done = {row.get("task_id") for row in kept.existing + dropped.existing}
        report.skipped_done = sum(1 for t in tasks if t.task_id in done)
        todo = [t for t in tasks if t.task_id not in done]
        built, sampled = [], []
        for task in todo:
            (built if is_constructible(task) else sampled).append(task)
        report.tasks = len(todo)
        writer = DemoWriter(kept, dropped, opts.format, opts.keep_per_task, report)
        writer.per_task.update(row.get("task_id") for row in kept.existing)
        console.print(f"{len(built)} call-first task(s) to build, {len(sampled)} to run × {opts.attempts} attempt(s) "
                      f"({report.skipped_done} already in {out} or its dropped file)")
        needs_model = bool(sampled) or (bool(built) and opts.final_sentence == "teacher")
        # built rows with templated sentences need no model: nothing is loaded or called then
        async with open_endpoint(cfg, teacher) if needs_model else contextlib.nullcontext() as engine:
            if built:
                await _build(cfg, built, engine, teacher == "self", writer)
            if sampled:
                await _sample(cfg, sampled, engine, teacher == "self", writer)
    if report.kept == 0 and not kept.existing:
        raise GenerateError(f"no demonstration was kept from {report.episodes} episode(s); dropped: "
                            f"{', '.join(f'{k} {v}' for k, v in report.dropped.most_common()) or 'none'}. "
                            f"See {dropped_path(out)} for each episode and reason")
    return report


async def _build(cfg: AjetConfig, tasks: list[Task], engine: Any, self_served: bool, writer: DemoWriter) -> None:
    """Write the call-first tasks' demonstrations by construction (ajet.generate.constructed), each
    row the moment its final sentence is decided."""
    from ajet.generate.constructed import demo_messages, final_sentence
    from ajet.mcp_client import server_tools

    tools = await server_tools(server_of(cfg), cfg.base_dir)
    system_prompt = cfg.workflow_args.get("system_prompt") or ""
    link_lines = bool(cfg.workflow_args.get("ids_after_names"))  # measured only with that layout (mcp_pipeline.md)
    queue = list(reversed(tasks))

    async def worker() -> None:
        while queue:
            task = queue.pop()
            sentence = await final_sentence(cfg, engine, task, self_served, writer.report.sentences)
            messages = demo_messages(task, system_prompt, sentence, link_lines, cfg.generate.demos.plan_line)
            output = WorkflowOutput(answer=sentence, messages=messages, metadata={"tools": tools})
            writer.kept.write(sft_row(task.task_id, output, writer.fmt))
            writer.report.kept += 1
            writer.report.built += 1
            writer.report.tasks_with_demo.add(task.task_id)

    await asyncio.gather(*(worker() for _ in range(min(cfg.rollout.concurrency, 8))))


async def _sample(cfg: AjetConfig, tasks: list[Task], engine: Any, self_served: bool, writer: DemoWriter) -> None:
    """Run the teacher's episodes on `tasks` and file each through `writer` (kept or dropped)."""
    from ajet.judge.llm_judge import LLMJudge
    from ajet.rollout.stack import RolloutStack, settings_for

    opts = cfg.generate.demos
    run_cfg = _demo_config(cfg, self_served)
    settings = dataclasses.replace(settings_for(run_cfg, "train"), group_size=opts.attempts,
                                   temperature=opts.temperature, top_p=1.0)
    llm_judge = None
    if opts.no_reference_check == "llm_judge":
        llm_judge = LLMJudge(base_url=engine.base_url, model=engine.model, api_key=engine.api_key)
    async with RolloutStack(run_cfg, engine, None, None) as stack:
        assert stack.runner is not None
        stack.runner.judge = DemoFilter(stack.judge, opts.no_reference_check, llm_judge, opts.llm_judge_threshold)
        stack.runner.writer = writer
        try:
            await stack.runner.run(tasks, settings, label="demos")
        finally:
            if llm_judge is not None:
                await llm_judge.aclose()
