"""A small real run folder for the `ajet view` tests: one GRPO step of the tiny model through the
`ajet` CLI, with a workflow of three LLM calls (the third under another system prompt, so its sample
forks), a reward with parts and a penalty that differ between the episodes of a group (so the
advantages are not all zero), and validation (val_episodes.jsonl). Built once per test session."""

from __future__ import annotations

import json
import os
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


BOMB = "".join([f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10 if i else ["x"] * 10) + "]\n" for i in range(9)])


def hostile_episode(n: int, **extra) -> dict:
    return {"episode_id": f"e{n}", "group_id": "g1", "repeat": n, "step": 1, "reward": 0.5, "success": False,
            "task": {"task_id": f"t{n}", "query": f"question {n}"}, "answer": "x",
            "llm_calls": [{"index": 0, "prompt_ids": [1, 2], "completion_ids": [3], "logprobs": [-0.5]}], **extra}


def jsonl_text(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def build_hostile_folders(base: Path) -> dict[str, Path]:
    """Two run folders made to break `ajet view` (issue 41): `bad` holds one line of every kind that once
    gave a 500 among good lines (episodes, samples, metrics); `special` holds files that are not regular
    files inside the folder (a FIFO, a link to /dev/zero, a link out of the folder) and a YAML alias
    bomb as config.yaml."""
    bad = base / "bad"  # one line of every kind that once gave a 500, among good lines
    bad.mkdir()
    deep = '{"episode_id": "deep", "metadata": ' + "[" * 990 + "]" * 990 + "}"
    (bad / "episodes.jsonl").write_text(jsonl_text(
        hostile_episode(1), "[" * 100_000, hostile_episode(3), deep,
        hostile_episode(5, llm_calls=[{"index": 0, "prompt_ids": ["x"], "completion_ids": [3]}]),
        '{"episode_id": "e6", "group_id": "g1", "llm_calls": [{"index": 0, "prompt_ids": [Infinity]}]}',
        hostile_episode(7, tool_calls=5), hostile_episode(8, llm_calls={"a": 1}), hostile_episode(9)))
    (bad / "samples.jsonl").write_text(jsonl_text(
        {"episode_id": "e1", "index": [9], "input_ids": [1, 2, 3], "loss_mask": [0, 0, 1]},
        {"episode_id": "e1", "index": 0, "input_ids": 5, "loss_mask": [0]},
        {"episode_id": "e1", "index": 1, "input_ids": [1, 2, 3], "loss_mask": [0, 1, 1], "advantage": 0.5}))
    (bad / "metrics.jsonl").write_text(jsonl_text({"step": 1, "reward_mean": 0.5}, "{" * 50_000, {"step": 2, "reward_mean": 1}))
    (bad / "config.yaml").write_text("ajet:\n  model: {path: tiny-random}\n")

    special = base / "special"  # files that are not regular files inside the folder
    special.mkdir()
    os.mkfifo(special / "episodes.jsonl")
    os.symlink("/dev/zero", special / "val_episodes.jsonl")
    outside = base / "outside.jsonl"
    outside.write_text(jsonl_text(hostile_episode(1)))
    os.symlink(outside, special / "eval_episodes.jsonl")
    (special / "metrics.jsonl").write_text(jsonl_text({"step": 1}))
    (special / "config.yaml").write_text(BOMB)
    return {"bad": bad, "special": special}
