"""A run's data stays whole on the debug backbone (tiny model): --resume continues exactly the run it is
pointed at and refuses a config that would train differently; a judge returning NaN never reaches the
weights; non-finite updates are skipped and, N in a row, stop the run with exit code 1; a resumed run
does not keep the interrupted step's episodes twice; `ajet eval` survives workflows that cancel
themselves, exit or swallow their cancellation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ajet.backbone.registry import run_backbone as run
from ajet.config.loader import load_config
from ajet.errors import CheckpointError

ROOT = Path(__file__).resolve().parents[2]

FLOW = '''
import asyncio, os, sys
from ajet import Judge, Workflow, WorkflowOutput


class Ask(Workflow):
    async def execute(self, task, tuner):
        while os.path.exists(os.environ.get("HOLD_FILE", "/nonexistent")):  # a test keeps the run going
            await asyncio.sleep(0.05)
        if task.query == "cancel":
            raise asyncio.CancelledError()
        if task.query == "exit":
            sys.exit(1)
        if task.query == "swallow":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                pass
            return WorkflowOutput(answer="sneaky", reward=1.0)
        client = tuner.openai_client()
        r = await client.chat.completions.create(model=tuner.model, messages=[{"role": "user", "content": task.query}])
        return WorkflowOutput(answer=r.choices[0].message.content)


class LengthJudge(Judge):
    """Reward by answer length; NaN for tasks marked nan (a broken judge)."""

    async def score(self, task, output):
        if task.metadata.get("nan"):
            return float("nan")
        return len(output.answer or "") / 20


class HugeJudge(Judge):
    """Finite but huge rewards for the tasks marked nan: 1e308 and -1e308 in one group."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    async def score(self, task, output):
        if task.metadata.get("nan"):
            self.calls += 1
            return 1e308 if self.calls % 2 else -1e308
        return len(output.answer or "") / 20


class Rewrite(Ask):
    """Rewrites its Task (answer, query, nested metadata) to make the judge pass it."""

    async def execute(self, task, tuner):
        seen = [task.query, task.answer, dict(task.metadata.get("deep") or {})]
        output = await super().execute(task, tuner)
        task.answer = output.answer
        task.query = "changed"
        task.metadata.setdefault("deep", {"n": 0})["n"] += 1
        output.metadata["seen"] = seen
        return output


class AnswerJudge(Judge):
    async def score(self, task, output):
        return float(output.answer == task.answer)
