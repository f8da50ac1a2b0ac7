"""A validation pass: the val split through the rollout with a ready engine, and its report.

`ajet eval` (ajet/eval/run.py) runs it once; the debug backbone runs it between training steps
(`trainer.eval_every`). It lives here, beside the rollout it drives, so both reach it downward.
"""

from __future__ import annotations

import json
from math import comb
from pathlib import Path
from typing import Any

from ajet.config.schema import AjetConfig
from ajet.errors import JudgeError, TaskReaderError
from ajet.judge.agent import agent_metrics, summarize_agent_metrics
from ajet.rollout.runner import BatchResult
from ajet.rollout.stack import RolloutStack, settings_for
from ajet.task_reader import read_tasks
from ajet.workflow import WorkflowOutput


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c successes (Chen et al., 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def eval_report(batch: BatchResult, group_size: int) -> dict[str, Any]:
    """The numbers `ajet eval` prints and saves."""
    report = batch.summary()
    by_task: dict[str, list[bool]] = {}
    for e in batch.episodes:
        by_task.setdefault(e.task.task_id, []).append(e.success)
    if group_size > 1:
        for k in sorted({1, group_size}):
            report[f"pass@{k}"] = sum(pass_at_k(len(s), sum(s), k) for s in by_task.values()) / max(len(by_task), 1)
    report["tasks"] = len(by_task)
    agent = _agent_metric_rows(batch)
    if agent:
        report["agent_metrics"] = summarize_agent_metrics(agent)
    return report


def _agent_metric_rows(batch: BatchResult) -> list[dict[str, float]]:
    """Seed 002's agent metrics of the episodes whose task carries a reference (a failed episode
    counts, with no calls and no answer)."""
    rows = []
    for e in batch.episodes:
        try:
            row = agent_metrics(e.task, e.output or WorkflowOutput(), e.success)
        except JudgeError:  # a malformed reference: the judge reports it on the episode
            row = None
        if row is not None:
            rows.append(row)
    return rows


async def evaluate(cfg: AjetConfig, engine, tokenizer, run_dir: Path | None, *, label: str = "eval",
                   step: int | None = None, episodes_file: str = "eval_episodes.jsonl",
                   show_progress: bool = True, predictions_file: str | None = None) -> dict[str, Any]:
    """Run the val split with a ready engine (the trainer calls this between steps).

    predictions_file: also write one line per episode there (in run_dir): the task, the answer and
    tool calls the workflow returned, the expected answer, the reward and its parts."""
    tasks = read_tasks(cfg.task_reader, "val", cfg.base_dir).tasks
    if not tasks:
        raise TaskReaderError("the val split has no tasks: set task_reader.val or task_reader.split_ratio")
    if cfg.eval.limit:
        tasks = tasks[: cfg.eval.limit]
    settings = settings_for(cfg, "val")
    async with RolloutStack(cfg, engine, tokenizer, run_dir, episodes_file) as stack:
        batch = await stack.runner.run(tasks, settings, label=label, step=step, show_progress=show_progress)
    if predictions_file and run_dir is not None:
        write_predictions(batch, run_dir / predictions_file)
    return eval_report(batch, settings.group_size)


def write_predictions(batch: BatchResult, path: Path) -> Path:
    """predictions.jsonl: per episode the query, expected answer, returned answer and calls, reward parts."""
    with path.open("w", encoding="utf-8") as handle:
        for e in batch.episodes:
            output = e.output
            row = {"task_id": e.task.task_id, "repeat": e.repeat, "query": e.task.query, "expected": e.task.answer,
                   "answer": output.answer if output else None, "tool_calls": output.tool_calls if output else [],
                   "reward": e.reward.total if e.reward else None, "parts": e.reward.parts if e.reward else {},
                   "success": e.success, "error": e.error or e.judge_error}
            handle.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
    return path
