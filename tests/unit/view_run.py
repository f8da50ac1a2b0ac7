"""A small real run folder for the `ajet view` tests: one GRPO step of the tiny model through the
`ajet` CLI, with a workflow of three LLM calls (the third under another system prompt, so its sample
forks), a reward with parts and a penalty that differ between the episodes of a group (so the
advantages are not all zero), and validation (val_episodes.jsonl). Built once per test session."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.e2e.serve_process import stop, wait_ready

ROOT = Path(__file__).resolve().parents[2]

WORKFLOW = '''
from ajet import Reward, Workflow, WorkflowOutput


class ThreeCalls(Workflow):
    async def execute(self, task, tuner):
        client = tuner.openai_client(agent="assistant")
        messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": task.query}]
        for follow_up in ("Check it again.", None):
            reply = await client.chat.completions.create(model=tuner.model, messages=messages)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
            if follow_up:
                messages.append({"role": "user", "content": follow_up})
        other = [{"role": "system", "content": "You are a careful checker."}, {"role": "user", "content": task.query}]
        check = await client.chat.completions.create(model=tuner.model, messages=other)
        answer = check.choices[0].message.content or ""
        length = len(answer) % 7 / 6
        penalty = -0.5 if "e" in answer else 0.0
        return WorkflowOutput(answer=answer, messages=messages + [{"role": "assistant", "content": answer}],
                              reward=Reward(total=length + penalty, parts={"length": length, "penalty.letter_e": penalty}))
'''
CONFIG = """ajet:
  project: viewtest
  model: {path: tiny-random}
  workflow: three_calls.py:ThreeCalls
  task_reader: {type: jsonl, train: train.jsonl, val: val.jsonl}
  judge: {type: exact_match}
  algorithm: grpo
  rollout: {group_size: 2, batch_tasks: 2, max_turns: 3, max_tokens_per_turn: 8, temperature: 1.0}
  trainer: {steps: 1, eval_every: 1}
  eval: {limit: 2}
"""
_built: dict[str, Path] = {}


def build_view_run(base: Path) -> Path:
    """The run folder (base/run); the first call of a session trains, later calls copy nothing."""
    if "run" in _built:
        return _built["run"]
    base.mkdir(parents=True, exist_ok=True)
    (base / "three_calls.py").write_text(WORKFLOW)
    (base / "view.yaml").write_text(CONFIG)
    rows = [{"task_id": f"t{i}", "query": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
    for name in ("train.jsonl", "val.jsonl"):
        (base / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = base / "run"
    proc = subprocess.run([sys.executable, "-m", "ajet.cli", "--conf", str(base / "view.yaml"), f"output_dir={run}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    _built["run"] = run
    return run


def build_eval_folder(base: Path) -> Path:
    """An `ajet eval` output folder (eval_episodes.jsonl, eval.json) of the same workflow."""
    if "eval" in _built:
        return _built["eval"]
    base = build_view_run(base).parent  # the session's run may have been made under another test's folder
    out = base / "eval"
    proc = subprocess.run([sys.executable, "-m", "ajet.cli", "eval", "--conf", str(base / "view.yaml"),
                           f"output_dir={out}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    _built["eval"] = out
    return out


def copy_run(run: Path, to: Path) -> Path:
    """A copy a test may append to or damage without touching the shared run."""
    shutil.copytree(run, to, ignore=shutil.ignore_patterns("checkpoints", "tensorboard"))
    return to


@contextmanager
def ajet_view(run_dirs: list[Path], log: Path, *extra: str) -> Iterator[str]:
    """`ajet view RUN_DIR... --port 0 --no-browser [extra...]` in a subprocess; yields the address it prints
    (once /api/runs answers, or asks for the key) and stops the process at the end."""
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ajet.cli", "view", *map(str, run_dirs), "--port", "0",
                                 "--no-browser", *extra], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    found: list[str] = []

    def ready() -> bool:  # the address is in the log once the server is up; then /api/runs must answer
        match = re.search(r"ajet view: (http://127\.0\.0\.1:\d+/)", log.read_text())
        if match and not found:
            found.append(match.group(1))
        return bool(found) and httpx.get(found[0] + "api/runs", timeout=5).status_code in (200, 401)

    try:
        wait_ready(proc, log, ready, "ajet view", poll_s=0.1)
        yield found[0]
    finally:
        stop(proc)
