"""What RL adds over SFT, per task, measured so that the answer can be told from noise.

For one task: SFT alone, then RL (GRPO by default) from that same SFT checkpoint with two or more
training seeds; SFT and every RL seed are evaluated on the same held-out tasks (at least 100, none in
train or val, committed before any run judged them), by the task's success measure (measures.py:
never a reward with format credit). The gain is the paired difference over tasks, with a bootstrap
95% interval (paired.py); a task counts as one RL improved only when the interval's lower end is
above 0. Each result is appended, with the commit and the CPU, to benchmarks/results/rl_gain.jsonl.

    python benchmarks/rl_gain.py --task countdown                  # one task, well under an hour on 2 cores
    python benchmarks/rl_gain.py --task countdown --seeds 1 2 3 --with-base
    python benchmarks/rl_gain.py --task countdown --quick          # tiny sizes: a smoke test of the whole path
    python benchmarks/rl_gain.py --summary                         # the table of the latest result per task
    python benchmarks/rl_gain.py --task countdown --set trainer.lr=5e-5 --set grpo.baseline=leave_one_out
    python benchmarks/rl_gain.py --task tool_agent --compare runs/grpo runs/ppo   # two RL arms, one SFT start

Tasks (`--list`): TASKS below, each a folder whose benchmark.json has `conf`, `measure`, optional `also`
(more measures to report) and an `rl_gain` section:

    "rl_gain": {"heldout": "heldout.jsonl",           # the held-out tasks, relative to the folder
                "sft": [...], "rl": [...],            # overrides of the SFT run and of each RL run
                "eval": [...]}                        # overrides of every eval (e.g. a sampling temperature)

To add a task (an MCP-zoo server, ...), give its folder such a benchmark.json and a line in TASKS, or
pass `--task path/to/folder`. `--work DIR` reuses a work folder: finished phases (a trained run, a
merged model, an eval.json) are not run again, so an interrupted task resumes where it stopped. Each run
records its command (`<phase>.command.json`); a reused phase is named, with the arguments its recorded
command lacked (-) or added (+), on stderr and under `reused` in the result row. A finished RL run asked
for more steps (`--set trainer.steps=24` over a 16-step work folder, nothing else changed) is extended
with `ajet --resume` instead of trained again; its eval is redone and the shorter run's kept beside it
(`eval-rl-seed1-step16`). `--heldout FILE` scores the same runs on another held-out file of the task's folder
(a fresh set, to confirm an arm chosen on the first); `--pool FILE ...` then scores them over several such files
at once (`--work DIR --pool heldout.jsonl heldout2.jsonl`: one paired interval over all their tasks).

Every run is a subprocess of the installed CLI (`ajet`, `ajet export`, `ajet eval`), as a user runs them.
Last line: `rl_gain_points_mean=<mean gain over tasks, in points> tasks_with_gain=<k>/<n>`, over each
task's latest result with its own settings (benchmark.json); results of --set variants are listed under
their task, not counted: a setting that pays goes into benchmark.json and is measured again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import measures
import provenance
from ajet.config import load_config
from ajet.jsonl import read_rows
from ajet.task_reader import read_tasks
from paired import gain
from quickstart import cpu_flags

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "rl_gain.jsonl"
QUICK_RESULTS = REPO / "benchmarks" / "results" / "rl_gain_quick.jsonl"
TASKS = {
    "tool_agent": "tutorial/example_tool_agent",
    "frozenlake": "tutorial/example_frozenlake",
    "appworld": "tutorial/example_appworld",
    "werewolves": "tutorial/example_werewolves",
    "learn_to_ask": "tutorial/example_learn_to_ask",
    "countdown": "tutorial/example_countdown",
    "math_agent": "tutorial/example_math_agent",
    "function_calling": "tutorial/example_function_calling",
    "math_python": "tutorial/example_math_python",
}
# --quick: a few steps and evals of a few tasks, to check the path end to end in minutes
QUICK = {"sft": ["sft.epochs=0.1"], "rl": ["trainer.steps=1", "rollout.batch_tasks=2", "rollout.group_size=2"],
         "eval": ["eval.limit=6"]}


def task_spec(name: str) -> tuple[str, Path, dict[str, Any]]:
    """(name, folder, benchmark.json) of a task named in TASKS or given as a folder."""
    folder = REPO / TASKS[name] if name in TASKS else Path(name).resolve()
    spec_file = folder / "benchmark.json"
    if not spec_file.is_file():
        sys.exit(f"unknown task {name!r}: not one of {', '.join(TASKS)}, and {spec_file} does not exist")
    spec = json.loads(spec_file.read_text())
    if "rl_gain" not in spec:
        sys.exit(f"{spec_file} has no rl_gain section (heldout, sft, rl, eval)")
    measures.check(spec["measure"])
    for key in spec.get("also", []):
        measures.check(key)
    return (name if name in TASKS else folder.name), folder, spec


def _run(command: list[str], log: Path, append: bool = False) -> None:
    """One CLI run, its output in `log` (after what it holds, with `append`) and its command in
    `<log>.command.json` (what a later --work reuse compares); a failure stops the task with the log's tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    log.with_suffix(".command.json").write_text(json.dumps(command))
    with log.open("a" if append else "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        sys.exit(f"{' '.join(command)} failed (exit {done.returncode}); {log}:\n{tail}")


def _differs(out: Path, command: list[str]) -> list[str]:
    """The arguments the recorded command of a finished phase lacked (-) or added (+) against `command`."""
    recorded = out.with_suffix(".command.json")
    if not recorded.is_file():
        return ["its command was not recorded"]
    before = [a for a in json.loads(recorded.read_text()) if a != "--resume"]
    # a folder copied in from another work folder names that folder in its paths: compare with it as this one
    ran_in = next((Path(a.split("=", 1)[1]).parent for a in before if a.startswith("output_dir=")), None)
    if ran_in is not None and ran_in != out.parent:
        before = [a.replace(str(ran_in), str(out.parent)) for a in before]
    return [f"-{a}" for a in before if a not in command] + [f"+{a}" for a in command if a not in before]


def _reuse(out: Path, differs: list[str], reused: dict[str, list[str]]) -> None:
    """A finished phase of a --work folder is reused, not run again: say so, with the arguments its recorded
    command differs by (a checkpoint copied in from another variant is a choice, a stale one from other
    settings is a mistake; either way the result row names it): `reused` gets folder name -> `differs`."""
    reused[out.name] = differs
    print(f"rl_gain: reusing {out}" + (f" (differs: {' '.join(differs)})" if differs else ""), file=sys.stderr)


def _steps(command: list[str]) -> int | None:
    """The last `trainer.steps=N` of a command (a --set after the task's own wins), else None."""
    steps = [a.split("=", 1)[1] for a in command if a.startswith("trainer.steps=")]
    return int(steps[-1]) if steps else None


def _seed_evals(work: Path, tag: str) -> dict[int, Path]:
    """seed -> its latest eval's episodes file in `work` (`eval-rl-seedN<tag>`; not an eval kept beside from a
    shorter run, `eval-rl-seedN-step16<tag>`), by seed."""
    found = {}
    for d in work.iterdir():
        m = re.fullmatch(rf"eval-rl-seed(\d+){re.escape(tag)}", d.name)
        if m and (d / "eval_episodes.jsonl").is_file():
            found[int(m.group(1))] = d / "eval_episodes.jsonl"
    return dict(sorted(found.items()))


def _eval_tag(heldout_file: str | None) -> str:
    """What eval folders on a held-out file other than benchmark.json's end with: `-heldout2`."""
    return f"-{Path(heldout_file).stem}" if heldout_file else ""


def _train(conf: Path, out: Path, overrides: list[str], reused: dict[str, list[str]],
           extend: bool = False) -> int | None:
    """Train into `out`, or reuse it when it is finished. With `extend` (RL runs, whose length is
    `trainer.steps`), a finished run whose command differs only by a larger `trainer.steps` is extended
    (`ajet --resume`: its data order, optimizer and seeds go on) rather than trained again from the start;
    returns the step it was extended from, else None."""
    command = ["ajet", "--conf", str(conf), "--backbone=debug", f"output_dir={out}", *overrides]
    if not (out / "checkpoints").is_dir():
        _run(command, out.with_suffix(".log"))
        return None
    from ajet.trainer.checkpoint import list_checkpoints  # torch: not for --summary

    differs = _differs(out, command)
    saved, asked = list_checkpoints(out), _steps(command)
    done = saved[-1][0] if saved else None
    if (extend and differs and done is not None and asked is not None and asked > done
            and all(a.lstrip("+-").startswith("trainer.steps=") for a in differs)):
        print(f"rl_gain: extending {out} from step {done} to {asked}", file=sys.stderr)
        _run([*command[:3], "--resume", *command[3:]], out.with_suffix(".log"), append=True)
        reused[out.name] = [f"extended from step {done}", *differs]
        return done
    _reuse(out, differs, reused)
    return None


def _keep_evals_of_step(work: Path, seed: int, step: int) -> None:
    """A run just extended past `step`: its evals (on any held-out file, with their logs) are of the shorter
    run; keep them beside, under that step (`eval-rl-seed1-step16`), so the longer run is evaluated afresh."""
    own = re.compile(rf"eval-rl-seed{seed}(?!\d)(?!-step\d)")
    for path in sorted(work.iterdir()):
        if own.match(path.name):
            path.rename(work / path.name.replace(f"seed{seed}", f"seed{seed}-step{step}", 1))


def _merged(run: Path, out: Path) -> Path:
    if not (out / "config.json").is_file():
        _run(["ajet", "export", "--checkpoint", str(run), "--out", str(out), "--merge"], out.with_suffix(".log"))
    return out


def _eval(conf: Path, out: Path, overrides: list[str], model: Path | None,
          reused: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The held-out episodes of one model (None: the YAML's own model)."""
    command = ["ajet", "eval", "--conf", str(conf), f"output_dir={out}", *overrides]
    if model is not None:
        command[2:2] = ["--model", str(model)]
    if (out / "eval.json").is_file():
        _reuse(out, _differs(out, command), reused)
    else:
        _run(command, out.with_suffix(".log"))
    return read_rows(out / "eval_episodes.jsonl")


def per_task(episodes: list[dict[str, Any]], key: str) -> dict[str, float]:
    """task id -> the measure, averaged over the task's episodes that reported it."""
    values: dict[str, list[float]] = {}
    for episode in episodes:
        value = measures.from_episode(episode, key)
        if value is not None:
            values.setdefault(episode["task"]["task_id"], []).append(value)
    return {t: sum(v) / len(v) for t, v in values.items()}


def read_heldout(folder: Path, spec: dict[str, Any], file: str | None = None) -> list[dict[str, Any]]:
    """The held-out tasks of `file` (benchmark.json's by default) as the evals read them: through the task's
    own reader (an ajet JSONL file, or an xLAM file for function_calling), so that the ids are the episodes'."""
    cfg = load_config(folder / spec["conf"], [f"task_reader.val={folder / (file or spec['rl_gain']['heldout'])}",
                                              *spec["rl_gain"].get("eval", [])])
    return [task.model_dump() for task in read_tasks(cfg.task_reader, "val", cfg.base_dir).tasks]


def heldout_clusters(rows: list[dict[str, Any]]) -> dict[str, str]:
    """task id -> the cluster the bootstrap resamples whole (metadata.cluster; else the task itself)."""
    return {r["task_id"]: (r.get("metadata") or {}).get("cluster", r["task_id"]) for r in rows}


def measure_task(name: str, folder: Path, spec: dict[str, Any], seeds: list[int], work: Path, *, quick: bool,
                 with_base: bool, extra: list[str], note: str = "", heldout_file: str | None = None) -> dict[str, Any]:
    """SFT, RL per seed, the evals, and the paired gain of one task: the row rl_gain.jsonl gets. With
    `heldout_file` (a file of the task's folder) the models are scored on it instead of benchmark.json's
    held-out set, into eval folders named after it (`eval-sft-heldout2`), the trained runs reused."""
    conf = folder / spec["conf"]
    section = spec["rl_gain"]
    heldout = folder / (heldout_file or section["heldout"])
    if not heldout.is_file():
        sys.exit(f"rl_gain: no held-out file {heldout}")
    tag = _eval_tag(heldout_file)
    pick = lambda part: [*section.get(part, []), *(QUICK[part] if quick else []), *extra]  # noqa: E731
    evals = [f"task_reader.val={heldout}", *pick("eval")]
    keys = [spec["measure"], *spec.get("also", [])]
    started, commit = time.time(), provenance.commit()  # the code the runs start with
    phases: dict[str, float] = {}

    def timed(phase: str, fn, *args):
        t0 = time.time()
        out = fn(*args)
        phases[phase] = phases.get(phase, 0.0) + (time.time() - t0) / 60
        return out

    arms: dict[str, list[dict[str, Any]]] = {}
    reused: dict[str, list[str]] = {}  # phases taken from --work, with how their commands differ (kept in the row)
    sft_overrides = [*pick("sft"), "algorithm=sft", "trainer.seed=0"]
    rl_overrides = ["algorithm=grpo", *pick("rl")]  # grpo unless the task's rl overrides name another algorithm
    if with_base:
        arms["base"] = timed("eval", _eval, conf, work / f"eval-base{tag}", evals, None, reused)
    timed("sft", _train, conf, work / "sft", sft_overrides, reused)
    sft_model = timed("export", _merged, work / "sft", work / "sft-model")
    arms["sft"] = timed("eval", _eval, conf, work / f"eval-sft{tag}", evals, sft_model, reused)
    for seed in seeds:
        run = work / f"rl-seed{seed}"
        # the start and the seeds are this script's, whatever --set says
        rl_run = [*rl_overrides, f"model.path={sft_model}", f"trainer.seed={seed}", f"engine.seed={seed}"]
        extended_from = timed("rl", _train, conf, run, rl_run, reused, True)
        if extended_from is not None:
            _keep_evals_of_step(work, seed, extended_from)
        arms[f"rl{seed}"] = timed("eval", _eval, conf, work / f"eval-rl-seed{seed}{tag}", evals, run, reused)

    heldout_rows = read_heldout(folder, spec, heldout_file)
    clusters = heldout_clusters(heldout_rows)
    by_key = {key: {arm: per_task(episodes, key) for arm, episodes in arms.items()} for key in keys}
    main = by_key[spec["measure"]]
    result = gain(main["sft"], [main[f"rl{s}"] for s in seeds], clusters)
    cpu, flags = cpu_flags()
    row = {
        "task": name, "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "commit": commit, "cpu": cpu,
        "cpu_flags": flags, "quick": quick, "measure": spec["measure"], "heldout_tasks": len(heldout_rows),
        "tasks": result.tasks, "clusters": result.clusters, "seeds": seeds,
        "sft": round(result.sft, 4), "rl": [round(v, 4) for v in result.rl],
        "gain_points": round(100 * result.mean, 2), "ci_low": round(100 * result.low, 2),
        "ci_high": round(100 * result.high, 2), "gain_per_seed": [round(100 * g, 2) for g in result.per_seed],
        "significant": result.significant,
        "also": {key: {arm: _mean(values.values()) for arm, values in by_key[key].items()} for key in keys[1:]},
        "overrides": {"sft": sft_overrides, "rl": rl_overrides, "eval": evals},
        "minutes": round((time.time() - started) / 60, 1), "phase_minutes": {k: round(v, 1) for k, v in phases.items()},
        "work": str(work), "note": note, "set": extra,
    }
    if reused:
        row["reused"] = reused
    if heldout_file:
        row["heldout_file"] = heldout_file
    if with_base:
        row["base"] = round(_mean(main["base"].values()), 4)
    return row


def checkpoint_digest(model: Path) -> str | None:
    """sha256 over a model folder's weight files (names and bytes), or None when it holds none."""
    files = sorted(model.glob("*.safetensors")) + sorted(model.glob("*.bin"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 24), b""):
                digest.update(block)
    return digest.hexdigest()


def compare_arms(name: str, folder: Path, spec: dict[str, Any], work_a: Path, work_b: Path,
                 heldout_file: str | None = None) -> dict[str, Any]:
    """Arm B's RL seeds against arm A's on the held-out tasks (benchmark.json's, or `heldout_file`), paired task by
    task: both work folders must have trained from the same SFT checkpoint (the same weights in sft-model/), so
    that only the RL differs. Each seed's latest eval counts, not one kept beside from a shorter run."""
    digests = {work: checkpoint_digest(work / "sft-model") for work in (work_a, work_b)}
    if None in digests.values() or len(set(digests.values())) != 1:
        found = ", ".join(f"{work}: {(digest or str(None))[:12]}" for work, digest in digests.items())
        raise SystemExit(f"--compare: {work_a} and {work_b} did not start from the same SFT checkpoint (sft-model/ "
                         f"weights: {found}); copy one folder's sft, sft-model and eval-sft into the other's first")
    key = spec["measure"]
    seeds: dict[Path, list[dict[str, float]]] = {}
    for work in (work_a, work_b):
        evals = list(_seed_evals(work, _eval_tag(heldout_file)).values())
        if len(evals) < 2:
            raise SystemExit(f"--compare: {work} has {len(evals)} evaluated RL seeds (eval-rl-seed*/), "
                             "at least 2 needed")
        seeds[work] = [per_task(read_rows(path), key) for path in evals]
    clusters = heldout_clusters(read_heldout(folder, spec, heldout_file))
    arm_a = seeds[work_a]
    common = set.intersection(*(set(s) for s in arm_a + seeds[work_b]))  # tasks every seed of both arms scored
    baseline = {t: sum(s[t] for s in arm_a) / len(arm_a) for t in common}  # A's seeds averaged, task by task
    result = gain(baseline, seeds[work_b], clusters)
    return {"task": name, "measure": key, "a": str(work_a), "b": str(work_b), "tasks": result.tasks,
            "a_rl": [_mean(s[t] for t in common) for s in arm_a], "b_rl": [round(v, 4) for v in result.rl],
            "points": round(100 * result.mean, 2), "ci_low": round(100 * result.low, 2),
            "ci_high": round(100 * result.high, 2), "per_seed": [round(100 * g, 2) for g in result.per_seed],
            "significant": result.significant}


def pool_heldout(name: str, folder: Path, spec: dict[str, Any], work: Path, files: list[str]) -> dict[str, Any]:
    """A work folder's SFT and RL seeds on several held-out files of the task at once (their evals as rl_gain
    made them: `eval-sft-heldout2`, each seed's latest `eval-rl-seedN-heldout2`), paired task by task over
    all of them: one interval over every held-out task, not one per file. Each file's tasks keep their own
    clusters; the files must not share a task id."""
    key, own_file = spec["measure"], spec["rl_gain"]["heldout"]
    sft: dict[str, float] = {}
    seeds: dict[int, dict[str, float]] = {}
    clusters: dict[str, str] = {}
    per_file: dict[str, dict[str, Any]] = {}
    for file in files:
        tag = _eval_tag(None if file == own_file else file)
        rows = read_heldout(folder, spec, file)
        shared = {r["task_id"] for r in rows} & clusters.keys()
        if shared:
            raise SystemExit(f"--pool: {file} repeats task ids of the files before it ({sorted(shared)[:3]} ...)")
        clusters.update({t: f"{file}:{c}" for t, c in heldout_clusters(rows).items()})
        evaluated = _seed_evals(work, tag)
        sft_eval = work / f"eval-sft{tag}" / "eval_episodes.jsonl"
        if not sft_eval.is_file() or len(evaluated) < 2:
            raise SystemExit(f"--pool: {work} lacks the evals of {file} (eval-sft{tag}/ and at least 2 "
                             f"eval-rl-seedN{tag}/; found {len(evaluated)} RL seeds): run rl_gain with --heldout "
                             f"{file} first")
        if seeds and sorted(evaluated) != sorted(seeds):
            raise SystemExit(f"--pool: {file} was scored with RL seeds {sorted(evaluated)}, the files before it "
                             f"with {sorted(seeds)}")
        file_sft = per_task(read_rows(sft_eval), key)
        file_rl = {seed: per_task(read_rows(path), key) for seed, path in evaluated.items()}
        part = gain(file_sft, [file_rl[s] for s in sorted(file_rl)], heldout_clusters(rows))
        per_file[file] = {"tasks": part.tasks, "sft": round(part.sft, 4), "rl": [round(v, 4) for v in part.rl],
                          "points": round(100 * part.mean, 2)}
        sft.update(file_sft)
        for seed, values in file_rl.items():
            seeds.setdefault(seed, {}).update(values)
    result = gain(sft, [seeds[s] for s in sorted(seeds)], clusters)
    return {"task": name, "measure": key, "work": str(work), "files": per_file, "tasks": result.tasks,
            "sft": round(result.sft, 4), "rl": [round(v, 4) for v in result.rl],
            "points": round(100 * result.mean, 2), "ci_low": round(100 * result.low, 2),
            "ci_high": round(100 * result.high, 2), "per_seed": [round(100 * g, 2) for g in result.per_seed],
            "significant": result.significant}


def _mean(values) -> float | None:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else None


def _verdict(row: dict[str, Any]) -> str:
    """What the interval says, when it is not a gain: it reaches 0, or it lies wholly below (a loss)."""
    if row["significant"]:
        return ""
    return "  (a loss: the interval is below 0)" if row["ci_high"] < 0 else "  (interval reaches 0)"


def latest_results(rows: list[dict[str, Any]]) -> dict[tuple[str, tuple[str, ...]], dict[str, Any]]:
    """The newest row per (task, variant); a variant is its --set overrides and a held-out file other than
    benchmark.json's, and the variant () is the task's own settings, the row the summary counts."""
    latest: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    for row in rows:
        variant = [f"--set {a}" for a in row.get("set", [])]
        latest[(row["task"], tuple(variant + ([f"--heldout {row['heldout_file']}"] if row.get("heldout_file") else [])))] = row
    return latest


def summary(path: Path) -> tuple[float, int, int]:
    """Print, per task, the latest result with the task's own settings and the latest of each --set variant
    below it; return (mean gain in points, tasks with gain, tasks) over the own-settings results only."""
    latest = latest_results(read_rows(path))
    print(f"{'task':14} {'measure':34} {'n':>4} {'sft':>6} {'sft+rl':>13} {'gain (points) [95% CI]':>26} "
          f"{'seeds':>5} {'min':>5}  commit / cpu")
    for (task, variant), row in sorted(latest.items(), key=lambda item: (item[0][0], len(item[0][1]), item[0][1])):
        rl = "/".join(f"{v:.3f}" for v in row["rl"])
        interval = f"{row['gain_points']:+.1f} [{row['ci_low']:+.1f}, {row['ci_high']:+.1f}]"
        print(f"{task if not variant else '':14} {row['measure']:34} {row['tasks']:4d} {row['sft']:6.3f} {rl:>13} "
              f"{interval:>26} {len(row['seeds']):5d} {row['minutes']:5.0f}  {row['commit']} / {row['cpu']}"
              + _verdict(row))
        if variant:
            print(f"{'':14}   variant (not counted below): {' '.join(variant)}")
        if row.get("note"):
            print(f"{'':14}   note: {row['note']}")
        for key, arms in row.get("also", {}).items():
            print(f"{'':14}   also {key}: " + ", ".join(f"{a} {v:.3f}" for a, v in arms.items() if v is not None))
    own = [row for (_, variant), row in latest.items() if not variant]
    mean = sum(row["gain_points"] for row in own) / len(own) if own else 0.0
    return mean, sum(row["significant"] for row in own), len(own)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", help=f"one of {', '.join(TASKS)}, or a folder with a benchmark.json")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="RL training seeds (at least 2)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, results kept apart (rl_gain_quick.jsonl)")
    parser.add_argument("--with-base", action="store_true", help="also evaluate the base model on the held-out tasks")
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE",
                        help="an override for every run (repeatable), e.g. --set model.path=tiny-random")
    parser.add_argument("--work", type=Path, help="work folder (default: runs/rl_gain/TASK/TIME); reused if it exists")
    parser.add_argument("--out", type=Path, help="results file (default: benchmarks/results/rl_gain.jsonl)")
    parser.add_argument("--heldout", metavar="FILE",
                        help="score on this file of the task's folder instead of benchmark.json's held-out set "
                             "(a fresh set that confirms an arm chosen on the first); trained runs are reused")
    parser.add_argument("--note", default="", help="kept with the result, e.g. 'machine shared, load ~10'")
    parser.add_argument("--summary", action="store_true", help="print the table of the results file")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("WORK_A", "WORK_B"),
                        help="with --task: B's RL seeds against A's, two work folders trained from one SFT checkpoint")
    parser.add_argument("--pool", nargs="+", metavar="FILE",
                        help="with --task and --work: the work folder's SFT and RL seeds scored over these held-out "
                             "files together (their evals already made), one paired interval over all their tasks")
    parser.add_argument("--list", action="store_true", help="list the tasks")
    args = parser.parse_args(argv)
    out = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    if args.list:
        for name, folder in TASKS.items():
            print(f"{name:14} {folder}")
        return
    if args.compare:
        if not args.task:
            parser.error("--compare needs --task (its measure and held-out set)")
        name, folder, spec = task_spec(args.task)
        row = compare_arms(name, folder, spec, *args.compare, heldout_file=args.heldout)
        print(json.dumps(row))
        print(f"compare_points={row['points']:+.1f} ci=[{row['ci_low']:+.1f}, {row['ci_high']:+.1f}] "
              f"a={'/'.join(f'{v:.3f}' for v in row['a_rl'])} b={'/'.join(f'{v:.3f}' for v in row['b_rl'])} "
              f"tasks={row['tasks']}")
        return
    if args.pool:
        if not (args.task and args.work):
            parser.error("--pool needs --task (its measure) and --work (the folder whose evals it pools)")
        name, folder, spec = task_spec(args.task)
        row = pool_heldout(name, folder, spec, args.work, args.pool)
        print(json.dumps(row))
        print(f"pooled_points={row['points']:+.1f} ci=[{row['ci_low']:+.1f}, {row['ci_high']:+.1f}] "
              f"sft={row['sft']:.3f} rl={'/'.join(f'{v:.3f}' for v in row['rl'])} tasks={row['tasks']}")
        return
    if args.task:
        if len(args.seeds) < 2 and not args.quick:
            parser.error("--seeds: at least 2 training seeds (one seed cannot tell RL from its luck)")
        name, folder, spec = task_spec(args.task)
        work = args.work or REPO / "runs" / "rl_gain" / name / time.strftime("%Y%m%d-%H%M%S")
        row = measure_task(name, folder, spec, args.seeds, work, quick=args.quick, with_base=args.with_base,
                           extra=args.extra, note=args.note, heldout_file=args.heldout)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    elif not args.summary:
        parser.error("give --task NAME, --summary or --list")
    mean, with_gain, n = summary(out)
    print(f"rl_gain_points_mean={mean:.1f} tasks_with_gain={with_gain}/{n}")


if __name__ == "__main__":
    main()
