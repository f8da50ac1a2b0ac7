"""The llamafactory backbone's `run`: convert the data, compile the arguments, run `llamafactory-cli train`.

    ajet config ──▶ convert.py (ShareGPT + report) ──▶ data/dataset_info.json, <stage>.json
                └─▶ args.py (LLaMA-Factory keys)   ──▶ <stage>.yaml ──check_args.py (its parser)──▶
    llamafactory-cli train <stage>.yaml  (managed env, subprocess)  ──stdout──▶ metrics.jsonl + progress

Layout of the run folder:

    config.yaml, metrics.jsonl, curves.png      as with every backbone
    llamafactory/data/                          dataset_info.json and the converted <stage>.json
    llamafactory/<stage>.yaml, <stage>.log      the arguments and LLaMA-Factory's whole output
    llamafactory/<stage>.conversion.json        the conversion report (rows changed / dropped, why)
    checkpoints/<stage>/                        LLaMA-Factory's output_dir: the final adapter (or model)
    checkpoints/<stage>/checkpoint-N/           its intermediate checkpoints (trainer.save_every)
    ajet_checkpoint.json                        names the backbone and the newest checkpoint

Stages run in order; a later stage trains on from the earlier stage's adapter. `--resume` reruns
the stages that did not finish; LLaMA-Factory continues each from its newest checkpoint-N.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from ajet.backbone.launch import run_streaming
from ajet.backbone.llamafactory import checkpoints
from ajet.backbone.llamafactory.args import check_config, dataset_info, stage_args
from ajet.backbone.llamafactory.convert import ConversionReport, convert_file
from ajet.backbone.reporters import tracker_env
from ajet.backbone.llamafactory.env import backend_env, environment_python
from ajet.backbone.llamafactory.tokens import token_rows, write_tokenized
from ajet.backbone.monitor import Monitor, plot_curves, print_summary, read_metrics, truncate_run_logs
from ajet.config.loader import save_resolved_config
from ajet.config.schema import AjetConfig
from ajet.errors import BackboneError, CheckpointError
from ajet.runlock import RunLock

console = Console(stderr=True)
CHECK_SCRIPT = Path(__file__).with_name("check_args.py")
_TOTAL = re.compile(r"Total optimization steps = ([\d,]+)")
# LLaMA-Factory's log keys -> ajet's metric names (the debug backbone's, where one exists).
_RENAME = {"learning_rate": "lr", "rewards/margins": "reward_margin", "rewards/accuracies": "reward_accuracy",
           "rewards/chosen": "reward_chosen", "rewards/rejected": "reward_rejected"}


class LlamaFactoryRun:
    def __init__(self, cfg: AjetConfig, resume: bool | str = False) -> None:
        check_config(cfg)
        self.cfg = cfg
        self.run_dir = Path(cfg.output_dir).resolve()  # LLaMA-Factory runs in another folder: absolute paths
        if resume:
            self.run_dir = _resume_dir(self.run_dir, resume)
            cfg.output_dir = str(self.run_dir)
        elif (self.run_dir / checkpoints.MARKER).is_file() or (self.run_dir / "llamafactory").is_dir():
            raise CheckpointError(f"{str(self.run_dir)!r} already holds a llamafactory run; add --resume to continue "
                                  "it or set output_dir to a new folder")
        # Held until run() ends: a second run on this folder is refused before it writes anything there.
        self.lock = RunLock(self.run_dir, "resumed llamafactory run" if resume else "llamafactory run").acquire()
        try:
            self.work = self.run_dir / "llamafactory"
            self.work.mkdir(parents=True, exist_ok=True)
            save_resolved_config(cfg, self.run_dir)
            self.monitor = Monitor(self.run_dir, total_steps=0)
        except BaseException:
            self.lock.release()
            raise

    def run(self) -> dict[str, Any]:
        from ajet.models import resolve_model_path

        python = environment_python(own=self.cfg.backbone.llamafactory.python)
        cli = python.parent / "llamafactory-cli"
        model_path = resolve_model_path(self.cfg.model.path)
        cuda = _cuda_available()
        adapter: Path | None = None
        done_steps = 0
        prepared: list[tuple[Path, str, dict[str, Any]]] = []
        restore = _exit_on_sigterm()
        try:
            for stage in self.cfg.stages:
                out = self.run_dir / "checkpoints" / stage
                if checkpoints.is_final(out):  # finished before a --resume: keep it, go on from it
                    done_steps += checkpoints.read(out)["step"]
                    adapter = out
                    continue
                args = self._prepare(stage, model_path, out, adapter, cuda, python)
                prepared.append((out, stage, args))
                self._check(python, stage)
                done_steps = self._train(cli, stage, args, done_steps)
                checkpoints.mark_stage(out, stage=stage, base_model=model_path, args=args, python=str(python))
                checkpoints.mark_run(self.run_dir, out)
                adapter = out
        finally:
            restore()
            self.monitor.close()
            for out, stage, args in prepared:  # intermediate checkpoints of a run that died are usable too
                checkpoints.mark_intermediate(out, stage=stage, base_model=model_path, args=args, python=str(python))
        rows = read_metrics(self.monitor.path)
        print_summary(rows)
        plot = plot_curves(self.run_dir)
        console.print(f"run folder: {self.run_dir} · final checkpoint: {adapter}" + (f" · curves: {plot}" if plot else ""))
        return {"run_dir": str(self.run_dir), "steps": done_steps, "checkpoint": str(adapter),
                "metrics": rows[-1] if rows else {}}

    # ------------------------------------------------------------------ one stage
    def _prepare(self, stage: str, model_path: str, out: Path, adapter: Path | None, cuda: bool,
                 python: Path) -> dict[str, Any]:
        data_dir = self.work / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        source = self.cfg.sft.data if stage == "sft" else self.cfg.dpo.data
        rows, report = convert_file(source, stage)
        _write_json(data_dir / f"{stage}.json", rows)
        info_path = data_dir / "dataset_info.json"
        info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.is_file() else {}
        _write_json(info_path, {**info, **dataset_info(stage, f"{stage}.json")})
        _write_json(self.work / f"{stage}.conversion.json", report.to_dict())
        _show_report(report)
        args = stage_args(self.cfg, stage, model_path=model_path, dataset_dir=data_dir, output_dir=out,
                          adapter=adapter, cuda=cuda)
        if self.cfg.backbone.llamafactory.render == "ajet":  # LLaMA-Factory trains on ajet's own token ids
            rows, token_report = token_rows(self.cfg, stage, model_path)
            for line in token_report.skipped:
                console.print(f"[yellow]skipped {line}[/]")
            args["tokenized_path"] = str(write_tokenized(python, rows, data_dir / f"{stage}.tokens.jsonl",
                                                         data_dir / f"{stage}.tokenized", backend_env()))
            console.print(f"{stage}: {len(rows)} rows rendered and tokenized by ajet (the gateway's template) "
                          f"into {args['tokenized_path']}")
        (self.work / f"{stage}.yaml").write_text(yaml.safe_dump(args, sort_keys=False), encoding="utf-8")
        return args

    def _check(self, python: Path, stage: str) -> None:
        """LLaMA-Factory's own parser judges the arguments before the (slow) training starts."""
        proc = subprocess.run([str(python), str(CHECK_SCRIPT), str(self.work / f"{stage}.yaml")],
                              capture_output=True, text=True, env=backend_env(), cwd=self.work)
        verdict = [line for line in proc.stdout.splitlines() if line.startswith("ajet-check:")]
        if proc.returncode == 0 and verdict:
            return
        if verdict:
            raise BackboneError(f"LLaMA-Factory rejected the {stage} arguments in {self.work / f'{stage}.yaml'}: "
                                f"{verdict[-1].removeprefix('ajet-check: ')}; fix the key under "
                                "ajet.backbone.llamafactory.args (or the ajet key it comes from); the run folder "
                                f"{self.run_dir} is kept")
        tail = "\n".join(f"    {t}" for t in (proc.stderr or proc.stdout).strip().splitlines()[-12:])
        raise BackboneError(f"could not check the {stage} arguments with LLaMA-Factory (exit {proc.returncode}); "
                            f"is the environment {python} broken? `ajet setup llamafactory --force` rebuilds it:\n{tail}")

    def _train(self, cli: Path, stage: str, args: dict[str, Any], done_steps: int) -> int:
        parser = _ProgressParser(self.monitor, stage, done_steps)
        resumed = checkpoints.last_step(Path(args["output_dir"]))
        if resumed:
            truncate_run_logs(self.monitor.path.parent, done_steps + resumed)
            parser.step = resumed
            console.print(f"{stage}: LLaMA-Factory resumes from checkpoint-{resumed}")
        log = self.work / f"{stage}.log"
        console.print(f"[bold]llamafactory {stage}[/]: {len(args)} arguments in {self.work / f'{stage}.yaml'}; "
                      f"LLaMA-Factory's output goes to {log}")
        try:
            run_streaming([str(cli), "train", str(self.work / f"{stage}.yaml")], name=f"llamafactory-cli train ({stage})",
                          log_path=log, on_line=parser.feed, cwd=self.work,
                          env={**backend_env(), **tracker_env(self.cfg.trainer.report_to, self.run_dir)},
                          idle_timeout_s=self.cfg.backbone.llamafactory.idle_timeout_s)
        except BackboneError as exc:
            if "SIGKILL" not in str(exc):
                raise
            raise BackboneError(f"{exc}\nSIGKILL mostly means the kernel's out-of-memory killer: lower "
                                "trainer.micro_batch_tokens or backbone.llamafactory.cutoff_len") from exc
        if parser.lf_dropped:
            raise BackboneError(f"LLaMA-Factory skipped {parser.lf_dropped} row(s) of the converted {stage} data "
                                f"that ajet's conversion expected to pass (see 'Skipping this abnormal example' "
                                f"in {log}); please report it with that log")
        return done_steps + parser.step


