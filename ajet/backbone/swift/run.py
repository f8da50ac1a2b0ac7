"""`ajet --backbone=swift`: the same config, trained by ms-swift in its own environment.

    config ─▶ datasets + swift command lines (args.py, data.py) ─▶ checked by swift (check.py)
           ─▶ `swift sft` / `swift rlhf` per stage, watched (launch.py) ─▶ metrics.jsonl, checkpoints

Each stage runs as a subprocess in the managed environment (`env.py`), in `<run>/swift/<stage>/`:
`data.jsonl` (the dataset swift reads), `args.json` (the command line), `ajet_plugin.py` (what swift
loads with --external_plugins), `swift.log` (swift's whole output), `output/` (swift's output_dir:
logging.jsonl and checkpoint-N folders). Stages chain: a stage starts from the last checkpoint of the
one before (the LoRA adapter goes on training, as on the debug backbone). Every checkpoint gets an
`ajet_checkpoint.json` naming the backbone, so `ajet export` and `ajet eval --model` know what to do
with it; `<run>/ajet_checkpoint.json` points at the newest and lists the finished stages (`--resume`
skips those and resumes the stage in progress from its newest checkpoint).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from rich.console import Console

from ajet.backbone.envs import ajet_path_entry
from ajet.backbone.launch import run_streaming
from ajet.backbone.monitor import Monitor, plot_curves, print_summary, read_metrics
from ajet.backbone.reporters import tracker_env
from ajet.backbone.swift import args as swift_args
from ajet.backbone.swift import data as swift_data
from ajet.backbone.swift.env import swift_python
from ajet.backbone.swift.metrics import LogFollower, StageMetrics
from ajet.config.loader import save_resolved_config
from ajet.config.schema import AjetConfig
from ajet.errors import BackboneError, CheckpointError, ConfigError
from ajet.models import read_chat_template, resolve_model_path
from ajet.runlock import RunLock

console = Console(stderr=True)
RECORD = "ajet_checkpoint.json"


class SwiftRun:
    def __init__(self, cfg: AjetConfig, resume: bool | str = False) -> None:
        swift_args.refuse_unsupported(cfg)
        self.cfg = cfg
        self.run_dir = Path(resume) if isinstance(resume, str) else Path(cfg.output_dir)
        record = _read_record(self.run_dir)
        if resume and record is None:
            raise CheckpointError(f"nothing to resume in {str(self.run_dir)!r}: it has no {RECORD} from a swift run")
        if not resume and record is not None:
            raise CheckpointError(f"{str(self.run_dir)!r} already holds a swift run; add --resume to continue it "
                                  "or set output_dir to a new folder")
        self.record = record or {"backbone": "swift", "stages_done": [], "latest": None}
        cfg.output_dir = str(self.run_dir)
        # Held until run() ends: a second run on this folder is refused before it writes anything there.
        self.lock = RunLock(self.run_dir, "resumed swift run" if resume else "swift run").acquire()
        try:
            save_resolved_config(cfg, self.run_dir)
            _write_record(self.run_dir, self.record)  # a run stopped in its first stage can be resumed too
            self.env = self._env()
        except BaseException:
            self.lock.release()
            raise

    # ------------------------------------------------------------------ preparation
    def _env(self) -> dict[str, str]:
        swift = self.cfg.backbone.swift
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ajet_path_entry()), env.get("PYTHONPATH")) if p)
        env.update(PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false", MODELSCOPE_REPO_TREE_PAGE_MAX_ATTEMPTS="1")
        env.update(tracker_env(self.cfg.trainer.report_to, self.run_dir))  # offline, in the run folder
        if self.cfg.model.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        if swift.nproc_per_node > 1 or swift.nnodes > 1:
            env.update(NPROC_PER_NODE=str(swift.nproc_per_node), NNODES=str(swift.nnodes),
                       NODE_RANK=str(swift.node_rank), MASTER_ADDR=swift.master_addr,
                       MASTER_PORT=str(swift.master_port))
        template = read_chat_template(self.cfg.model.chat_template)
        if template:
            path = self.run_dir / "swift" / "chat_template.jinja"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(template, encoding="utf-8")
            env["AJET_SWIFT_CHAT_TEMPLATE"] = str(path)
        return env

    def plan(self, stage: str, start: Path | None) -> tuple[swift_args.StagePlan, swift_data.Dataset]:
        """Write the stage's dataset and plugin; return its command line and dataset."""
        cfg = self.cfg
        stage_dir = self.run_dir / "swift" / stage
        stage_dir.mkdir(parents=True, exist_ok=True)
        out = stage_dir / "data.jsonl"
        if stage == "sft":
            dataset = swift_data.sft_dataset(cfg.sft.data, out)
        elif stage == "dpo":
            dataset = swift_data.preference_dataset(cfg.dpo.data, out)
        else:
            dataset = swift_data.task_dataset(cfg, out)
        for problem in dataset.skipped[:5]:
            console.print(f"[yellow]{stage} data: skipped {problem}[/]")
        plugin = self._write_plugin(stage, stage_dir)
        plan = swift_args.stage_plan(cfg, stage, stage_dir, out, start, plugin, len(dataset.rows))
        (stage_dir / "args.json").write_text(json.dumps({"command": plan.command, "args": plan.args}, indent=1),
                                             encoding="utf-8")
        return plan, dataset

    def _write_plugin(self, stage: str, stage_dir: Path) -> Path:
        plugin = stage_dir / "ajet_plugin.py"
        if stage != "grpo":
            plugin.write_text(f'"""Written by ajet for the {stage} stage of {self.run_dir}: swift renders rows with '
                              'ajet\'s renderer (--template ajet)."""\nimport ajet.backbone.swift.template  # noqa: F401\n',
                              encoding="utf-8")
            return plugin
        spec = {"config": self.cfg.model_dump(mode="json"), "base_dir": str(self.cfg.base_dir),
                "run_dir": str(self.run_dir.resolve()), "updates_per_step": self.cfg.trainer.updates_per_step,
                "record_samples": self.cfg.backbone.swift.record_samples}
        (stage_dir / "ajet_run.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
        plugin.write_text(f'"""Written by ajet for the grpo stage of {self.run_dir}: the workflow, judge and '
                          'template of this run inside swift (see ajet.backbone.swift.plugin)."""\n'
                          "from ajet.backbone.swift.plugin import install\n\n"
                          f"install({str((stage_dir / 'ajet_run.json').resolve())!r})\n", encoding="utf-8")
        return plugin

    def check(self, python: Path, plans: list[tuple[swift_args.StagePlan, swift_data.Dataset]]) -> None:
        """Let swift's parser and dataset loader look at everything before the first stage loads a model."""
        request = {"stages": [{
            "stage": p.stage, "command": p.command, "argv": p.argv(), "flags": p.args, "dataset": str(d.path),
            "source": str(self.cfg.sft.data if p.stage == "sft" else self.cfg.dpo.data), "source_lines": d.source_lines,
        } for p, d in plans]}
        path = self.run_dir / "swift" / "check.json"
        path.write_text(json.dumps(request), encoding="utf-8")
        proc = subprocess.run([str(python), "-m", "ajet.backbone.swift.check", str(path)], capture_output=True,
                              text=True, env=self.env)
        try:
            problems = json.loads(proc.stdout.strip().splitlines()[-1])["problems"]
        except (IndexError, ValueError, KeyError):
            tail = "\n".join(f"    {line}" for line in (proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise BackboneError(f"checking the swift arguments failed (exit {proc.returncode}):\n{tail}") from None
        if problems:
            raise ConfigError("swift does not accept this run:\n" + "\n".join(f"  - {p}" for p in problems))

    # ------------------------------------------------------------------ running
    def run(self) -> dict[str, Any]:
        cfg, swift = self.cfg, self.cfg.backbone.swift
        python = swift_python(swift.python, swift.packages, log=lambda line: console.print(line, highlight=False))
        todo = [s for s in cfg.stages if s not in self.record["stages_done"]]
        start = self.run_dir / self.record["latest"] if self.record["latest"] else None
        plans = [self.plan(stage, start) for stage in todo]  # datasets first: bad data fails fast
        if plans:
            self.check(python, plans)
        else:
            console.print(f"every stage of {self.run_dir} is finished ({', '.join(self.record['stages_done'])})")
        monitor = Monitor(self.run_dir, sum(p.steps // p.updates_per_step for p, _ in plans))
        step = _last_step(self.run_dir / "metrics.jsonl")
        try:
            for index, stage in enumerate(todo):
                plan = plans[index][0] if index == 0 else self.plan(stage, start)[0]
                start = self._stage(python, plan, monitor, step)
                step = _last_step(self.run_dir / "metrics.jsonl")
        finally:
            monitor.close()
        rows = read_metrics(self.run_dir / "metrics.jsonl")
        print_summary(rows)
        plot = plot_curves(self.run_dir)
        console.print(f"run folder: {self.run_dir} · checkpoint: {start}" + (f" · curves: {plot}" if plot else ""))
        return {"run_dir": str(self.run_dir), "steps": step, "checkpoint": str(start) if start else None,
                "metrics": rows[-1] if rows else {}}

    def _stage(self, python: Path, plan: swift_args.StagePlan, monitor: Monitor, offset: int) -> Path:
        resume_from = _newest_checkpoint(plan.out_dir)
        if resume_from is not None:
            plan.args["resume_from_checkpoint"] = str(resume_from)
        cmd = [str(python), "-m", "swift.cli.main", plan.command, *plan.argv()]
        log = plan.stage_dir / "swift.log"
        console.print(f"[bold cyan]{plan.stage}[/] · swift {plan.command} · {plan.steps} optimizer steps"
                      + (f" · resuming {resume_from.name}" if resume_from else "") + f" · log: {log}")
        if plan.stage == "grpo" and self.cfg.backbone.swift.use_vllm:
            server = swift_args.rollout_server_command(self.cfg, plan, python)
            console.print("GRPO rolls out on a vLLM server; start it on the rollout GPUs with:\n  "
                          + " ".join(server), highlight=False)
        tracker = StageMetrics(plan.updates_per_step, plan.stage_dir / "rollouts.jsonl" if plan.stage == "grpo" else None)
        follower = LogFollower(plan.out_dir / "logging.jsonl")

        def on_line(line: str) -> None:
            for rl_step, metrics in tracker.feed(follower.poll()):
                monitor.log(offset + rl_step, plan.stage, metrics)

        run_streaming(cmd, name=f"swift {plan.command} ({plan.stage} stage)", log_path=log, on_line=on_line,
                      env=self.env, idle_timeout_s=self.cfg.backbone.swift.idle_timeout_s)
        on_line("")  # rows written after swift's last line of output
        checkpoint = tracker.final.get("last_model_checkpoint") or _newest_checkpoint(plan.out_dir)
        if not checkpoint or not Path(checkpoint).is_dir():
            raise BackboneError(f"swift {plan.command} finished the {plan.stage} stage without a checkpoint in "
                                f"{plan.out_dir}; see {log}")
        return self._record(plan, Path(checkpoint))

    def _record(self, plan: swift_args.StagePlan, checkpoint: Path) -> Path:
        """ajet_checkpoint.json in every checkpoint of the stage, and the run's pointer to the newest."""
        base = resolve_model_path(self.cfg.model.path)
        for folder in sorted(plan.out_dir.glob("checkpoint-*")):
            if folder.is_dir():
                info = {"backbone": "swift", "stage": plan.stage, "swift_step": _step_of(folder),
                        "lora": self.cfg.model.lora.enabled, "base_model": base, "model": self.cfg.model.path,
                        "model_type": plan.args.get("model_type"), "template": plan.args.get("template"),
                        "run_dir": str(self.run_dir.resolve())}
                (folder / RECORD).write_text(json.dumps(info, indent=1), encoding="utf-8")
        self.record["stages_done"].append(plan.stage)
        # relative, like every backbone's run record: the run folder can be moved
        self.record["latest"] = str(checkpoint.resolve().relative_to(self.run_dir.resolve()))
        self.record["stage"] = plan.stage
        _write_record(self.run_dir, self.record)
        return checkpoint.resolve()


def _step_of(folder: Path) -> int:
    try:
        return int(folder.name.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def _newest_checkpoint(out_dir: Path) -> Path | None:
    found = [p for p in out_dir.glob("checkpoint-*") if p.is_dir() and _step_of(p) >= 0]
    return max(found, key=_step_of) if found else None


def _last_step(path: Path) -> int:
    rows = read_metrics(path)
    return int(rows[-1]["step"]) if rows else 0


def _read_record(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / RECORD
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _write_record(run_dir: Path, record: dict[str, Any]) -> None:
    tmp = run_dir / f".{RECORD}.tmp"
    tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
    tmp.replace(run_dir / RECORD)


def run(cfg: AjetConfig, resume: bool | str = False) -> dict[str, Any]:
    job = SwiftRun(cfg, resume)
    try:
        return job.run()
    finally:
        job.lock.release()
