"""The Python math tutorial's data and tool: the shipped files are what make_data.py writes, every
program prints its task's answer inside the sandbox, and each way a program ends becomes the right
tool message and counter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ajet.plugins import load_object
from ajet.sandbox import SandboxLimits, SandboxResult, bwrap

FOLDER = Path(__file__).resolve().parents[2] / "tutorial" / "example_math_python"
# By file path: each tutorial has its own agent.py / make_data.py, so plain `import make_data` could
# pick another tutorial's. load_object also puts the folder on sys.path for the sibling import below.
code_metrics = load_object(f"{FOLDER / 'agent.py'}:code_metrics")
build = load_object(f"{FOLDER / 'make_data.py'}:build")
import python_tool  # noqa: E402

needs_sandbox = pytest.mark.skipif(bwrap.unavailable() is not None, reason=f"no OS sandbox: {bwrap.unavailable()}")


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FOLDER / f"{name}.jsonl").read_text().splitlines()]


def test_shipped_data_is_what_the_script_makes(tmp_path: Path) -> None:
    assert build(tmp_path) == {"train": 64, "val": 32, "heldout": 128, "sft": 64}
    for name in ("train", "val", "heldout", "sft"):
        assert (tmp_path / f"{name}.jsonl").read_bytes() == (FOLDER / f"{name}.jsonl").read_bytes(), name
    queries = [{r["query"] for r in _rows(name)} for name in ("train", "val", "heldout")]
    assert sum(map(len, queries)) == len(set().union(*queries)) == 64 + 32 + 128, "a problem is in two splits"
    train = _rows("train")
    for task, demo in zip(train, _rows("sft")):
        call = demo["messages"][2]["tool_calls"][0]["function"]
        assert json.loads(call["arguments"]) == {"code": task["metadata"]["code"]}
        assert demo["messages"][3]["content"] == str(task["answer"])
        assert demo["messages"][4]["content"] == f"The answer is \\boxed{{{task['answer']}}}."


@needs_sandbox
async def test_each_kind_of_program_prints_its_answer_in_the_sandbox() -> None:
    firsts = {}
    for task in _rows("val"):
        firsts.setdefault(task["metadata"]["category"], task)
    assert len(firsts) == 8
    for task in firsts.values():
        content, record = await python_tool.run_python_call(json.dumps({"code": task["metadata"]["code"]}), SandboxLimits())
        assert content == str(task["answer"]) and record["status"] == "ok", task


@needs_sandbox
async def test_bad_calls_become_readable_errors() -> None:
    content, record = await python_tool.run_python_call("{not json", SandboxLimits())
    assert content.startswith("Error: arguments are not valid JSON") and record["status"] == "bad_call"
    content, record = await python_tool.run_python_call('{"source": "print(1)"}', SandboxLimits())
    assert 'like {"code":' in content and record["status"] == "bad_call"
    content, record = await python_tool.run_python_call({"code": "x = 1"}, SandboxLimits())
    assert content == "(the program printed nothing; print the answer)" and record["status"] == "ok"
    content, record = await python_tool.run_python_call({"code": "print(1/0)"}, SandboxLimits())
    assert content.startswith("Error: ") and content.endswith("ZeroDivisionError: division by zero")
    assert record["status"] == "error" and record["error"] == content


def test_tool_messages_and_counters_by_hand() -> None:
    assert python_tool.tool_message(SandboxResult("timeout", stdout="1\n")).startswith("Error: the program ran longer")
    huge = python_tool.tool_message(SandboxResult("output_limit", stdout="y" * 5000, truncated=True))
    assert huge.startswith("Error: the program printed too much") and len(huge) < 300
    assert "(network, process)" in python_tool.tool_message(SandboxResult("blocked", blocked=["process", "network", "process"]))
    records = [{"status": "ok"}, {"status": "timeout"}, {"status": "ok"}, {"status": "bad_call"}]
    metrics = code_metrics(records)
    assert metrics["code_runs"] == 3 and metrics["code_ok"] == 2 and metrics["code_timeout"] == 1
    assert metrics["code_bad_call"] == 1 and metrics["code_memory"] == 0