class _ProgressParser:
    """Turns LLaMA-Factory's printed log dicts into metrics.jsonl rows and progress lines."""

    def __init__(self, monitor: Monitor, stage: str, offset: int) -> None:
        self.monitor, self.stage, self.offset = monitor, stage, offset
        self.step = 0
        self.lf_dropped = 0
        self._last = time.perf_counter()

    def feed(self, line: str) -> None:
        if "Skipping this abnormal example" in line:
            self.lf_dropped += 1
        if "***** Running training *****" in line:  # step 1's time_s then excludes loading and preprocessing
            self._last = time.perf_counter()
        total = _TOTAL.search(line)
        if total:
            self.monitor.total_steps = self.offset + int(total.group(1).replace(",", ""))
            return
        text = line.strip()
        if not (text.startswith("{") and text.endswith("}") and "'loss'" in text):
            return
        logged = ast.literal_eval(text)
        now = time.perf_counter()
        metrics = {_RENAME.get(k, k): float(v) for k, v in logged.items() if _is_number(v)}
        metrics["time_s"] = round(now - self._last, 3)
        self._last = now
        self.step += 1
        self.monitor.log(self.offset + self.step, self.stage, metrics)


def _is_number(value: Any) -> bool:
    try:
        float(value)
        return not isinstance(value, bool)
    except (TypeError, ValueError):
        return False


