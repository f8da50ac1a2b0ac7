"""The no-human-data MCP pipeline on the server zoo (benchmarks/mcp_zoo/), held-out and dev servers apart.

For each server, the tutorial's exact steps (tutorial/example_mcp_pipeline), each the installed CLI in a
subprocess, as a user runs them: `ajet generate explore` → `ajet generate tasks --from-calls` →
`ajet generate demos` → `ajet --backbone=debug` (SFT: the tutorial's pipeline.yaml, with the server
and the system prompt of the server's own YAML) → `ajet eval` of the base model and of the trained
one on the server's hand-written val.jsonl (benchmarks/mcp_zoo/<name>/<name>.yaml, its judge).
Nothing hand-written reaches the pipeline. Published servers are installed first
(benchmarks/mcp_zoo/setup.py, kept when already there) and their fixtures rebuilt before every
stage, since a server's write tools (git commit, checkout) may have changed them.

    python benchmarks/mcp_zoo.py [--split dev|heldout|all] [--servers a,b] [-n 180] [--out results.jsonl]
                                 [--rl] [--val-limit N] [--data-only] [key=value ...]
    python benchmarks/mcp_zoo.py --summary [FILE] [-n 360 sft.epochs=2]   # the newest result per server, of one recipe
                                                                         # (servers with none are named above its last line)

The key=value overrides go to every pipeline command after the server's own (e.g. sft.epochs=1); the
evals take the agent's (workflow_args.*), and the base eval the student's (`model=qwen2.5-coder-0.5b`).
Per server it prints tools with a kept call / tools, tasks, base and trained success and minutes;
the last line is `heldout_mean_success=<x> dev_mean_success=<y> tools_covered=<r> minutes=<m>`: the
trained models' mean val success over the held-out and the dev servers run (a server whose pipeline
fails counts 0), the tools with a kept call over all tools of the servers run, and the whole run's minutes. The split rule
(benchmarks/mcp_zoo/README.md): the generator is improved on dev servers only; held-out servers are
scored at the end of a change, and no rule is written from reading their failures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "tutorial" / "example_mcp_pipeline" / "pipeline.yaml"
sys.path.insert(0, str(REPO / "benchmarks" / "mcp_zoo"))

import zoo_fixtures  # noqa: E402
import zoo  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
import provenance  # noqa: E402
from mcp_pipeline import cpu, rows, sft_checkpoint  # noqa: E402  (the same CPU label, row count and SFT checkpoint as the two-server benchmark)


class StageFailed(RuntimeError):
    pass


def run(args: list[str], log: Path) -> float:
    """Run one CLI command, its output to `log`; its wall seconds. A failure raises with the log's tail."""
    started = time.time()
    with log.open("w") as out:
        # its own process group, so that stopping this script stops the stage and what it started (MCP servers)
        stage = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        try:
            code = stage.wait()
        finally:
            if stage.poll() is None:
                stop_group(stage)
    if code:
        tail = "".join(log.read_text().splitlines(True)[-20:])
        raise StageFailed(f"{' '.join(args[:3])} ... failed ({code}); last lines of {log}:\n{tail}")
    return time.time() - started


