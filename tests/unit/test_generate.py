"""`ajet generate tasks|demos` against the energy tutorial's real MCP server, with the question
writer and teacher played by a scripted OpenAI chat server over real HTTP (where a hosted model
would be): spread over tools, dedup, drop reasons, write-as-you-go and resume, both SFT formats
(read back by ajet's SFT reader), and every bad input counted or a clear error."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.errors import ConfigError, GenerateError
from ajet.render import ChatRenderer
from ajet.generate.demos import generate_demos
from ajet.jsonl import read_rows
from ajet.generate.tasks import QuestionFilter, generate_tasks, parse_questions
from ajet.judge.grounded import GroundedJudge
from ajet.trainer.sft_data import load_sft_samples
from ajet.workflow import Task, WorkflowOutput
from tests.unit.fake_openai import ScriptedOpenAI

TOOL_YAML = Path(__file__).resolve().parents[2] / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
CITIES = ["Boston", "Denver", "Seattle", "Dallas", "Houston", "Chicago", "Atlanta", "Philadelphia", "New York",
          "Los Angeles"]
TOPICS = {"get_gas_price": "the gas price in {c}", "compare_prices": "gas prices of {c} versus Boston",
          "get_storage_level": "the storage level in the {r} region", "get_pipeline_flow": "the flow on the {p} line",
          "get_weather_demand": "the heating demand in {c}", "get_production": "how much gas Texas made in {y}",
          "convert_units": "{n} MMBtu expressed in kWh", "convert_price": "a price of {n} USD per MMBtu per therm"}




def config(llm: ScriptedOpenAI, *overrides: str):
    return load_config(TOOL_YAML, [f"generate.teacher={{base_url: '{llm.base_url}'}}", *overrides])


def writer(request: dict) -> dict:
    """A question writer that writes distinct questions about the tool each request targets."""
    prompt = request["messages"][-1]["content"]
    tool = re.search(r"need the tool `(\w+)`", prompt).group(1)
    k = int(re.search(r"Write (\d+) different", prompt).group(1))
    start = 7 * len(writer.seen)
    writer.seen.append(tool)
    questions = [TOPICS[tool].format(c=CITIES[(start + i) % 10], r=["East", "Pacific", "Mountain"][i % 3],
                                     p=["Transco", "ANR", "Columbia Gas"][i % 3], y=2019 + (start + i) % 5,
                                     n=start + i + 1) for i in range(k)]
    return {"content": json.dumps({"questions": [f"Could you tell me {q} please, right now?" for q in questions]})}


async def test_tasks_spread_over_every_tool_are_deduplicated_and_resumed(llm, tmp_path):
    writer.seen = []
    llm.respond = writer
    out = tmp_path / "tasks.jsonl"
    cfg = config(llm, "generate.tasks.per_request=3", "generate.tasks.multi_tool_share=0",
                 "generate.tasks.similarity=0.99")  # the scripted questions differ in one word
    report = await generate_tasks(cfg, 24, out)
    rows = read_rows(out)
    assert report.kept == len(rows) == 24 and report.resumed == 0 and report.requests == 8
    assert set(writer.seen[:8]) == set(TOPICS)  # the first 8 requests cover all 8 tools
    assert {tuple(r["metadata"]["tools"]) for r in rows} >= {(t,) for t in TOPICS}
    assert all(r["task_id"].startswith("gen-") and r["metadata"]["source"] == "generated" for r in rows)
    first = llm.requests[0]
    assert first["response_format"]["type"] == "json_schema" and first["model"] == "teacher-model"
    assert "get_gas_price(city: string (e.g. Boston))" in first["messages"][-1]["content"]
    # Resume: the 24 rows stay as they are and 4 more are added; nothing is repeated.
    again = await generate_tasks(cfg, 28, out)
    assert again.resumed == 24 and again.kept == 4 and read_rows(out)[:24] == rows
    assert len({r["query"] for r in read_rows(out)}) == 28


async def test_bad_replies_are_counted_and_an_empty_result_is_a_clear_error(llm, tmp_path):
    replies = iter(["garbage", "500", "500", "500", {"content": "I cannot help with that."},
                    {"content": json.dumps({"questions": ["Use get_gas_price for Boston please now",
                                                          "Price?", "What is the gas price in Boston today?",
                                                          "What is the gas price in Boston today??"]})}])
    llm.respond = lambda request: next(replies)
    out = tmp_path / "tasks.jsonl"
    cfg = config(llm, "generate.max_retries=0", "generate.tasks.max_requests=6", "generate.tasks.per_request=4")
    report = await generate_tasks(cfg, 10, out)
    assert report.kept == 1 and report.requests == 6
    assert dict(report.dropped) == {"request_failed": 4, "unparseable_reply": 1, "names_a_tool": 1,
                                    "too_short": 1, "duplicate": 1}
    dropped = read_rows(out.with_name("tasks.jsonl.dropped.jsonl"))
    assert len(dropped) == 8 and {d["reason"] for d in dropped} >= {"names_a_tool", "request_failed"}
    llm.respond = lambda request: {"content": json.dumps({"questions": ["Price?", "get_gas_price Boston now ok"]})}
    with pytest.raises(GenerateError, match=r"no task was kept after 2 request\(s\); dropped: too_short 2, names_a_tool 2"):
        await generate_tasks(config(llm, "generate.tasks.max_requests=2"), 5, tmp_path / "none.jsonl")


async def test_a_server_that_does_not_start_is_a_clear_error(llm, tmp_path):
    cfg = config(llm, "workflow_args.server='python no_such_server.py'")
    with pytest.raises(ConfigError, match="did not start or answer"):
        await generate_tasks(cfg, 3, tmp_path / "t.jsonl")


def test_parse_questions_is_lenient_and_filter_rules():
    assert parse_questions('Sure!\n```json\n{"questions": ["a b c d?", "e f g h?"]}\n```') == ["a b c d?", "e f g h?"]
    assert parse_questions('[{"question": "What is up today?"}]') == ["What is up today?"]
    assert parse_questions("1. How cold is Denver today?\n2) What about Boston then?") == [
        "How cold is Denver today?", "What about Boston then?"]
    with pytest.raises(ValueError, match="no questions in the reply"):
        parse_questions("nothing here")
    check = QuestionFilter(["get_gas_price", "add"], min_words=4, similarity=0.9)
    check.keep("What is the gas price in Boston?")
    assert check.reason_to_drop("what is the gas price in boston") == "duplicate"
    assert check.reason_to_drop("What is the gas price in Bostonn?") == "near_duplicate"
    assert check.reason_to_drop("What is the gas price in Seattle, Washington?") is None
    assert check.reason_to_drop("Please add two numbers for me") is None  # 'add' is a word, not a leak


def teacher(request: dict) -> dict:
    """Calls get_gas_price for the city in the question; answers right, wrong, or with a bad call."""
    messages = request["messages"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    last = messages[-1]
    if last["role"] == "tool":
        if last["content"].startswith("Error"):
            return {"content": "Sorry, that failed."}
        price = json.loads(last["content"])["price_usd_per_mmbtu"]
        return {"content": f"It costs {price if 'wrong' not in question else 9.99} USD per MMBtu."}
    city = "Atlantis" if "Atlantis" in question else next(c for c in CITIES if c in question)
    return {"content": "", "tool_calls": [("get_gas_price", json.dumps({"city": city}))]}


def write_tasks(path: Path, queries: list[str]) -> None:
    path.write_text("".join(json.dumps({"task_id": f"t{i}", "query": q}) + "\n" for i, q in enumerate(queries)))


@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
async def test_demos_keep_grounded_episodes_drop_the_rest_and_resume(llm, tmp_path, fmt, tiny_tokenizer):
    llm.respond = teacher
    tasks = tmp_path / "tasks.jsonl"
    write_tasks(tasks, ["What is the gas price in Boston?", "Gas price in Denver, wrong answer please?",
                        "What does gas cost in Atlantis?", "How much is gas in Seattle?"])
    out = tmp_path / "sft.jsonl"
    report = await generate_demos(config(llm, f"generate.demos.format={fmt}"), tasks, out)
    assert report.kept == 2 and report.episodes == 4
    assert dict(report.dropped) == {"ungrounded": 1, "tool_error": 1}
    rows = read_rows(out)
    assert [r["task_id"] for r in sorted(rows, key=lambda r: r["task_id"])] == ["t0", "t3"]
    assert llm.requests[0]["tool_choice"] == "auto"  # a hosted teacher is not forced to call
    reasons = {d["task_id"]: d["reason"] for d in read_rows(out.with_name("sft.jsonl.dropped.jsonl"))}
    assert reasons["t1"] == "ungrounded: the answer states 9.99, which no tool returned"
    assert reasons["t2"].startswith("tool_error: tool call 'get_gas_price' failed: unknown city 'Atlantis'")
    if fmt == "openai":
        boston = next(r for r in rows if r["task_id"] == "t0")
        assert [m["role"] for m in boston["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
        assert boston["messages"][-1]["content"] == "It costs 4.15 USD per MMBtu." and len(boston["tools"]) == 8
    else:
        boston = next(r for r in rows if r["task_id"] == "t0")
        assert [c["from"] for c in boston["conversations"]] == ["human", "function_call", "observation", "gpt"]
        assert json.loads(boston["conversations"][1]["value"]) == {"name": "get_gas_price", "arguments": {"city": "Boston"}}
    # ajet's SFT reads the rows back: the trained tokens are the teacher's turns
    samples, load = load_sft_samples(out, ChatRenderer(tiny_tokenizer))
    assert len(samples) == 2 and not load.skipped and all(sum(s.loss_mask) > 0 for s in samples)
    # Resume: every task is in one of the two files, so nothing runs again.
    llm.reset()
    again = await generate_demos(config(llm, f"generate.demos.format={fmt}"), tasks, out)
    assert again.skipped_done == 4 and again.episodes == 0 and not llm.requests and len(read_rows(out)) == 2


async def test_demos_with_reference_answers_use_the_runs_judge(llm, tmp_path):
    """The tutorial's hand-made val tasks carry expected calls and numbers: the composite judge decides."""
    llm.respond = lambda request: (
        {"content": "", "tool_calls": [("get_pipeline_flow", '{"pipeline": "Northern Natural"}')]}
        if request["messages"][-1]["role"] == "user" else {"content": "It flows 5100 MMcf per day."})
    val = [json.loads(line) for line in (TOOL_YAML.parent / "val.jsonl").read_text().splitlines()[:2]]
    (tmp_path / "val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in val))
    report = await generate_demos(config(llm), tmp_path / "val.jsonl", tmp_path / "sft.jsonl")
    assert report.kept == 1 and dict(report.dropped) == {"judge_failed": 1}  # task 2 asks something else


async def test_teacher_failures_are_counted_episodes_and_nothing_is_lost(llm, tmp_path):
    answers = iter([{"content": "", "tool_calls": [("get_gas_price", '{"city": "Boston"}')]},
                    {"content": "It is 4.15 USD."}, "garbage", "garbage"])
    llm.respond = lambda request: next(answers)
    write_tasks(tmp_path / "tasks.jsonl", ["What is the gas price in Boston?", "And in Denver?"])
    cfg = config(llm, "generate.max_retries=0", "rollout.retries=0", "rollout.concurrency=1")
    report = await generate_demos(cfg, tmp_path / "tasks.jsonl", tmp_path / "sft.jsonl")
    assert report.kept == 1 and dict(report.dropped) == {"episode_failed": 1}
    dropped = read_rows(tmp_path / "sft.jsonl.dropped.jsonl")
    assert "not a chat completion" in dropped[0]["reason"] or "not JSON" in dropped[0]["reason"]
    llm.respond = lambda request: "garbage"
    write_tasks(tmp_path / "more.jsonl", ["What is the gas price in Houston?"])
    with pytest.raises(GenerateError, match=r"no demonstration was kept from 1 episode\(s\); dropped: episode_failed 1"):
        await generate_demos(cfg, tmp_path / "more.jsonl", tmp_path / "none.jsonl")


def test_cli_generate_tasks(llm, tmp_path):
    writer.seen = []
    llm.respond = writer
    run = subprocess.run([sys.executable, "-m", "ajet.cli", "generate", "tasks", "--conf", str(TOOL_YAML), "-n", "6",
                          "--out", str(tmp_path / "tasks.jsonl"), f"generate.teacher={{base_url: '{llm.base_url}'}}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert len(read_rows(tmp_path / "tasks.jsonl")) == 6 and '"kept": 6' in run.stdout
    bad = subprocess.run([sys.executable, "-m", "ajet.cli", "generate", "demos", "--conf", str(TOOL_YAML)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--out" in bad.stderr


# ------------------------------------------------------------------ the grounded judge


@pytest.mark.parametrize("answer, calls, feedback", [
    ("It costs 4.15 USD.", [{"name": "p", "arguments": {}, "result": {"price": 4.15}}], None),
    ("About 3.6 USD per GJ.", [{"name": "p", "arguments": {}, "result": {"converted": 3.6017}}], None),  # rounded
    ("Texas made 9,730 Bcf in 2021.", [{"name": "p", "arguments": {}, "result": {"bcf": 9730}}], None),  # 2021 from the question
    ("It costs 5 USD.", [{"name": "p", "arguments": {}, "result": {"price": 4.15}}],
     "ungrounded: the answer states 5, which no tool returned"),
    ("It is cheap.", [{"name": "p", "arguments": {}, "result": {"price": 4.15}}],
     "ungrounded: the answer states none of the numbers the tools returned"),
    ("The hub is Henry Hub.", [{"name": "p", "arguments": {}, "result": {"hub": "Henry Hub"}}], None),
    ("The hub is unknown.", [{"name": "p", "arguments": {}, "result": {"hub": "Henry Hub"}}],
     "ungrounded: the answer mentions none of the values the tools returned"),
    ("It costs 4.15.", [], "too_few_tool_calls: made 0 tool call(s); at least 1 needed"),
    ("It costs 4.15.", [{"name": "p", "arguments": {}, "error": "unknown city"}],
     "tool_error: tool call 'p' failed: unknown city"),
    ("", [{"name": "p", "arguments": {}, "result": {"price": 4.15}}], "no_answer"),
])
async def test_grounded_judge(answer, calls, feedback):
    task = Task(task_id="t", query="How much gas did Texas make in 2021?")
    reward = await GroundedJudge().score(task, WorkflowOutput(answer=answer, tool_calls=calls,
                                                              metadata={"stop_reason": "answered"}))
    if feedback is None:
        assert reward.total == 1.0 and reward.parts == {"grounded": 1.0}
    else:
        assert reward.total == 0.0 and reward.feedback.startswith(feedback)


def test_dotenv_beside_the_yaml_fills_env_interpolations(tmp_path, monkeypatch):
    monkeypatch.delenv("AJET_TEST_TEACHER_KEY", raising=False)
    monkeypatch.delenv("AJET_TEST_OTHER", raising=False)
    monkeypatch.setenv("AJET_TEST_OTHER", "from-the-environment")
    (tmp_path / ".env").write_text('AJET_TEST_TEACHER_KEY="sk-from-dotenv"\nAJET_TEST_OTHER=from-the-file\n')
    (tmp_path / "x.yaml").write_text(
        "ajet:\n  workflow: ajet.workflows.mcp_agent:McpAgent\n  generate:\n    teacher:\n"
        "      base_url: http://127.0.0.1:9/v1\n      api_key: ${oc.env:AJET_TEST_TEACHER_KEY}\n"
        "    question_writer: {base_url: 'http://127.0.0.1:9/v1', api_key: '${oc.env:AJET_TEST_OTHER}'}\n")
    cfg = load_config(tmp_path / "x.yaml")
    assert cfg.generate.teacher.api_key == "sk-from-dotenv"
    assert cfg.generate.question_writer.api_key == "from-the-environment"  # the environment wins over .env
    (tmp_path / ".env").unlink()
    monkeypatch.delenv("AJET_TEST_TEACHER_KEY")
    with pytest.raises(ConfigError, match="AJET_TEST_TEACHER_KEY"):
        load_config(tmp_path / "x.yaml")


def test_self_teacher_constrains_the_first_call_of_the_workflow_preset() -> None:
    # the mcp_agent preset lists first_tool_choice: null; "not set" must still get the cold-start rule
    from ajet.config.loader import load_config
    from ajet.generate.demos import _demo_config

    yaml = Path(__file__).resolve().parents[2] / "tutorial" / "example_mcp_pipeline" / "pipeline.yaml"
    cfg = load_config(yaml, ["model.path=tiny-random"])
    assert cfg.workflow_args["first_tool_choice"] is None
    assert _demo_config(cfg, teacher_is_self=True).workflow_args["first_tool_choice"] == "required"
    assert _demo_config(cfg, teacher_is_self=True).workflow_args["parallel_tool_calls"] is False
    assert _demo_config(cfg, teacher_is_self=False).workflow_args["parallel_tool_calls"] is None
    assert _demo_config(cfg, teacher_is_self=False).workflow_args["first_tool_choice"] == "auto"
    mine = load_config(yaml, ["model.path=tiny-random", "workflow_args.first_tool_choice=auto"])
    assert _demo_config(mine, teacher_is_self=True).workflow_args["first_tool_choice"] == "auto"
