"""The `ajet generate` command line: `explore`, `tasks`, `demos` and `rounds`, each with the config options of `ajet`.

    ajet generate explore --conf X.yaml --out calls.jsonl [--fresh] [key=value ...]
    ajet generate tasks --conf X.yaml -n 200 --out tasks.jsonl [--teacher self] [key=value ...]
    ajet generate tasks --conf X.yaml -n 300 --from-calls calls.jsonl --out tasks.jsonl   # call-first
    ajet generate demos --conf X.yaml [--tasks tasks.jsonl] --out sft.jsonl [--teacher self]
                        [--format openai|sharegpt] [key=value ...]

    ajet generate rounds --conf X.yaml --tasks tasks.jsonl --rounds N [--k 4] [--out DIR]   # ajet.generate.rounds

`--teacher self` is `generate.teacher=self`: the run's own model (`model.path`) writes the questions
and answers the tasks, its first tool call constrained to the tool schemas.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

_OVERRIDES_HELP = "config overrides in Hydra's grammar, e.g. generate.tasks.per_request=3 model.path=tiny-random"


def _parser(kind: str, description: str, teacher: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"ajet generate {kind}", description=description)
    parser.add_argument("--conf", metavar="YAML", required=True, help="the run's config (names the MCP server in "
                        "workflow_args.server, and generate.teacher)")
    parser.add_argument("--out", metavar="JSONL", required=True, help="file to write; an existing one is resumed")
    if teacher:
        parser.add_argument("--teacher", metavar="self", choices=["self"],
                            help="use the run's own model as question writer and teacher (generate.teacher=self)")
    parser.add_argument("--fresh", action="store_true", help="start over: delete --out and its .dropped.jsonl first")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=_OVERRIDES_HELP)
    return parser


def main(argv: list[str]) -> int:
    """`ajet generate {explore,tasks,demos,rounds} ...`; returns the exit code (errors are raised as AjetError)."""
    if argv and argv[0] == "explore":
        return _explore(argv[1:])
    if argv and argv[0] == "rounds":
        from ajet.generate.rounds import main as rounds_main

        return rounds_main(argv[1:])
    if not argv or argv[0] not in ("tasks", "demos"):
        sys.stderr.write("usage: ajet generate {explore,tasks,demos,rounds} --conf X.yaml ... (ajet generate KIND --help)\n"
                         "  explore write a bank of calls that really work on the MCP server (calls.jsonl)\n"
                         "  tasks   write questions for the MCP server's tools (-n N)\n"
                         "  demos   run the teacher on a tasks file and keep the good episodes as SFT rows\n"
                         "  rounds  self-improvement: sample, keep what matches the reference, SFT, repeat\n")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    kind, rest = argv[0], argv[1:]
    if kind == "tasks":
        parser = _parser("tasks", "Write realistic user questions that need the MCP server's tools.")
        parser.add_argument("-n", type=int, default=100, help="tasks wanted in --out (default: %(default)s)")
        parser.add_argument("--seed", type=int, default=0, help="seed of the tool schedule and, with --from-calls, "
                            "of the question forms: another seed phrases the same calls anew (default: %(default)s)")
        parser.add_argument("--from-calls", metavar="JSONL", help="write call-first tasks with references from a call "
                            "bank (`ajet generate explore`) instead of questions from the tool list")
    else:
        parser = _parser("demos", "Run the teacher on each task and keep the episodes that pass the filter as SFT rows.")
        parser.add_argument("--tasks", metavar="JSONL", help="tasks file (from `ajet generate tasks` or any jsonl "
                            "task file); default: the train split of the config's task_reader")
        parser.add_argument("--format", choices=["openai", "sharegpt"], help="row format (generate.demos.format)")
    args = parser.parse_intermixed_args(rest)
    overrides = list(args.overrides)
    if args.teacher:
        overrides.append("generate.teacher=self")
    if kind == "demos" and args.format:
        overrides.append(f"generate.demos.format={args.format}")
    from ajet.config.loader import load_config

    cfg = load_config(args.conf, overrides)
    out = Path(args.out).resolve()
    if kind == "tasks" and args.from_calls:
        from ajet.generate.call_tasks import generate_call_tasks

        calls = Path(args.from_calls).resolve()
        report = asyncio.run(generate_call_tasks(cfg, calls, args.n, out, fresh=args.fresh, seed=args.seed)).to_dict()
    elif kind == "tasks":
        from ajet.generate.tasks import generate_tasks

        report = asyncio.run(generate_tasks(cfg, args.n, out, fresh=args.fresh, seed=args.seed)).to_dict()
    else:
        from ajet.generate.demos import generate_demos

        tasks = Path(args.tasks).resolve() if args.tasks else None
        report = asyncio.run(generate_demos(cfg, tasks, out, fresh=args.fresh)).to_dict()
    _print(kind, report, out)
    return 0


def _explore(argv: list[str]) -> int:
    """`ajet generate explore`: no model is involved, only the MCP server."""
    parser = _parser("explore", "Call the MCP server's tools and keep the calls that really work (the call bank).",
                     teacher=False)
    args = parser.parse_intermixed_args(argv)
    from ajet.config.loader import load_config
    from ajet.generate.explore import explore_server

    cfg = load_config(args.conf, list(args.overrides))
    out = Path(args.out).resolve()
    report = asyncio.run(explore_server(cfg, out, fresh=args.fresh)).to_dict()
    table = Table(title="ajet generate explore", show_header=True, header_style="bold")
    table.add_column("")
    table.add_column("count", justify="right")
    for key in ("tools", "kept", "resumed", "calls", "wall_s"):
        table.add_row(key, str(report[key]))
    for reason, count in sorted(report["dropped"].items(), key=lambda kv: -kv[1]):
        table.add_row(f"dropped: {reason}", str(count))
    for tool, count in report["per_tool"].items():
        table.add_row(f"kept: {tool}", str(count))
    not_tried = set(report["not_tried"])
    for tool, why in report["no_working_call"].items():
        if tool not in not_tried:
            table.add_row(f"no working call: {tool}", why)
    console = Console()
    console.print(table)
    if not_tried:
        names = ", ".join(report["not_tried"][:8]) + (", ..." if len(not_tried) > 8 else "")
        console.print(f"[yellow]the call budget ran out before {len(not_tried)} of {report['tools']} tools were "
                      f"called ({names}): raise generate.explore.max_calls (now {cfg.generate.explore.max_calls}); "
                      f"a second run with the same --out goes on from here[/yellow]")
    console.print(f"wrote {out} (failed calls and reasons: {out.name}.dropped.jsonl)")
    console.print(json.dumps(report), soft_wrap=True)  # one line, for scripts
    return 0


def _print(kind: str, report: dict, out: Path) -> None:
    table = Table(title=f"ajet generate {kind}", show_header=True, header_style="bold")
    table.add_column("")
    table.add_column("count", justify="right")
    for key, value in report.items():
        if isinstance(value, dict):
            for sub, count in sorted(value.items(), key=lambda kv: -kv[1]):
                table.add_row(f"{key}: {sub}", str(count))
        else:
            table.add_row(key, str(value))
    console = Console()
    console.print(table)
    console.print(f"wrote {out} (dropped rows and reasons: {out.name}.dropped.jsonl)")
    console.print(json.dumps(report))