def stop_group(stage: subprocess.Popen, grace_seconds: float = 30.0) -> None:
    """Stop a stage's whole process group: SIGTERM, then SIGKILL once `grace_seconds` pass."""
    try:
        os.killpg(stage.pid, signal.SIGTERM)
        stage.wait(grace_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(stage.pid, signal.SIGKILL)
        stage.wait()
    except ProcessLookupError:
        pass  # it ended on its own meanwhile


def exit_on_signal(signum: int, frame: object) -> None:
    """SIGTERM (kill, a CI timeout) unwinds like Ctrl-C, so `run` stops the running stage rather than orphan it."""
    sys.exit(128 + signum)


def server_for_pipeline(name: str) -> str:
    """The server as the pipeline's YAML (another folder) must name it: a file of the zoo made absolute."""
    server = zoo.server_of(name)
    if " " not in server and server.endswith((".py", ".json")) and not Path(server).is_absolute():
        server = str((zoo.yaml_path(name).parent / server).resolve())
    return server


def quoted(value: str) -> str:
    """A value for a Hydra override, whatever its spaces and punctuation."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def tool_names(name: str) -> list[str]:
    from ajet.mcp_client import server_tools

    tools = asyncio.run(server_tools(zoo.server_of(name), zoo.yaml_path(name).parent))
    return [t["function"]["name"] for t in tools]


def kept_tools(calls: Path) -> set[str]:
    """Tools with at least one kept call in the explored bank (one JSON object a line, with "tool")."""
    if not calls.exists():
        return set()
    return {json.loads(line).get("tool") for line in calls.read_text().splitlines() if line.strip()}


def override_key(override: str) -> str:
    """The key a Hydra override sets, without its +/~ prefix: `+workflow_args.x=1` -> `workflow_args.x`."""
    return override.lstrip("+~").split("=", 1)[0]


def agent_overrides(overrides: list[str]) -> list[str]:
    """The overrides that change the agent itself (`workflow_args.*`): the val run must use the agent
    that was trained, while the training recipe's keys (sft.epochs, ...) are no business of eval."""
    return [o for o in overrides if override_key(o).startswith("workflow_args.")]


def student_overrides(overrides: list[str]) -> list[str]:
    """The overrides that choose the model trained (`model=qwen2.5-coder-0.5b`, `model.path=...`): the base
    row scores that model untrained, not the server YAML's."""
    keys = {"model", "model.path", "ajet.model", "ajet.model.path"}
    return [o for o in overrides if override_key(o) in keys]


def val_success(name: str, model: Path | None, log: Path, limit: int | None, overrides: list[str]) -> float:
    """`ajet eval` on the server's val config (the base model when `model` is None: the student the
    overrides name, untrained) with the agent's `overrides`; its success rate."""
    rebuild_fixtures(name)
    out = log.parent / f"eval-{log.stem}"
    args = ["ajet", "eval", "--conf", str(zoo.yaml_path(name)), f"output_dir={out}", *agent_overrides(overrides)]
    if model is not None:
        args[2:2] = ["--model", str(model)]
    else:
        args += student_overrides(overrides)
    if limit:
        args.append(f"eval.limit={limit}")
    run(args, log)
    return json.loads((out / "eval.json").read_text())["success_rate"]


def rebuild_fixtures(name: str) -> None:
    published = zoo.PUBLISHED.get(name)
    if published is not None and published.fixtures:
        zoo_fixtures.build(zoo.FIXTURES, list(published.fixtures))


def pipeline(name: str, n: int, overrides: list[str], root: Path, val_limit: int | None, tools: list[str],
             rl: bool = False, data_only: bool = False) -> dict:
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    conf = ["--conf", str(PIPELINE)]
    common = [f"workflow_args.server={quoted(server_for_pipeline(name))}",
              f"workflow_args.system_prompt={quoted(zoo.system_prompt_of(name))}",
              f"task_reader.train={out / 'tasks.jsonl'}", f"sft.data={out / 'sft.jsonl'}",
              f"project=mcp-zoo-{name}", *overrides]
    rebuild_fixtures(name)
    seconds = {"explore": run(["ajet", "generate", "explore", *conf, "--out", str(out / "calls.jsonl"), *common],
                              out / "explore.log")}
    rebuild_fixtures(name)
    seconds["tasks"] = run(["ajet", "generate", "tasks", *conf, "--from-calls", str(out / "calls.jsonl"), "-n", str(n),
                            "--out", str(out / "tasks.jsonl"), *common], out / "tasks.log")
    rebuild_fixtures(name)
    seconds["demos"] = run(["ajet", "generate", "demos", *conf, "--tasks", str(out / "tasks.jsonl"),
                            "--out", str(out / "sft.jsonl"), *common], out / "demos.log")
    if data_only:
        return {"server": name, "calls": rows(out / "calls.jsonl"), "tasks": rows(out / "tasks.jsonl"),
                "demos": rows(out / "sft.jsonl"), "seconds": {k: round(v) for k, v in seconds.items()}}
    train = ["ajet", *conf, "--backbone=debug", f"output_dir={out / 'run'}", *common]
    if rl:
        # GRPO's tasks: the same bank phrased anew (another seed), questions the SFT demos never showed
        rebuild_fixtures(name)
        seconds["rl_tasks"] = run(["ajet", "generate", "tasks", *conf, "--from-calls", str(out / "calls.jsonl"),
                                   "-n", str(n), "--seed", "1", "--out", str(out / "rl_tasks.jsonl"), *common],
                                  out / "rl_tasks.log")
        train += [f"task_reader.train={out / 'rl_tasks.jsonl'}", "algorithm=[sft,grpo]"]
    seconds["train"] = run(train, out / "train.log")
    t0 = time.time()
    base = val_success(name, None, out / "eval_base.log", val_limit, overrides)
    sft_model = sft_checkpoint(out / "run") if rl else out / "run"
    trained = val_success(name, sft_model, out / "eval_trained.log", val_limit, overrides)
    seconds["eval"] = time.time() - t0
    figures = {}
    if rl:  # the tutorial ships SFT; what GRPO adds is measured from the same run, past its SFT checkpoint
        figures["rl_success"] = val_success(name, out / "run", out / "eval_rl.log", val_limit, overrides)
    kept = kept_tools(out / "calls.jsonl") & set(tools)
    return {"server": name, "tools": len(tools), "tools_kept": len(kept),
            "tools_without_kept_call": sorted(set(tools) - kept), "calls": rows(out / "calls.jsonl"),
            "tasks": rows(out / "tasks.jsonl"), "demos": rows(out / "sft.jsonl"),
            "base_success": base, "trained_success": trained, **figures,
            "minutes": round((time.time() - started) / 60, 1), "seconds": {k: round(v) for k, v in seconds.items()}}


def mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.3f}" if values else "n/a"


