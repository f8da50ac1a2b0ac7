"""`ajet eval`: run the val split, print a report table, write eval.json, predictions.jsonl (and episodes).

The pass itself is `ajet.rollout.validation.evaluate` (the debug backbone runs it between training
steps too); this module builds the engine for it, prints and saves its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ajet.backbone.stop import run_async
from ajet.config.schema import AjetConfig
from ajet.rollout.stack import load_tokenizer
from ajet.rollout.validation import evaluate
from ajet.runlock import RunLock

console = Console()


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
        ("  of them plain JSON, not <tool_call>", report["tool_calls_json"]),
        ("tool-call parse failures", report["tool_call_parse_failures"]),
        ("truncated completions", report["truncated_completions"]),
        ("failed episodes", report["failed"]), ("judge failures", report["judge_failed"]),
        ("LLM calls → samples", f"{report['merge']['llm_calls']} → {report['merge']['samples']}"),
        ("tokens before → after merge",
         f"{report['merge']['tokens_before_merge']} → {report['merge']['tokens_after_merge']}"),
        ("tokens/s", f"{report['tokens_per_s']:.1f}"), ("seconds", report["seconds"]),
    ]
    for name, value in report.get("workflow_metrics", {}).items():  # the workflow's own, averaged per episode
        rows.append((f"workflow: {name}", f"{value:.3f}"))
    for name, stats in report.get("agent_metrics", {}).items():  # seed 002's, when tasks carry references
        rows.append((name, f"{stats['mean']:.3f} ± {stats['std']:.3f} (n={int(stats['count'])})"))
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)
    for error, count in report["errors"].items():
        console.print(f"[yellow]{count} episode(s) failed with {error}[/]")


def run_eval(cfg: AjetConfig, model: str | None = None) -> dict[str, Any]:
    """The `ajet eval` command: build the engine, evaluate, print, save eval.json."""
    from ajet.backbone.preflight import check_inputs
    from ajet.config.loader import save_resolved_config
    from ajet.engine.factory import build_engine
    from ajet.export.model_folder import model_folder

    check_inputs(cfg, "eval")  # a bad workflow, judge or val file fails before the model loads
    run_dir = Path(cfg.output_dir)
    with RunLock(run_dir, "eval"):  # two evals (or an eval and a run) writing one folder would interleave
        if model is not None:
            cfg.model.path = model_folder(model, run_dir)
        save_resolved_config(cfg, run_dir)
        engine = build_engine(cfg)
        tokenizer = load_tokenizer(cfg, engine)
        # as training's loop: a stop signal cancels the pass, which unwinds (ajet.backbone.stop)
        report = run_async(evaluate(cfg, engine, tokenizer, run_dir, predictions_file="predictions.jsonl"))
        report["model"] = engine.model_name if cfg.engine.type == "chat_api" else cfg.model.path
        print_report(report, title=f"ajet eval · {cfg.project} · {report['model']}")
        (run_dir / "eval.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    console.print(f"wrote {run_dir / 'eval.json'}")
    return report