'''


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "flow.py").write_text(FLOW)
    rows = [{"query": f"Say something about {w}.", "nan": w in ("oil", "coal")} for w in ("gas", "oil", "wind", "coal")]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    conversations = [{"messages": [{"role": "user", "content": f"Price {i}?"}, {"role": "assistant", "content": f"{i} USD."}]}
                     for i in range(8)]
    (tmp_path / "sft.jsonl").write_text("".join(json.dumps(c) + "\n" for c in conversations))
    (tmp_path / "run.yaml").write_text(textwrap.dedent("""
        ajet:
          project: safety
          model: {path: tiny-random}
          workflow: flow.py:Ask
          task_reader: {type: jsonl, train: train.jsonl, val: train.jsonl}
          judge: {type: flow.py:LengthJudge}
          algorithm: grpo
          sft: {data: sft.jsonl, batch_size: 2}
          rollout: {group_size: 2, batch_tasks: 2, max_tokens_per_turn: 6, max_turns: 2, episode_timeout_s: 3}
          trainer: {steps: 2, save_every: 1, lr: 0.001, seed: 3}
    """))
    return tmp_path


def _cfg(project: Path, *overrides: str):
    return load_config(project / "run.yaml", list(overrides))


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _finite(run_dir: Path) -> bool:
    for ckpt in (run_dir / "checkpoints").glob("step-*"):
        for tensor in load_file(ckpt / "adapter" / "adapter_model.safetensors").values():
            if not torch.isfinite(tensor).all():
                return False
    return True


def test_resume_continues_exactly_its_run_and_refuses_a_config_that_trains_differently(project, capsys):
    a, b = project / "runs" / "A", project / "runs" / "B"
    run(_cfg(project, f"output_dir={a}", "trainer.steps=1", "rollout.group_size=1"))
    run(_cfg(project, f"output_dir={b}", "trainer.steps=1", "rollout.group_size=1"))  # a newer sibling
    b_config = (b / "config.yaml").read_bytes()

    with pytest.raises(CheckpointError) as refused:  # lr and group size change what is trained
        run(_cfg(project, f"output_dir={a}", "trainer.steps=2", "trainer.lr=0.01"), resume=True)
    message = str(refused.value)
    assert f"the config differs from the one {a / 'checkpoints' / 'step-000001'} was trained with" in message
    assert "  rollout.group_size: 1 → 2\n  trainer.lr: 0.001 → 0.01\n" in message
    assert "add 'trainer.resume_accept=[rollout.group_size,trainer.lr]'" in message

    capsys.readouterr()
    result = run(_cfg(project, f"output_dir={a}", "trainer.steps=2", "rollout.group_size=1"), resume=True)
    out = capsys.readouterr().err
    assert f"resumed from {a / 'checkpoints' / 'step-000001'}" in out.replace("\n", "")
    assert "resume: config changed: trainer.steps: 1 → 2" in out  # fine: a longer run trains the same way
    assert result["run_dir"] == str(a) and [r["step"] for r in _lines(a / "metrics.jsonl")] == [1, 2]
    assert (b / "config.yaml").read_bytes() == b_config and not (b / "checkpoints" / "step-000002").exists()

    run(_cfg(project, f"output_dir={a}", "trainer.steps=3", "rollout.group_size=1", "trainer.lr=0.01",
             "trainer.resume_accept=[trainer.lr]"), resume=True)  # accepted on purpose
    assert [r["step"] for r in _lines(a / "metrics.jsonl")] == [1, 2, 3]

    with pytest.raises(CheckpointError) as nothing:
        run(_cfg(project, f"output_dir={project / 'runs' / 'C'}"), resume=True)
    assert "--resume found no complete checkpoint in output_dir" in str(nothing.value)
    assert f"{a} (step 3), {b} (step 1)" in str(nothing.value)  # neighbours are named, never picked


def test_resume_on_a_folder_that_does_not_exist_creates_nothing(project):
    # the run lock creates the folder it locks: --resume must fail before it, or every mistyped
    # `ajet --resume` leaves an empty run folder (lock file only) beside the real ones
    missing = project / "runs" / "typo"
    with pytest.raises(CheckpointError, match="--resume found no complete checkpoint in output_dir"):
        run(_cfg(project, f"output_dir={missing}"), resume=True)
    assert not missing.exists()


def test_a_nan_judge_is_counted_and_never_reaches_the_weights(project):
    out = project / "nan"
    run(_cfg(project, f"output_dir={out}", "trainer.steps=2", "rollout.batch_tasks=4"))
    rows = _lines(out / "metrics.jsonl")
    assert [r["judge_failed"] for r in rows] == [4, 4]  # oil and coal, two episodes each, every step
    assert all(r["loss"] == r["loss"] and r["nonfinite_updates"] == 0 for r in rows if "loss" in r)
    episodes = _lines(out / "episodes.jsonl")
    assert sum(1 for e in episodes if (e["judge_error"] or "").startswith("NonFiniteReward: the judge returned")) == 8
    assert _finite(out)


def test_non_finite_updates_are_skipped_then_stop_the_run_with_exit_code_1(project):
    out = project / "blowup"
    # lr 1e30: the first update sends the adapters to ~1e30, every later loss is inf/NaN.
    proc = subprocess.run(
        [sys.executable, "-m", "ajet.cli", "--conf", str(project / "run.yaml"), "algorithm=sft", "sft.lr=1e30",
         "sft.epochs=3", "trainer.max_nonfinite_updates=2", f"output_dir={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 1, proc.stderr[-2000:]
    message = " ".join(proc.stderr.split())
    assert ("error: the loss or the gradients were non-finite (NaN or inf) in 2 optimizer updates in a row "
            "(limit trainer.max_nonfinite_updates=2); each was skipped, so the weights and the last checkpoint "
            "are intact.") in message
    rows = _lines(out / "metrics.jsonl")
    assert [r["nonfinite_updates"] for r in rows] == [0, 1, 1]
    assert [r["step"] for r in rows] == [1, 2, 3] and _finite(out)


def test_a_resumed_run_keeps_each_episode_once(project):
    out = project / "killed"
    run(_cfg(project, f"output_dir={out}"))
    assert len(_lines(out / "episodes.jsonl")) == 8
    sampled = _completions(_lines(out / "episodes.jsonl"), step=2)
    # What kill -9 during step 2's rollout leaves: its episodes written, its checkpoint not, a torn line.
    shutil.rmtree(out / "checkpoints" / "step-000002")
    with (out / "episodes.jsonl").open("a") as handle:
        handle.write('{"episode_id": "torn", "step": 2, "ta')
    run(_cfg(project, f"output_dir={out}"), resume=True)
    episodes = _lines(out / "episodes.jsonl")
    assert sorted(e["step"] for e in episodes) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert len({e["episode_id"] for e in episodes}) == 8
    assert [r["step"] for r in _lines(out / "metrics.jsonl")] == [1, 2]
    # step 2's episodes get the same seeds again (ajet.rollout.seeds), so they sample the same tokens
    assert _completions(episodes, step=2) == sampled and len(sampled) == 4


def _completions(episodes: list[dict], step: int) -> dict[tuple[str, int], list[list[int]]]:
    return {(e["task"]["task_id"], e["repeat"]): [c["completion_ids"] for c in e["llm_calls"]]
            for e in episodes if e["step"] == step}


def test_eval_survives_workflows_that_cancel_exit_or_swallow(project):
    with (project / "train.jsonl").open("a", encoding="utf-8") as handle:
        for query in ("cancel", "exit", "swallow"):
            handle.write(json.dumps({"query": query}) + "\n")
        handle.write('{"query": "lone \\ud800"}\n')  # valid JSON, not Unicode: skipped and reported
    out = project / "eval"
    proc = subprocess.run(
        [sys.executable, "-m", "ajet.cli", "eval", "--conf", str(project / "run.yaml"), f"output_dir={out}",
         "rollout.retries=0", "rollout.episode_timeout_s=2"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out / "eval.json").read_text())
    assert report["episodes"] == 7 and report["failed"] == 3 and report["judge_failed"] == 2
    assert report["errors"] == {"CancelledError": 1, "SystemExit": 1, "TimeoutError": 1}
    assert len(_lines(out / "eval_episodes.jsonl")) == 7
    assert "unpaired surrogate" in proc.stderr


def _strict_json(line: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(line, parse_constant=refuse)


def test_a_huge_finite_reward_is_a_judge_failure_and_costs_no_other_group(project):
    out = project / "huge"
    run(_cfg(project, f"output_dir={out}", "trainer.steps=2", "rollout.batch_tasks=4", f"judge.type={project}/flow.py:HugeJudge"))
    rows = [_strict_json(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["judge_failed"] for r in rows] == [4, 4]  # oil and coal: 1e308 and -1e308, every step
    assert all(r["nonfinite_updates"] == 0 and r["loss"] == r["loss"] for r in rows if "loss" in r)
    assert any(r.get("trained_samples") for r in rows)  # gas and wind still trained
    episodes = _lines(out / "episodes.jsonl")
    assert sum(1 for e in episodes if (e["judge_error"] or "").startswith("RewardOutOfRange: the judge returned")) == 8
    assert _finite(out)


def test_metrics_jsonl_writes_null_for_nan_and_inf(tmp_path):
    from ajet.backbone.monitor import Monitor

    monitor = Monitor(tmp_path, 1)
    monitor.log(1, "grpo", {"loss": float("nan"), "grad_norm": float("inf"), "parts": [float("-inf"), 1.0]})
    row = _strict_json((tmp_path / "metrics.jsonl").read_text())
    assert row["loss"] is None and row["grad_norm"] is None and row["parts"] == [None, 1.0]


def test_a_workflow_that_rewrites_its_task_fools_neither_the_judge_nor_the_log(project):
    rows = [{"query": "What is six times seven?", "answer": "forty-two", "deep": {"n": 0}}]
    (project / "one.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = project / "rewrite"
    run(_cfg(project, f"output_dir={out}", f"workflow={project}/flow.py:Rewrite", f"judge.type={project}/flow.py:AnswerJudge",
             f"task_reader.train={project}/one.jsonl", "rollout.batch_tasks=1", "rollout.group_size=3"))
    episodes = _lines(out / "episodes.jsonl")
    assert len(episodes) == 6 and sorted(e["step"] for e in episodes) == [1, 1, 1, 2, 2, 2]
    # every repeat of both steps saw the reader's task; the judge scored against the reader's answer
    assert [e["metadata"]["seen"] for e in episodes] == [["What is six times seven?", "forty-two", {"n": 0}]] * 6
    assert [e["reward"] for e in episodes] == [0.0] * 6
    assert all(e["task"]["query"] == "What is six times seven?" and e["task"]["answer"] == "forty-two"
               and e["task"]["metadata"] == {"deep": {"n": 0}} for e in episodes)


def _ajet(*args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ajet.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "OMP_NUM_THREADS": "1", **env})


def test_a_second_run_on_a_folder_a_live_run_holds_is_refused(project):
    out, hold = project / "shared", project / "hold"
    hold.touch()  # the first run's episodes wait until the second run has been refused
    first = _ajet("--conf", str(project / "run.yaml"), f"output_dir={out}", "trainer.steps=2",
                  "rollout.episode_timeout_s=300", HOLD_FILE=str(hold))
    lock = out / ".ajet.lock"
    deadline = time.time() + 300
    while time.time() < deadline and first.poll() is None:  # the first run holds the folder
        if lock.is_file() and f'"pid": {first.pid}' in lock.read_text():
            break
        time.sleep(0.05)
    for args in (["trainer.steps=2"], ["trainer.steps=2", "--resume"], ["eval"]):  # `ajet eval` takes the lock too
        command = ["eval", "--conf", str(project / "run.yaml")] if args == ["eval"] else \
            ["--conf", str(project / "run.yaml"), *args]
        second = _ajet(*command, f"output_dir={out}")
        log, _ = second.communicate(timeout=300)
        assert second.returncode == 2, log
        text = " ".join(log.split())
        assert f"error: output_dir '{out}' is in use by another live run (pid {first.pid} on " in text
        assert "Traceback" not in log
    hold.unlink()
    log, _ = first.communicate(timeout=600)
    assert first.returncode == 0, log
    assert [r["step"] for r in _lines(out / "metrics.jsonl")] == [1, 2]
    assert sorted(e["step"] for e in _lines(out / "episodes.jsonl")) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert lock.read_text() == ""  # released; the next run on the folder starts without a note


def test_two_runs_started_together_with_time_named_folders_get_different_ones(project):
    # the packaged default is runs/<project>/${now:%Y%m%d-%H%M%S}; a day-named folder collides for sure
    overrides = ["output_dir=" + str(project / "runs") + "/${now:%Y%m%d}"]
    a = load_config(project / "run.yaml", overrides, claim_run_dir=True).output_dir
    b = load_config(project / "run.yaml", overrides, claim_run_dir=True).output_dir
    assert b == a + "-2" and Path(a).is_dir() and Path(b).is_dir()
    assert load_config(project / "run.yaml", overrides).output_dir == a  # --cfg and library calls claim nothing


def test_fewer_tasks_than_batch_tasks_warns_once_naming_the_numbers(project, capsys):
    (project / "one.jsonl").write_text(json.dumps({"query": "Say something about gas."}) + "\n")
    out = project / "repeats"
    run(_cfg(project, f"output_dir={out}", f"task_reader.train={project}/one.jsonl", "rollout.group_size=4",
             "rollout.batch_tasks=8", "rollout.max_tokens_per_turn=2", "rollout.max_turns=1"))
    err = " ".join(capsys.readouterr().err.split())
    warning = ("warning: the train split has 1 task(s) but rollout.batch_tasks=8: each batch repeats tasks, and a "
               "task's repeats share one group, so a group holds up to 32 episodes (8 x rollout.group_size=4) and a "
               "batch has 1 group(s), not 8. Set rollout.batch_tasks=1 (and raise rollout.group_size) or add tasks.")
    assert err.count(warning) == 1  # two steps, one warning
    episodes = _lines(out / "episodes.jsonl")
    assert len(episodes) == 64 and {e["group_id"] for e in episodes if e["step"] == 1} == {next(
        e["group_id"] for e in episodes if e["step"] == 1)}