def of_recipe(row: dict, n: int, overrides: list[str]) -> bool:
    """Whether a result is of the recipe asked: every val question, `-n` and the key=value overrides
    (a teacher, other epochs) as given; rows of one recipe alone make a table and its means."""
    same_overrides = sorted(row.get("overrides") or []) == sorted(overrides)
    # "withdrawn": the run's recipe was a default that a later commit took back, so it is no recipe now
    return not row.get("val_limit") and not row.get("withdrawn") and row.get("n", 180) == n and same_overrides


def minutes(row: dict) -> str:
    return "n/a" if row.get("minutes") is None else f"{row['minutes']:.1f}"  # the first rows did not record it


def newest_of_recipe(rows: list[dict], n: int = 180, overrides: list[str] | None = None) -> dict[str, dict]:
    """server -> its newest result of one recipe (rows in the results file's order, oldest first)."""
    return {row["server"]: row for row in rows if of_recipe(row, n, overrides or [])}


def summary(path: Path, n: int = 180, overrides: list[str] | None = None) -> str:
    """The table of the newest result of one recipe (`-n`, overrides) per server in a results file (`--out`,
    one JSON object a line, appended in time order), each with the commit and CPU it ran on (rows of different
    generators are not one measurement: the table says which), and the last line as a run prints it, over
    those rows; `minutes` is their sum (of the rows that recorded it), on whatever machines they ran."""
    from ajet.errors import ConfigError
    from ajet.jsonl import read_rows

    try:
        rows = read_rows(path)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    for number, row in enumerate(rows, 1):
        if "server" not in row or "trained_success" not in row:
            raise SystemExit(f"{path}: result {number} is not a zoo result (no server or trained_success)")
    recipe = overrides or []
    newest = newest_of_recipe(rows, n, recipe)
    skipped = sum(not of_recipe(row, n, recipe) for row in rows)
    parts = zoo.split()
    side = {name: part for part, names in parts.items() for name in names}
    order = sorted(newest.values(), key=lambda r: (side.get(r["server"]) != "heldout", r["server"]))
    lines = [f"{'server':14} {'split':8} {'tools':>6} {'base':>6} {'trained':>8} {'min':>6}  commit / cpu / when"]
    for row in order:
        base = "n/a" if row.get("base_success") is None else f"{row['base_success']:.3f}"
        lines.append(f"{row['server']:14} {side.get(row['server'], '?'):8} {row['tools_kept']:>3}/{row['tools']:<2} "
                     f"{base:>6} {row['trained_success']:8.3f} {minutes(row):>6}  "
                     f"{row.get('commit') or '?'} / {row.get('cpu') or '?'} / {row.get('when') or '?'}"
                     + ("  FAILED (scored 0)" if "error" in row else ""))
    if skipped:
        lines.append(f"({skipped} result(s) of another recipe (-n, overrides) or fewer val questions left out)")
    # a mean over part of a split reads like the whole split's: name the servers it leaves out
    unmeasured = {part: [name for name in names if name not in newest] for part, names in parts.items()}
    if any(unmeasured.values()):
        lines.append("(no result of this recipe, so not in the means: "
                     + "; ".join(f"{part} {', '.join(names)}" for part, names in unmeasured.items() if names) + ")")
    lines.append(f"{means_line(order, side)} minutes={sum(r.get('minutes') or 0.0 for r in order):.1f}")
    return "\n".join(lines)


