"""`ajet generate rounds` on the tiny random model and the energy tutorial's real MCP server: call-first
tasks (references from calls that really ran) split into 4 train / 2 held-out, round 0 evaluated by a
real `ajet eval` subprocess, sampling with the model as its own teacher, SFT in a real `ajet`
subprocess, resume from DIR/rounds.jsonl, and the two ways rounds stop early."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.errors import GenerateError
from ajet.generate import rounds as rounds_module
from ajet.generate.call_tasks import generate_call_tasks
from ajet.generate.demos import generate_demos
from ajet.jsonl import read_rows
from ajet.generate.rounds import Rounds
from ajet.mcp_client import call_tool, open_client

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "tutorial" / "example_mcp_pipeline" / "pipeline.yaml"
SERVER = ROOT / "tutorial" / "example_tool_agent" / "energy_server.py"
# small and fast: 2 of 6 tasks held out, one short turn per episode, one SFT epoch
SMALL = ["model.path=tiny-random", "generate.rounds.heldout_share=0.34", "rollout.max_tokens_per_turn=16",
         "rollout.max_turns=1", "sft.epochs=1", "sft.batch_size=4"]


async def _tasks(tmp: Path) -> Path:
    """Six call-first tasks with templated questions, built from a bank of calls run on the real server."""
    rows = []
    async with open_client(str(SERVER)) as client:
        for tool, args in [("get_gas_price", {"city": c}) for c in ("Boston", "Seattle", "Denver")] + [
                ("get_pipeline_flow", {"pipeline": "Transco"}), ("get_production", {"state": "Texas", "year": 2021}),
                ("get_weather_demand", {"city": "Boston"})]:
            outcome = await call_tool(client, tool, args)
            assert outcome.error is None, outcome.error
            rows.append({"id": f"c{len(rows):04d}", "tool": tool, "arguments": args, "content": outcome.content,
                         "result": outcome.result, "origin": {k: "description" for k in args}, "inputs_from": []})
    calls, tasks = tmp / "calls.jsonl", tmp / "tasks.jsonl"
    calls.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = load_config(PIPELINE, ["generate.tasks.phrasing=template", "generate.tasks.round_trip=false"])
    assert (await generate_call_tasks(cfg, calls, 6, tasks)).kept == 6
    return tasks


@pytest.fixture
def tasks(tmp_path) -> Path:
    return asyncio.run(_tasks(tmp_path))


def ajet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ajet.cli", *args], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)


def test_rounds_resume_and_stop_when_no_episode_matches_its_reference(tasks, tmp_path):
    out = tmp_path / "rounds"
    first = ajet("generate", "rounds", "--conf", str(PIPELINE), "--tasks", str(tasks), "--rounds", "0",
                 "--out", str(out), *SMALL)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert len(read_rows(out / "train.jsonl")) == 4 and len(read_rows(out / "heldout.jsonl")) == 2
    assert not any(t["metadata"].get("gold") for t in read_rows(out / "train.jsonl"))  # sampled, not built
    assert [r["round"] for r in read_rows(out / "rounds.jsonl")] == [0]
    round0 = (out / "round-0" / "eval" / "eval.json").stat().st_mtime_ns
    # the rerun resumes after round 0 (not evaluated again); tiny-random never matches a reference
    second = ajet("generate", "rounds", "--conf", str(PIPELINE), "--tasks", str(tasks), "--rounds", "2", "--k", "2",
                  "--out", str(out), *SMALL)
    text = " ".join((second.stdout + second.stderr).split())  # rich wraps long lines
    assert second.returncode == 0, text[-3000:]
    assert "resuming" in text and (out / "round-0" / "eval" / "eval.json").stat().st_mtime_ns == round0
    assert "round 1: none of the 8 sampled episode(s) matched its reference (dropped:" in text
    lines = read_rows(out / "rounds.jsonl")
    assert [(r["round"], r["sampled"], r["kept"], r["stop"]) for r in lines] == [
        (0, 0, 0, None), (1, 8, 0, "no_rows_kept")]
    assert lines[0]["held_out_success"] == 0.0 and lines[1]["held_out_success"] is None
    assert len(read_rows(out / "round-1" / "sft.jsonl.dropped.jsonl")) == 8 and not (out / "round-2").exists()
    assert (out / "final.txt").read_text().strip() == "tiny-random"
    third = ajet("generate", "rounds", "--conf", str(PIPELINE), "--tasks", str(tasks), "--rounds", "2",
                 "--out", str(out), *SMALL)
    assert third.returncode == 0 and "already stopped at round 1" in " ".join(third.stdout.split())
    assert len(read_rows(out / "rounds.jsonl")) == 2


def test_a_tasks_file_without_references_is_a_clear_error(tmp_path):
    plain = tmp_path / "tasks.jsonl"
    plain.write_text('{"task_id": "t1", "query": "Gas price in Boston?"}\n')
    run = ajet("generate", "rounds", "--conf", str(PIPELINE), "--tasks", str(plain), "--rounds", "1",
               "--out", str(tmp_path / "r"), "model.path=tiny-random")
    assert run.returncode == 1 and "Traceback" not in run.stderr  # GenerateError
    assert "none of its 1 task(s) has a reference" in " ".join(run.stderr.split())
    assert not (tmp_path / "r" / "rounds.jsonl").exists()


def test_a_round_trains_evaluates_and_stops_without_improvement(tasks, tmp_path, monkeypatch):
    """The SFT half of a round. A random model never keeps an episode, so sampling is replaced by the
    tasks' demonstrations built from their gold calls (rows of the same shape); SFT, the merge of its
    checkpoint and the held-out eval are the real subprocesses. The trained tiny model still scores
    0, which is no improvement over round 0: the rounds stop and keep round 0's model."""
    gold = {t["task_id"]: t for t in read_rows(tasks)}

    def built(cfg, train, out):
        with_gold = out.with_name("train-with-gold.jsonl")
        with_gold.write_text("".join(json.dumps(gold[t["task_id"]]) + "\n" for t in read_rows(train)))
        cfg.generate.demos.final_sentence = "template"
        return asyncio.run(generate_demos(cfg, with_gold, out)).to_dict()

    monkeypatch.setattr(rounds_module, "sample_demos", built)
    out = tmp_path / "rounds"
    done = Rounds(PIPELINE, SMALL, tasks, out, rounds=2, k=2, start=None, heldout=None).run()
    assert [(d.round, d.kept, d.stop) for d in done] == [(0, 0, None), (1, 4, "no_improvement")]
    model = Path(done[1].model)
    assert model.parent == out / "round-1" and (model / "config.json").is_file()  # the merged checkpoint
    assert (out / "round-1" / "train" / "checkpoints").is_dir()
    assert json.loads((out / "round-1" / "eval" / "eval.json").read_text())["tasks"] == 2
    assert done[1].held_out_success == 0.0 and (out / "final.txt").read_text().strip() == "tiny-random"
    assert [r["round"] for r in read_rows(out / "rounds.jsonl")] == [0, 1]


