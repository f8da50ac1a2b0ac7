"""`ajet generate rounds`: self-improvement rounds (rejection-sampling fine-tuning, as STaR / ReST-EM).

    ajet generate rounds --conf X.yaml --tasks tasks.jsonl --rounds N [--k 4] [--model START] [--out DIR]

The tasks carry references (`answer: {calls, final}`, from `ajet generate tasks --from-calls`). They
are split once into train and held-out (`generate.rounds.heldout_share`, seeded; or `--heldout FILE`).
The start model is evaluated on the held-out tasks (round 0); then each round r:

1. samples k episodes per train task with the current model (`ajet generate demos` with the model
   as its own teacher, on the train tasks without their gold results, so nothing is built) and keeps
   those the reference judge calls a success -> DIR/round-r/sft.jsonl;
2. fine-tunes the current model on them (`ajet --backbone=debug algorithm=[sft]` in a subprocess,
   run folder DIR/round-r/train; `generate.rounds.previous_rows` adds the earlier rounds' rows) and
   merges its last checkpoint into DIR/round-r/model-...;
3. evaluates that model on the held-out tasks (`ajet eval` in a subprocess, DIR/round-r/eval).

It stops after N rounds, when a round's held-out success is not above the best so far, or when a
round keeps no episode. DIR/rounds.jsonl holds one line per round, DIR/final.txt the best model.
A rerun with the same DIR continues after the last finished round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ajet.config.schema import AjetConfig
from ajet.errors import GenerateError
from ajet.jsonl import dropped_path, read_rows

console = Console()
# judges that score an episode against task.answer; any other built-in one is replaced by tool_reference
REFERENCE_JUDGES = ("tool_reference", "function_call", "composite")


@dataclass
class RoundRecord:
    """One line of DIR/rounds.jsonl."""

    round: int
    model: str
    sampled: int
    kept: int
    held_out_success: float | None
    seconds: float
    stop: str | None = None  # why the rounds ended here (no_rows_kept, no_improvement), else None


class Rounds:
    """The rounds of one DIR; `run()` does what is left of them."""

    def __init__(self, conf: Path, overrides: list[str], tasks: Path, out: Path, *, rounds: int, k: int | None,
                 start: str | None, heldout: Path | None) -> None:
        from ajet.config.loader import load_config

        self.conf, self.out, self.rounds = conf.resolve(), out.resolve(), rounds
        self.user_overrides = list(overrides) + ([f"generate.rounds.attempts={k}"] if k is not None else [])
        self.cfg = load_config(self.conf, self.user_overrides)
        self.start = start or self.cfg.model.path
        self.train_path, self.heldout_path = self.out / "train.jsonl", self.out / "heldout.jsonl"
        self.log_path = self.out / "rounds.jsonl"
        self._split(tasks.resolve(), heldout.resolve() if heldout else None)

    # ---- the split ----------------------------------------------------------------------------
    def _split(self, tasks: Path, heldout: Path | None) -> None:
        """Write DIR/train.jsonl (gold results removed, so demos samples) and DIR/heldout.jsonl, once."""
        if self.train_path.exists() and self.heldout_path.exists():
            console.print(f"using the split in {self.out} (train.jsonl, heldout.jsonl)")
            return
        rows = _with_references(tasks)
        if heldout is not None:
            train, held = rows, _with_references(heldout)
        else:
            share = self.cfg.generate.rounds.heldout_share
            if len(rows) < 2:
                raise GenerateError(f"{tasks} has {len(rows)} task(s) with references; a train / held-out split "
                                    "needs at least 2 (or pass --heldout FILE)")
            random.Random(self.cfg.generate.rounds.seed).shuffle(rows)
            n_held = min(len(rows) - 1, max(1, round(len(rows) * share)))
            held, train = rows[:n_held], rows[n_held:]
        self.out.mkdir(parents=True, exist_ok=True)
        _write(self.heldout_path, held)
        _write(self.train_path, [_without_gold(r) for r in train])
        console.print(f"{len(train)} train task(s), {len(held)} held-out task(s) -> {self.out}")

    # ---- one step each ------------------------------------------------------------------------
    def overrides(self, model: str) -> list[str]:
        """The user's overrides, then the rounds' own: the split's files, the model, a reference judge."""
        cfg = self.cfg
        extra = [f"model.path={model}", "task_reader.type=jsonl", f"task_reader.train={self.train_path}",
                 f"task_reader.val={self.heldout_path}", "task_reader.split_ratio=null"]
        if cfg.judge.type not in REFERENCE_JUDGES and ":" not in cfg.judge.type:  # a plugin is the user's choice
            extra += ["judge.type=tool_reference", "judge.args={}"]
        return self.user_overrides + extra

    def evaluate(self, model: str, folder: Path) -> float:
        """Held-out success rate of `model` (`ajet eval` in a subprocess, its folder `folder/eval`)."""
        eval_dir = folder / "eval"
        shutil.rmtree(eval_dir, ignore_errors=True)  # a run stopped halfway left it; ours to redo
        _ajet(["eval", "--conf", str(self.conf), *self.overrides(model), f"output_dir={eval_dir}"],
              "ajet eval", folder / "eval.log")
        report = json.loads((eval_dir / "eval.json").read_text(encoding="utf-8"))
        return float(report["success_rate"])

    def sample(self, model: str, folder: Path) -> tuple[int, int, Counter]:
        """k episodes per train task with `model` as its own teacher; (episodes, kept, drop reasons)."""
        from ajet.config.loader import load_config

        cfg = load_config(self.conf, self.overrides(model) + [
            "generate.teacher=self", f"generate.demos.attempts={self.cfg.generate.rounds.attempts}"])
        out = folder / "sft.jsonl"
        try:
            report = sample_demos(cfg, self.train_path, out)
            console.print(f"sampling: {report}")
        except GenerateError:
            if read_rows(out):
                raise  # not the 'none kept' case
        kept, dropped = read_rows(out), read_rows(dropped_path(out))
        reasons = Counter(str(d.get("reason", "")).split(":")[0] for d in dropped)
        return len(kept) + len(dropped), len(kept), reasons

    def train(self, model: str, folder: Path, r: int) -> str:
        """SFT `model` on the round's rows (`ajet --backbone=...` subprocess); the merged model folder."""
        from ajet.export.model_folder import model_folder

        data = folder / "sft.jsonl"
        if self.cfg.generate.rounds.previous_rows:
            data = folder / "sft-with-previous.jsonl"
            rows = [row for i in range(1, r + 1) for row in read_rows(self.out / f"round-{i}" / "sft.jsonl")]
            _write(data, rows)
        run_dir = folder / "train"
        shutil.rmtree(run_dir, ignore_errors=True)  # a run stopped halfway left it; ours to redo
        _ajet(["--conf", str(self.conf), f"--backbone={self.cfg.backbone.name}", *self.overrides(model),
               "algorithm=[sft]", f"sft.data={data}", f"output_dir={run_dir}"], "ajet sft", folder / "train.log")
        return model_folder(str(run_dir), folder)

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> list[RoundRecord]:
        done = [RoundRecord(**row) for row in read_rows(self.log_path)]
        if done and done[-1].stop:
            console.print(f"[yellow]these rounds already stopped at round {done[-1].round} "
                          f"({done[-1].stop}); use a new --out to start over[/]")
        elif not done:
            began = time.monotonic()
            folder = self.out / "round-0"
            start = _model_folder(self.start, folder)
            success = self.evaluate(start, folder)
            done.append(self._record(RoundRecord(0, start, 0, 0, success, _since(began))))
        else:
            console.print(f"resuming {self.out} after round {done[-1].round}")
        while not done[-1].stop and done[-1].round < self.rounds:
            done.append(self._record(self._round(done)))
        _print_table(done)
        final = best(done)
        (self.out / "final.txt").write_text(final.model + "\n", encoding="utf-8")
        console.print(f"final model: {final.model} (round {final.round}, held-out success "
                      f"{final.held_out_success:.1%}); written to {self.out / 'final.txt'}")
        return done

    def _round(self, done: list[RoundRecord]) -> RoundRecord:
        r, current, began = done[-1].round + 1, best(done), time.monotonic()
        folder = self.out / f"round-{r}"
        folder.mkdir(parents=True, exist_ok=True)
        console.rule(f"round {r}: sampling from {current.model}")
        sampled, kept, reasons = self.sample(current.model, folder)
        if kept == 0:
            why = ", ".join(f"{k} {v}" for k, v in reasons.most_common()) or "none"
            console.print(f"[yellow]round {r}: none of the {sampled} sampled episode(s) matched its reference "
                          f"(dropped: {why}; each episode and reason in {dropped_path(folder / 'sft.jsonl')}); "
                          f"stopping: there is nothing to train on[/]")
            return RoundRecord(r, current.model, sampled, 0, None, _since(began), stop="no_rows_kept")
        console.rule(f"round {r}: SFT on {kept} row(s)")
        model = self.train(current.model, folder, r)
        success = self.evaluate(model, folder)
        stop = None
        if current.held_out_success is not None and success <= current.held_out_success:
            stop = "no_improvement"
            console.print(f"[yellow]round {r}: held-out success {success:.1%} is not above round "
                          f"{current.round}'s {current.held_out_success:.1%}; stopping, keeping round "
                          f"{current.round}'s model[/]")
        return RoundRecord(r, model, sampled, kept, success, _since(began), stop=stop)

    def _record(self, record: RoundRecord) -> RoundRecord:
        with self.log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(record)) + "\n")
        return record