def means_line(results: list[dict], side: dict[str, str]) -> str:
    """The start of the last line: trained success over the held-out and the dev servers, tools covered."""
    tools_total = sum(r["tools"] for r in results)
    covered = f"{sum(r['tools_kept'] for r in results) / tools_total:.3f}" if tools_total else "n/a"
    return (f"heldout_mean_success={mean([r['trained_success'] for r in results if side.get(r['server']) == 'heldout'])} "
            f"dev_mean_success={mean([r['trained_success'] for r in results if side.get(r['server']) == 'dev'])} "
            f"tools_covered={covered}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=["dev", "heldout", "all"], default="all")
    parser.add_argument("--servers", default=None, help="comma-separated zoo servers (default: those of --split)")
    parser.add_argument("-n", type=int, default=180, help="call-first tasks per server (the tutorial's 180)")
    parser.add_argument("--out", type=Path, default=None, help="append one JSON line of results per server here")
    parser.add_argument("--rl", action="store_true", help="also GRPO after SFT (algorithm=[sft,grpo] on the bank "
                        "phrased anew, as the tutorial's README says): trained_success stays the SFT checkpoint's, "
                        "rl_success is the final one's")
    parser.add_argument("--val-limit", type=int, default=None, help="score only the first N val questions "
                        "(a smoke test; the reported figures use them all)")
    parser.add_argument("--data-only", action="store_true", help="explore, tasks and demos only, no training or "
                        "eval: the files a generator change alters, to compare two generators' output by hash")
    parser.add_argument("--summary", nargs="?", type=Path, const=REPO / "benchmarks" / "results" / "mcp_zoo.jsonl",
                        metavar="FILE", help="print the table of the newest result per server in FILE (default: "
                        "benchmarks/results/mcp_zoo.jsonl) and its means, of the recipe that -n and the key=value "
                        "overrides given with it name (default: -n 180, none); runs nothing")
    args, overrides = parser.parse_known_args()
    signal.signal(signal.SIGTERM, exit_on_signal)
    if args.summary is not None:
        if not args.summary.exists():
            parser.error(f"no results file {args.summary}")
        print(summary(args.summary, args.n, overrides))
        return
    split = zoo.split()
    side = {name: part for part, names in split.items() for name in names}
    names = args.servers.split(",") if args.servers else [n for n in zoo.SERVERS
                                                            if args.split == "all" or side.get(n) == args.split]
    unknown = [n for n in names if n not in zoo.SERVERS]
    if unknown:
        parser.error(f"unknown zoo server(s): {', '.join(unknown)} (known: {', '.join(zoo.SERVERS)})")
    started, commit = time.time(), provenance.commit()  # the code the runs start with
    root = REPO / "runs" / "mcp_zoo_bench" / time.strftime("%Y%m%d-%H%M%S")
    listed = ", ".join(f"{n} ({side.get(n, '?')})" for n in names)
    print(f"cpu: {cpu()}; servers: {listed}; output under {root}", flush=True)
    published = [n for n in names if n in zoo.PUBLISHED]
    if published:
        setup = subprocess.run([sys.executable, str(REPO / "benchmarks" / "mcp_zoo" / "setup.py"),
                                "--servers", ",".join(published)], capture_output=True, text=True)
        print(setup.stdout.strip().splitlines()[-1] if setup.stdout.strip() else setup.stderr[-500:], flush=True)
    results = []
    if args.data_only:
        for name in names:
            print(json.dumps(pipeline(name, args.n, overrides, root, None, [], data_only=True)), flush=True)
        return
    for name in names:
        tools = tool_names(name)
        try:
            result = pipeline(name, args.n, overrides, root, args.val_limit, tools, args.rl)
        except StageFailed as exc:
            # a stage that fails is the pipeline failing on this server: it scores 0, and the others still run
            kept = kept_tools(root / name / "calls.jsonl") & set(tools)
            result = {"server": name, "tools": len(tools), "tools_kept": len(kept), "base_success": None,
                      "trained_success": 0.0, "error": str(exc)[-1500:]}
            print(f"{name}: FAILED (scored 0) {result['error']}", flush=True)
        result.update(split=side.get(name, "?"), n=args.n, overrides=overrides, cpu=cpu(), val_limit=args.val_limit,
                      when=time.strftime("%Y-%m-%d %H:%M"), commit=commit)
        results.append(result)
        if "error" not in result:
            print(f"{name} ({result['split']}): tools {result['tools_kept']}/{result['tools']}, tasks {result['tasks']}, "
                  f"base {result['base_success']:.3f} -> trained {result['trained_success']:.3f}"
                  + (f" -> +GRPO {result['rl_success']:.3f}" if "rl_success" in result else "")
                  + f", {result['minutes']} min", flush=True)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("a") as handle:
                handle.write(json.dumps(result) + "\n")
    rl_part = ""
    if args.rl:
        rl_part = (f" heldout_mean_rl={mean([r.get('rl_success', 0.0) for r in results if r['split'] == 'heldout'])}"
                   f" dev_mean_rl={mean([r.get('rl_success', 0.0) for r in results if r['split'] == 'dev'])}")
    print(f"{means_line(results, side)} minutes={(time.time() - started) / 60:.1f}{rl_part}")


if __name__ == "__main__":
    main()