def test_a_heldout_file_without_references_is_refused(tasks, tmp_path):
    bad = tmp_path / "held.jsonl"
    bad.write_text('{"task_id": "h1", "query": "Gas price?", "answer": "3.1"}\n')
    with pytest.raises(GenerateError, match="has a reference"):
        Rounds(PIPELINE, ["model.path=tiny-random"], tasks, tmp_path / "r", rounds=1, k=1, start=None, heldout=bad)


@pytest.mark.parametrize("previous", [False, True])
def test_previous_rows_decide_what_a_round_trains_on(tasks, tmp_path, monkeypatch, previous):
    """Which rows round 2's SFT command reads: its own only, or rounds 1 and 2 (the command itself is
    recorded, not run; the subprocess is covered above)."""
    out = tmp_path / "rounds"
    rounds = Rounds(PIPELINE, ["model.path=tiny-random", f"generate.rounds.previous_rows={previous}"], tasks, out,
                    rounds=2, k=1, start=None, heldout=None)
    for r, rows in ((1, [{"task_id": "a"}]), (2, [{"task_id": "b"}, {"task_id": "c"}])):
        (out / f"round-{r}").mkdir()
        (out / f"round-{r}" / "sft.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    commands = []
    monkeypatch.setattr(rounds_module, "_ajet", lambda args, name, log: commands.append(args))
    monkeypatch.setattr("ajet.export.model_folder.model_folder", lambda model, run_dir: f"{model}-merged")
    assert rounds.train("tiny-random", out / "round-2", 2) == f"{out / 'round-2' / 'train'}-merged"
    data = Path(next(a for a in commands[0] if a.startswith("sft.data=")).split("=", 1)[1])
    assert [row["task_id"] for row in read_rows(data)] == (["a", "b", "c"] if previous else ["b", "c"])
    assert "algorithm=[sft]" in commands[0] and "--backbone=debug" in commands[0]