def _show_report(report: ConversionReport) -> None:
    style = "yellow" if report.changed or report.dropped else "green"
    for n, line in enumerate(report.lines()):
        console.print(f"[{style}]{line}[/]" if n == 0 else line, markup=n == 0, highlight=False)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _exit_on_sigterm():
    """While training, SIGTERM (CI time-outs, `kill`) exits through Python's unwinding, so the watched
    LLaMA-Factory process group is stopped too instead of living on as an orphan. Returns the undo."""
    import signal
    import sys
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    return lambda: signal.signal(signal.SIGTERM, previous)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _resume_dir(output_dir: Path, resume: bool | str) -> Path:
    """The run folder to continue: the one given, or the newest llamafactory run beside output_dir."""
    if isinstance(resume, str):
        path = Path(resume).resolve()
        folder = next((p for p in (path, *path.parents) if (p / "llamafactory").is_dir()), None)
        if folder is None:
            raise CheckpointError(f"--resume {resume!r} is not in a llamafactory run folder")
        return folder
    candidates = [output_dir] + (sorted(output_dir.parent.iterdir()) if output_dir.parent.is_dir() else [])
    found = [d for d in candidates if (d / "llamafactory").is_dir()]
    if not found:
        raise CheckpointError(f"--resume found no llamafactory run in {str(output_dir)!r} or beside it; pass "
                              "--resume PATH to a run folder")
    return max(found, key=lambda d: (d / "llamafactory").stat().st_mtime)


def run(cfg: AjetConfig, resume: bool | str = False) -> dict[str, Any]:
    job = LlamaFactoryRun(cfg, resume)
    try:
        return job.run()
    finally:
        job.lock.release()
