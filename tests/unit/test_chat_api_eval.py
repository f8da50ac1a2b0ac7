"""`ajet eval --endpoint URL`: the function-calling tutorial's tasks against a chat API over real HTTP,
scored with the six function-calling metrics, written to eval.json and predictions.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ajet.cli import main
from ajet.config.schema import TaskReaderConfig
from ajet.task_reader import read_tasks
from tests.unit.fake_openai import ScriptedOpenAI

TUTORIAL = Path(__file__).resolve().parents[2] / "tutorial" / "example_function_calling"
YAML = TUTORIAL / "function_calling.yaml"


@pytest.fixture(scope="module")
def api():
    fake = ScriptedOpenAI(model="hosted-fc")
    fake.start()
    yield fake
    fake.stop()


def _val_calls() -> dict[str, list[dict]]:
    cfg = TaskReaderConfig(type="xlam", train=str(TUTORIAL / "xlam_fixture.json"), split_ratio=0.8)
    return {t.query: t.answer["calls"] for t in read_tasks(cfg, "val")}


def test_eval_against_a_chat_api_writes_the_six_metrics(api, tmp_path):
    expected = _val_calls()
    answered = iter(range(1000))

    def respond(request):
        calls = expected[request["messages"][-1]["content"]]
        if next(answered) == 0:  # the first episode calls a tool that does not exist
            calls = [{"name": "no_such_tool", "arguments": {}}]
        return {"content": None, "tool_calls": [(c["name"], json.dumps(c["arguments"])) for c in calls]}

    api.reset()
    api.respond = respond
    code = main(["eval", "--conf", str(YAML), "--endpoint", api.base_url, "--served-model", "hosted-fc",
                 "--api-key", "sk-test", "eval.limit=4", f"output_dir={tmp_path}"])
    assert code == 0
    request = api.requests[0]
    assert request["model"] == "hosted-fc" and request["tools"]  # the task's tools went to the API
    assert api.headers[0]["authorization"] == "Bearer sk-test"
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["model"] == "hosted-fc" and report["tasks"] == 4
    parts = report["reward_parts"]
    assert set(parts) == {"parse_rate", "func_name_accuracy", "param_f1", "schema_hit_rate", "exec_rate"}
    assert parts["func_name_accuracy"] == pytest.approx(0.75) and parts["schema_hit_rate"] == pytest.approx(0.75)
    assert report["reward_mean"] < 1 and report["success_rate"] == pytest.approx(0.75)
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    assert len(rows) == 4 and sum(r["success"] for r in rows) == 3
    wrong = next(r for r in rows if not r["success"])
    assert wrong["tool_calls"] == [{"name": "no_such_tool", "arguments": {}}]
    assert wrong["expected"]["calls"] and wrong["parts"]["func_name_accuracy"] == 0.0
