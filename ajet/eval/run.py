"""`ajet eval`: run the val split, print a report table, write eval.json, predictions.jsonl (and episodes)."""

from __future__ import annotations

import asyncio
import json
from math import comb
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ajet.config.schema import AjetConfig
from ajet.errors import TaskReaderError
from ajet.rollout.runner import BatchResult
from ajet.rollout.stack import RolloutStack, load_tokenizer, settings_for
from ajet.task_reader import read_tasks

console = Console()


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
    return report


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


def print_report(report: dict[str, Any], title: str = "ajet eval") -> None:
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("tasks", report["tasks"]), ("episodes", report["episodes"]),
        ("reward mean", f"{report['reward_mean']:.3f}"), ("reward std", f"{report['reward_std']:.3f}"),
        *[(f"  {k}", f"{v:.3f}") for k, v in report["reward_parts"].items()],
        ("success rate", f"{report['success_rate']:.1%}"),
        *[(k, f"{report[k]:.1%}") for k in sorted(report) if k.startswith("pass@")],
        ("turns / episode", f"{report['turns_per_episode']:.2f}"),
        ("generated tokens / episode", f"{report['tokens_per_episode']:.1f}"),
        ("tool calls parsed", report["tool_calls_parsed"]),
        ("tool-call parse failures", report["tool_call_parse_failures"]),
        ("truncated completions", report["truncated_completions"]),
        ("failed episodes", report["failed"]), ("judge failures", report["judge_failed"]),
        ("LLM calls → samples", f"{report['merge']['llm_calls']} → {report['merge']['samples']}"),
        ("tokens before → after merge",
         f"{report['merge']['tokens_before_merge']} → {report['merge']['tokens_after_merge']}"),
        ("tokens/s", f"{report['tokens_per_s']:.1f}"), ("seconds", report["seconds"]),
    ]
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)
    for error, count in report["errors"].items():
        console.print(f"[yellow]{count} episode(s) failed with {error}[/]")


def _checkpoint_label(given: Path, checkpoint: Path, backbone: str) -> str:
    """A short, unique folder label for a backbone's checkpoint: its path below the run folder the
    user named (stage and step, e.g. `grpo-checkpoint-2`), without the layout's fixed folder names."""
    checkpoint, given = checkpoint.resolve(), given.resolve()
    parts = checkpoint.relative_to(given).parts if checkpoint != given and checkpoint.is_relative_to(given) else ()
    kept = [p for p in parts if p not in (backbone, "output", "checkpoints")]
    return "-".join(kept) if kept else f"{checkpoint.parent.name}-{checkpoint.name}"


def _model_folder(model: str, run_dir: Path) -> str:
    """A model name or folder as is; a training checkpoint (or a run folder: its newest checkpoint)
    merged into a model folder first, so any checkpoint can be evaluated directly."""
    from ajet.backbone.registry import checkpoint_owner, export_checkpoint
    from ajet.trainer.checkpoint import latest_checkpoint, resolve_checkpoint

    path = Path(model)
    owner = checkpoint_owner(path)
    if owner is not None:  # a backbone's own format (llamafactory, swift): its export merges
        backbone, checkpoint = owner
        merged = run_dir / f"model-{backbone.name}-{_checkpoint_label(path, checkpoint, backbone.name)}"
        if not (merged / "config.json").is_file():
            export_checkpoint(path, merged, merge=True)
        console.print(f"evaluating {backbone.name} checkpoint {checkpoint} (merged into {merged})")
        return str(merged)
    if (path / "checkpoints").is_dir():
        path = latest_checkpoint(path) or path
    if not (path / "state.json").is_file():
        return model
    checkpoint = resolve_checkpoint(path)
    merged = run_dir / f"model-{checkpoint.name}"
    if not (merged / "config.json").is_file():
        export_checkpoint(checkpoint, merged, merge=True)
    console.print(f"evaluating checkpoint {checkpoint} (merged into {merged})")
    return str(merged)


def run_eval(cfg: AjetConfig, model: str | None = None) -> dict[str, Any]:
    """The `ajet eval` command: build the engine, evaluate, print, save eval.json."""
    from ajet.backbone.preflight import check_inputs
    from ajet.config.loader import save_resolved_config
    from ajet.engine.factory import build_engine

    check_inputs(cfg, "eval")  # a bad workflow, judge or val file fails before the model loads
    run_dir = Path(cfg.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if model is not None:
        cfg.model.path = _model_folder(model, run_dir)
    save_resolved_config(cfg, run_dir)
    engine = build_engine(cfg)
    tokenizer = load_tokenizer(cfg, engine)
    report = asyncio.run(evaluate(cfg, engine, tokenizer, run_dir, predictions_file="predictions.jsonl"))
    report["model"] = engine.model_name if cfg.engine.type == "chat_api" else cfg.model.path
    print_report(report, title=f"ajet eval · {cfg.project} · {report['model']}")
    (run_dir / "eval.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    console.print(f"wrote {run_dir / 'eval.json'}")
    return report