def sample_demos(cfg: AjetConfig, tasks: Path, out: Path) -> dict[str, Any]:
    """`ajet generate demos` on `tasks` into `out` (resumes); its report. A seam tests replace."""
    from ajet.generate.demos import generate_demos

    return asyncio.run(generate_demos(cfg, tasks, out)).to_dict()


def best(done: list[RoundRecord]) -> RoundRecord:
    """The round whose model scored best on the held-out tasks (the earliest of equals)."""
    scored = [d for d in done if d.held_out_success is not None]
    return max(scored, key=lambda d: d.held_out_success)  # max returns the first of equals


def _with_references(path: Path) -> list[dict[str, Any]]:
    """The rows of a tasks file that carry a reference; a clear error when none does."""
    rows = read_rows(path)
    good = [r for r in rows if isinstance(r.get("answer"), dict) and r["answer"].get("calls")
            and "final" in r["answer"]]
    if not good:
        raise GenerateError(f"{path}: none of its {len(rows)} task(s) has a reference (answer: {{calls, final}}); "
                            "rounds keep the episodes that match it. Write call-first tasks with "
                            "`ajet generate tasks --from-calls calls.jsonl`")
    if len(good) < len(rows):
        console.print(f"[yellow]{path}: {len(rows) - len(good)} of {len(rows)} task(s) have no reference "
                      "(answer: {calls, final}) and are left out[/]")
    return good


