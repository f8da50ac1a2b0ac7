"""The chat_api engine and the passthrough gateway, against a scripted OpenAI chat server over real
HTTP (where a hosted model would be), with the energy tutorial's real MCP server and judge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.engine.base import SamplingParams
from ajet.engine.chat_api import ChatAPIEngine
from ajet.engine.factory import build_engine
from ajet.errors import ConfigError, EngineError, GatewayError
from ajet.rollout.stack import RolloutStack, load_tokenizer, settings_for
from ajet.task_reader import read_tasks
from tests.unit.fake_openai import ScriptedOpenAI

TOOL_YAML = Path(__file__).resolve().parents[2] / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


@pytest.fixture(scope="module")
def server():
    fake = ScriptedOpenAI()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def fake(server):
    server.reset()
    return server


async def test_chat_forwards_the_body_and_names_the_model(fake):
    fake.script = [{"content": "hi"}]
    engine = ChatAPIEngine(fake.base_url, api_key="sk-test")
    async with engine:
        reply = await engine.chat({"messages": [{"role": "user", "content": "hello"}], "temperature": 0.5})
    assert engine.model == engine.model_name == "teacher-model"  # from GET /v1/models
    assert reply["choices"][0]["message"]["content"] == "hi"
    assert fake.requests[0] == {"messages": [{"role": "user", "content": "hello"}], "temperature": 0.5,
                                "model": "teacher-model", "stream": False}
    assert fake.headers[0]["authorization"] == "Bearer sk-test"


async def test_transient_failures_are_retried_and_bad_replies_are_clear_errors(fake):
    engine = ChatAPIEngine(fake.base_url, model="m", max_retries=1)
    body = {"messages": [{"role": "user", "content": "x"}]}
    async with engine:
        fake.script = ["500", {"content": "second try"}]
        assert (await engine.chat(body))["choices"][0]["message"]["content"] == "second try"
        fake.script = ["500", "500"]
        with pytest.raises(EngineError, match=r"failed after 2 attempt\(s\): HTTP 500.*; HTTP 500"):
            await engine.chat(body)
        fake.script = ["garbage"]
        with pytest.raises(EngineError, match="with a body that is not JSON: '<html>this is not JSON</html>'"):
            await engine.chat(body)
        fake.script = ["400"]
        with pytest.raises(GatewayError, match=r"refused the request \(HTTP 400\): prompt too long") as info:
            await engine.chat(body)
        assert info.value.status == 400
    slow = ChatAPIEngine(fake.base_url, model="m", timeout_s=0.3, max_retries=0)
    fake.script = [{"sleep": 1.0, "content": "late"}]
    async with slow:
        with pytest.raises(EngineError, match="no answer within 0.3 s"):
            await slow.chat(body)


async def test_the_chat_engine_refuses_token_generation():
    engine = ChatAPIEngine("http://127.0.0.1:9/v1", model="m")
    with pytest.raises(ConfigError, match="cannot be trained"):
        await engine.generate([1, 2, 3], SamplingParams())
    with pytest.raises(ConfigError, match="needs an http"):
        ChatAPIEngine("127.0.0.1:8000")


def test_config_rules():
    with pytest.raises(ConfigError, match="engine.type is 'chat_api' but engine.base_url is not set"):
        load_config(TOOL_YAML, ["engine.type=chat_api"])
    cfg = load_config(TOOL_YAML, ["engine.type=chat_api", "engine.base_url=http://127.0.0.1:9/v1"])
    assert isinstance(build_engine(cfg), ChatAPIEngine) and load_tokenizer(cfg, build_engine(cfg)) is None


def _energy_reply(request: dict) -> dict:
    """A teacher that calls the right tool for price questions, then states the result."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        result = json.loads(last["content"])
        return {"content": f"The answer is {result.get('flow_mmcf_per_day', result.get('price_usd_per_mmbtu'))}."}
    return {"content": "", "tool_calls": [("get_pipeline_flow", json.dumps({"pipeline": "Northern Natural"}))]}


async def test_rollout_through_the_passthrough_gateway_scores_and_records_no_tokens(fake, tmp_path):
    fake.respond = _energy_reply
    cfg = load_config(TOOL_YAML, ["engine.type=chat_api", f"engine.base_url={fake.base_url}", "eval.limit=1",
                                  f"output_dir={tmp_path}"])
    engine = build_engine(cfg)
    tasks = read_tasks(cfg.task_reader, "val", cfg.base_dir).tasks[:1]  # the Northern Natural flow question
    async with RolloutStack(cfg, engine, load_tokenizer(cfg, engine), tmp_path) as stack:
        batch = await stack.runner.run(tasks, settings_for(cfg, "val"), show_progress=False)
    (episode,) = batch.episodes
    assert episode.error is None and episode.reward.total == pytest.approx(1.0), episode.reward
    assert episode.output.tool_calls[0]["result"]["flow_mmcf_per_day"] == 5100
    assert len(episode.calls) == 2 and not episode.samples and all(not c.trained for c in episode.calls)
    assert episode.counters["tool_calls_parsed"] == 1
    first = fake.requests[0]
    assert first["model"] == "teacher-model" and len(first["tools"]) == 8 and first["tool_choice"] == "auto"
    assert first["max_tokens"] == 128 and first["temperature"] == 0.0  # rollout caps, val greedy
    line = json.loads((tmp_path / "episodes.jsonl").read_text().splitlines()[0])
    assert line["messages"][-1]["content"] == "The answer is 5100." and line["llm_calls"][0]["completion_ids"] == []


def test_ajet_eval_against_a_chat_endpoint_and_training_is_refused(fake, tmp_path):
    fake.respond = _energy_reply
    run = subprocess.run([sys.executable, "-m", "ajet.cli", "eval", "--conf", str(TOOL_YAML), "engine.type=chat_api",
                          f"engine.base_url={fake.base_url}", "eval.limit=2", f"output_dir={tmp_path}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["model"] == "teacher-model" and report["episodes"] == 2 and report["failed"] == 0
    assert "ajet eval · energy · teacher-model" in run.stdout
    train = subprocess.run([sys.executable, "-m", "ajet.cli", "--conf", str(TOOL_YAML), "engine.type=chat_api",
                            f"engine.base_url={fake.base_url}", f"output_dir={tmp_path}/train"],
                           capture_output=True, text=True, timeout=120)
    assert train.returncode == 2 and "cannot be trained" in train.stderr
