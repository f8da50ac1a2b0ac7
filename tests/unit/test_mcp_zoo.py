"""The MCP server zoo (benchmarks/mcp_zoo/): its frozen split, its val sets, and every reference
checked by really calling the server (in memory for the servers written here, over stdio through
their own console command for the published ones whose venv setup.py made)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import yaml

ZOO = Path(__file__).resolve().parents[2] / "benchmarks" / "mcp_zoo"
sys.path.insert(0, str(ZOO))

import check_val  # noqa: E402
import zoo  # noqa: E402

from ajet.config.loader import load_config  # noqa: E402
from ajet.judge.registry import build_judge  # noqa: E402
from ajet.workflow import Task, WorkflowOutput  # noqa: E402


def test_split_holds_out_at_least_four_servers_two_of_them_published_and_time_stays_dev():
    split = zoo.split()
    heldout, dev = set(split["heldout"]), set(split["dev"])
    assert not heldout & dev
    assert heldout | dev == set(zoo.SERVERS), "every zoo server is on exactly one side"
    assert len(heldout) >= 4
    assert len(heldout & set(zoo.PUBLISHED)) >= 2
    assert "time" in dev  # studied by the session that filed issue 39
    assert len(zoo.PUBLISHED) >= 5 and len(zoo.SERVERS) >= 10


@pytest.mark.parametrize("name", zoo.SERVERS)
def test_each_server_has_30_well_formed_questions_and_a_config(name):
    rows = zoo.read_val(name)
    assert len(rows) >= 30
    assert len({r["task_id"] for r in rows}) == len(rows)
    assert len({r["query"] for r in rows}) == len(rows), "no question asked twice"
    assert [check_val.row_problem(r) for r in rows] == [None] * len(rows)
    cfg = load_config(str(zoo.yaml_path(name)), [])
    assert "mcp_agent" in cfg.workflow and cfg.task_reader.val.endswith("val.jsonl")
    assert cfg.workflow_args["system_prompt"].startswith("You are a")


@pytest.mark.parametrize("name", zoo.SERVERS)
def test_the_judge_passes_the_reference_and_fails_a_wrong_answer(name):
    """A final must be checkable by the server's own judge: the reference calls with an answer stating
    the final succeed; the same calls with another answer do not."""
    cfg = load_config(str(zoo.yaml_path(name)), [])
    judge = build_judge(cfg.judge, zoo.yaml_path(name).parent)

    def success(task: Task, answer: str) -> bool:
        calls = [{"name": c["name"], "arguments": c["arguments"], "result": "ok"} for c in task.answer["calls"]]
        reward = asyncio.run(judge.score(task, WorkflowOutput(answer=answer, tool_calls=calls)))
        return reward.is_success if reward.is_success is not None else reward.total >= judge.success_threshold

    for row in zoo.read_val(name):
        task = Task(task_id=row["task_id"], query=row["query"], answer=row["answer"], metadata=row["metadata"])
        final = row["answer"]["final"]
        stated = final[0] if isinstance(final, list) else final
        assert success(task, f"The answer is {stated}."), row["task_id"]
        assert not success(task, "I could not find that."), row["task_id"]


@pytest.mark.parametrize("name", zoo.WRITTEN)
def test_written_servers_answer_every_reference(name):
    report = asyncio.run(check_val.check_server(name))
    assert report.skipped is None
    assert report.failures == []
    assert report.checked == len(zoo.read_val(name))


@pytest.mark.parametrize("name", list(zoo.PUBLISHED))
def test_published_servers_answer_every_reference(name):
    published = zoo.PUBLISHED[name]
    if not published.executable(name).exists():
        pytest.skip(f"{published.requirement} is not installed: run python benchmarks/mcp_zoo/setup.py "
                    f"--servers {name}")
    report = asyncio.run(check_val.check_server(name))
    assert report.failures == []
    assert report.checked == len(zoo.read_val(name))


def test_check_val_reports_a_wrong_final_a_failing_call_and_a_malformed_row(monkeypatch):
    good = zoo.read_val("weather")[0]
    wrong_final = json.loads(json.dumps(good))
    wrong_final["answer"]["final"] = 999.5
    failing = json.loads(json.dumps(good))
    failing["answer"]["calls"][0]["arguments"] = {"station_id": "KSEA"}  # the date is missing
    malformed = json.loads(json.dumps(good))
    malformed["metadata"]["num_calls"] = 3
    monkeypatch.setattr(check_val, "read_val", lambda name: [good, wrong_final, failing, malformed])
    report = asyncio.run(check_val.check_server("weather"))
    assert report.checked == 4
    assert len(report.failures) == 3
    assert "999.5" in report.failures[0] and "failed" in report.failures[1] and "num_calls" in report.failures[2]


def test_states_reads_numbers_and_text_as_the_judge_does():
    assert check_val.states('{"value": 473.1765}', 473.1765)
    assert check_val.states("Total: 1,200 m", 1200)
    assert not check_val.states('{"value": 474.0}', 473.1765)
    assert check_val.states("Author: Priya Raman", "priya raman")
    assert check_val.states("2026-11-28T06:00:00+05:30", ["06:00", "6:00 am"])
    assert not check_val.states("07:00", ["06:00", "6:00 am"])


def test_summary_tables_the_newest_run_of_one_recipe_per_server_and_refuses_a_broken_line(tmp_path):
    import subprocess

    def result(server, trained, **extra):
        return {"server": server, "tools": 4, "tools_kept": 3, "base_success": 0.0, "trained_success": trained,
                "minutes": 10.0, "n": 180, "overrides": [], "val_limit": None, "commit": "abc1234", "cpu": "avx2",
                **extra}

    heldout, dev = zoo.split()["heldout"][0], zoo.split()["dev"][0]
    rows = [result(heldout, 0.5), result(heldout, 0.25, commit="def5678"),  # the newer one counts
            result(heldout, 0.9, overrides=["generate.tasks.phrasing=writer"]),  # another recipe: left out
            result(dev, 0.125, val_limit=4),  # a smoke test: left out
            result(heldout, 0.1, withdrawn="a default taken back"),  # newest, but no recipe now: left out
            result(dev, 0.75, minutes=None)]
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    script = ZOO.parent / "mcp_zoo.py"
    done = subprocess.run([sys.executable, str(script), "--summary", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "heldout_mean_success=0.250 dev_mean_success=0.750 tools_covered=0.750 minutes=10.0"
    assert any(line.startswith(heldout) and "def5678" in line for line in lines)
    assert "(3 result(s) of another recipe" in lines[-3]
    # the means cover two servers: the rest of each split is named, not silently averaged away
    others = lines[-2]
    assert others.startswith("(no result of this recipe, so not in the means: heldout ")
    named = set(others.removeprefix("(no result of this recipe, so not in the means: ").rstrip(")")
                .replace(";", " ").replace(",", " ").split()) - {"heldout", "dev"}
    assert named == set(zoo.split()["heldout"][1:] + zoo.split()["dev"][1:])

    # another recipe's table: its rows alone, the overrides in any order
    rows.append(result(dev, 0.5, n=360, overrides=["sft.epochs=2", "trainer.lr=1e-4"]))
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    done = subprocess.run([sys.executable, str(script), "--summary", str(path), "-n", "360", "trainer.lr=1e-4",
                           "sft.epochs=2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == ("heldout_mean_success=n/a dev_mean_success=0.500 "
                                                    "tools_covered=0.750 minutes=10.0")

    # a broken line amid results is refused by number (a last line cut off by a crash is skipped, as
    # ajet.jsonl.read_rows does for every appended file)
    path.write_text(json.dumps(rows[0]) + "\n{not json\n" + json.dumps(rows[1]) + "\n")
    done = subprocess.run([sys.executable, str(script), "--summary", str(path)], capture_output=True, text=True)
    assert done.returncode != 0 and f"{path}:2 is not a JSON line" in done.stderr


def _alive(pid: int) -> bool:
    """A process that runs (a zombie awaiting its reaper has stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc (Linux)")
def test_stopping_the_benchmark_stops_its_stage_and_what_the_stage_started(tmp_path):
    import signal
    import subprocess
    import time

    # a stage (an `ajet` command) that starts a server of its own, as `ajet train` starts MCP servers
    stage = ("import os, subprocess, sys, time; "
             "server = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
             "print(os.getpid(), server.pid, flush=True); time.sleep(600)")
    log = tmp_path / "stage.log"
    bench = ("import signal, sys; sys.path.insert(0, %r); import mcp_zoo; "
             "signal.signal(signal.SIGTERM, mcp_zoo.exit_on_signal); "
             "mcp_zoo.run([sys.executable, '-c', %r], __import__('pathlib').Path(%r))"
             % (str(ZOO.parent), stage, str(log)))
    script = subprocess.Popen([sys.executable, "-c", bench])
    deadline = time.time() + 60
    while not (log.exists() and len(log.read_text().split()) == 2):
        assert time.time() < deadline and script.poll() is None, "the stage never started"
        time.sleep(0.1)
    stage_pid, server_pid = map(int, log.read_text().split())
    assert _alive(stage_pid) and _alive(server_pid)

    script.send_signal(signal.SIGTERM)
    assert script.wait(60) == 128 + signal.SIGTERM
    deadline = time.time() + 30  # the orphaned server is reaped by init, not by us
    while _alive(server_pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(stage_pid) and not _alive(server_pid)


def _record_eval_commands(mcp_zoo, monkeypatch, success_rate: float) -> list[list[str]]:
    """Stands in for the eval subprocess (a model run is minutes): records each command and writes the
    eval.json it would, so what is checked is the command line the benchmark builds."""
    commands = []

    def run(args, log):
        commands.append(args)
        out = Path(next(a for a in args if a.startswith("output_dir=")).split("=", 1)[1])
        out.mkdir(parents=True)
        (out / "eval.json").write_text(json.dumps({"success_rate": success_rate}))
        return 1.0

    monkeypatch.setattr(mcp_zoo, "run", run)
    return commands


def test_the_val_run_uses_the_agent_that_was_trained(tmp_path, monkeypatch):
    """An override of the agent (workflow_args.*) reaches `ajet eval`; the training recipe's do not."""
    sys.path.insert(0, str(ZOO.parent))
    import mcp_zoo

    commands = _record_eval_commands(mcp_zoo, monkeypatch, success_rate=0.25)
    overrides = ["sft.epochs=2", "+workflow_args.ids_after_names=true", "workflow_args.max_result_chars=4000"]
    assert mcp_zoo.val_success("rooms", tmp_path / "model", tmp_path / "eval_trained.log", None, overrides) == 0.25
    args = commands[0]
    assert args[:4] == ["ajet", "eval", "--model", str(tmp_path / "model")]
    assert args[-2:] == ["+workflow_args.ids_after_names=true", "workflow_args.max_result_chars=4000"]
    assert "sft.epochs=2" not in args


def test_the_base_row_scores_the_student_the_overrides_name(tmp_path, monkeypatch):
    """`model=...` chooses the student: the base row evaluates that model untrained (a real `ajet eval` on
    one val question, its saved config read back); the trained row reads its model from the run, so the
    override does not reach it."""
    sys.path.insert(0, str(ZOO.parent))
    import mcp_zoo

    overrides = ["model=tiny-random", "sft.epochs=2", "model.lora.rank=8"]
    mcp_zoo.val_success("weather", None, tmp_path / "eval_base.log", 1, overrides)
    evaluated = yaml.safe_load((tmp_path / "eval-eval_base" / "config.yaml").read_text())
    assert evaluated["ajet"]["model"]["path"] == "tiny-random"  # the server YAML names smollm2-135m-instruct

    commands = _record_eval_commands(mcp_zoo, monkeypatch, success_rate=0.0)
    mcp_zoo.val_success("weather", tmp_path / "model", tmp_path / "eval_trained.log", None, overrides)
    assert not any(a.startswith(("model", "sft")) for a in commands[0])  # "--model RUN" is the run's, not the override