def _without_gold(row: dict[str, Any]) -> dict[str, Any]:
    """The task without the gold calls' results, so `generate demos` samples it instead of building it."""
    meta = {k: v for k, v in (row.get("metadata") or {}).items() if k != "gold"}
    return {**row, "metadata": meta}


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _model_folder(model: str, folder: Path) -> str:
    """A model name or folder as is; a checkpoint or run folder merged into `folder` first."""
    from ajet.export.model_folder import model_folder

    folder.mkdir(parents=True, exist_ok=True)
    path = Path(model)
    return model_folder(str(path.resolve()) if path.exists() else model, folder)


def _ajet(args: list[str], name: str, log: Path) -> None:
    """`python -m ajet.cli ARGS` with its output in `log`; a failure raises BackboneError with its tail."""
    from ajet.backbone.launch import run_streaming

    console.print(f"{name}: log in {log}")
    run_streaming([sys.executable, "-m", "ajet.cli", *args], name=name, log_path=log, idle_timeout_s=None)


def _since(began: float) -> float:
    return round(time.monotonic() - began, 1)


def _print_table(done: list[RoundRecord]) -> None:
    table = Table(title="ajet generate rounds", show_header=True, header_style="bold")
    for column in ("round", "model", "sampled", "kept", "held-out success", "seconds", "stop"):
        table.add_column(column, justify="left" if column in ("model", "stop") else "right")
    for d in done:
        success = "-" if d.held_out_success is None else f"{d.held_out_success:.1%}"
        table.add_row(str(d.round), d.model, str(d.sampled), str(d.kept), success, f"{d.seconds:.0f}", d.stop or "")
    console.print(table)


def main(argv: list[str]) -> int:
    """`ajet generate rounds ...`; returns the exit code (errors are raised as AjetError)."""
    parser = argparse.ArgumentParser(prog="ajet generate rounds", description="Self-improvement rounds: sample k "
                                     "episodes per task with the current model, keep those that match the "
                                     "reference, SFT, evaluate on held-out tasks; stop when that stops improving.")
    parser.add_argument("--conf", metavar="YAML", required=True, help="the run's config (MCP server, training keys)")
    parser.add_argument("--tasks", metavar="JSONL", required=True, help="tasks with references (answer: {calls, "
                        "final}), e.g. from `ajet generate tasks --from-calls`")
    parser.add_argument("--rounds", type=int, required=True, metavar="N", help="most rounds (0: evaluate the start "
                        "model only)")
    parser.add_argument("--k", type=int, metavar="K", help="episodes per task and round (generate.rounds.attempts)")
    parser.add_argument("--model", metavar="START", help="start model: a model, folder, checkpoint or run folder "
                        "(default: model.path)")
    parser.add_argument("--heldout", metavar="JSONL", help="held-out tasks (with references); default: "
                        "generate.rounds.heldout_share of --tasks, split with generate.rounds.seed")
    parser.add_argument("--out", metavar="DIR", help="folder of the rounds; an existing one is resumed "
                        "(default: runs/<project>/rounds)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. model.path=tiny-random")
    args = parser.parse_intermixed_args(argv)
    if args.rounds < 0 or (args.k is not None and args.k < 1):
        parser.error("--rounds must be >= 0 and --k >= 1")
    out = Path(args.out) if args.out else None
    if out is None:
        from ajet.config.loader import load_config

        out = Path("runs") / load_config(args.conf, args.overrides).project / "rounds"
    Rounds(Path(args.conf), args.overrides, Path(args.tasks), out, rounds=args.rounds, k=args.k, start=args.model,
           heldout=Path(args.heldout) if args.heldout else None).run()
    return 0
