"""BFCL through bfcl-eval's own handler and checker, against a scripted endpoint over real HTTP and
against a local model served in-process."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("bfcl_eval.eval_checker.eval_runner", reason="bfcl-eval is not installed (pip install -e \".[bfcl]\" && pip install --no-deps bfcl-eval==2026.3.23)")

from ajet.eval.bfcl import checker_model_name, load_category, resolve_categories, run_bfcl  # noqa: E402
from ajet.cli import main  # noqa: E402
from ajet.errors import ConfigError  # noqa: E402
from tests.unit.fake_openai import ScriptedOpenAI  # noqa: E402

CATEGORIES = ["simple_python", "parallel", "irrelevance"]


def _truth_calls(category: str, limit: int) -> dict[str, list[tuple[str, dict]]]:
    """question text -> the calls of BFCL's ground truth (first allowed value of each argument)."""
    table = {}
    for entry, answer in load_category(category, limit):
        question = entry["question"][0][-1]["content"]
        calls = []
        for call in (answer or {}).get("ground_truth", []):
            (name, args), = call.items()
            calls.append((name, {k: v[0] for k, v in args.items() if v and v[0] != ""}))
        table[question] = calls
    return table


@pytest.fixture(scope="module")
def endpoint():
    fake = ScriptedOpenAI(model="scripted")
    fake.start()
    yield fake
    fake.stop()


def _answer_key(limit: int, wrong: bool = False):
    table = {q: c for cat in CATEGORIES for q, c in _truth_calls(cat, limit).items()}

    def respond(request: dict, fc: bool):
        question = request["messages"][-1]["content"]
        calls = table[question]
        if wrong and calls:
            name, args = calls[0]
            calls = [(name, {k: (v + 1 if isinstance(v, int) else v) for k, v in args.items()})]
        if not calls:  # irrelevance: no function fits, answer in words
            return {"content": "None of the functions can answer that."}
        if fc:
            return {"content": None, "tool_calls": [(n.replace(".", "_"), json.dumps(a)) for n, a in calls]}
        text = ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls)
        return {"content": f"[{text}]"}
    return respond


@pytest.mark.parametrize("mode", ["prompt", "fc"])
def test_correct_answers_score_full_marks(endpoint, tmp_path, mode):
    respond = _answer_key(limit=4)
    endpoint.reset()
    endpoint.respond = lambda req: respond(req, mode == "fc")
    report = run_bfcl(endpoint.base_url, categories=CATEGORIES, mode=mode, out_dir=tmp_path, limit=4, concurrency=4)
    assert {c: (r["correct"], r["total"]) for c, r in report["categories"].items()} == \
        {"irrelevance": (4, 4), "parallel": (4, 4), "simple_python": (4, 4)}
    first = endpoint.requests[0]
    if mode == "fc":  # functions went as OpenAI tools, greedy, capped
        assert first["tools"] and first["temperature"] == 0.0 and first["max_tokens"] == 256
    else:  # BFCL's system prompt carries the function docs; no tools field
        assert "tools" not in first and first["messages"][0]["role"] == "system"
        assert "[func_name1(params_name1=params_value1" in first["messages"][0]["content"]
    lines = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    assert len(lines) == 12 and all(line["valid"] for line in lines)
    assert json.loads((tmp_path / "eval.json").read_text())["accuracy_mean"] == 1.0


def test_wrong_values_are_caught_by_bfcls_checker(endpoint, tmp_path):
    respond = _answer_key(limit=3, wrong=True)
    endpoint.reset()
    endpoint.respond = lambda req: respond(req, False)
    report = run_bfcl(endpoint.base_url, categories=["simple_python"], mode="prompt", out_dir=tmp_path, limit=3)
    assert report["categories"]["simple_python"]["correct"] == 0
    errors = [json.loads(line)["error_type"] for line in (tmp_path / "predictions.jsonl").open()]
    assert all(e.startswith(("value_error", "type_error", "simple_function_checker")) for e in errors), errors


def test_failed_requests_count_as_wrong_with_the_reason(endpoint, tmp_path):
    endpoint.reset()
    endpoint.respond = lambda req: "400"
    report = run_bfcl(endpoint.base_url, categories=["simple_python"], mode="fc", out_dir=tmp_path, limit=2)
    row = report["categories"]["simple_python"]
    assert (row["correct"], row["total"], row["inference_failed"]) == (0, 2, 2)
    line = json.loads((tmp_path / "predictions.jsonl").open().readline())
    assert line["error_type"] == "ajet:inference_failed" and "BadRequestError" in line["error"]


def test_cli_against_an_endpoint(endpoint, tmp_path, capsys):
    respond = _answer_key(limit=2)
    endpoint.reset()
    endpoint.respond = lambda req: respond(req, True)
    code = main(["eval", "--benchmark", "bfcl", "--model", endpoint.base_url, "--categories", "simple_python",
                 "--limit", "2", "--out", str(tmp_path)])
    assert code == 0
    assert json.loads((tmp_path / "eval.json").read_text())["mode"] == "fc"  # endpoints default to fc
    assert endpoint.requests[0]["model"] == "scripted"  # the first model the endpoint lists


def test_categories_and_errors():
    assert resolve_categories(None) == ["simple_python"]
    assert "simple_java" in resolve_categories(["non_live"])
    with pytest.raises(ConfigError, match="multi-turn or agentic BFCL categories"):
        resolve_categories(["multi_turn_base"])
    with pytest.raises(ConfigError, match="--categories nonsense"):
        resolve_categories(["nonsense"])
    assert checker_model_name("prompt") != checker_model_name("fc")


def test_local_model_is_served_and_scored(tmp_path):
    report = run_bfcl("tiny-random", categories=["simple_python"], out_dir=tmp_path, limit=1, max_tokens=4)
    assert report["mode"] == "prompt"  # SmolLM2's own template has no tools
    line = json.loads((tmp_path / "predictions.jsonl").read_text())
    assert line["input_tokens"] > 50 and line["output_tokens"] <= 4
    assert line["valid"] is False and line["error_type"]  # BFCL says why (random weights: no valid call)
