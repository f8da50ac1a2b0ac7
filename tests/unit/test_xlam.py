"""The xlam task reader and converter on xLAM-shaped rows, and the shipped fixture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.cli import main
from ajet.config.schema import TaskReaderConfig
from ajet.errors import TaskReaderError
from ajet.task_reader import read_tasks
from ajet.task_reader.xlam import convert_xlam, parse_xlam_row, read_xlam_file, xlam_param_schema

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "tutorial" / "example_function_calling"

ROW = {"id": 7, "query": "Where is the nearest cafe to Paris, within 2 km?",
       "tools": json.dumps([{"name": "find_places", "description": "Find places.",
                             "parameters": {"city": {"type": "str", "description": "City."},
                                            "radius_km": {"type": "float, optional", "default": 1.0},
                                            "tags": {"type": "List[str]", "description": "Kinds of place."}}}]),
       "answers": json.dumps([{"name": "find_places", "arguments": {"city": "Paris", "radius_km": 2}}])}


def test_row_becomes_a_function_call_task_with_json_schema_tools():
    task, reason = parse_xlam_row(ROW)
    assert reason is None
    assert task.task_id == "xlam-7"
    assert task.answer == {"calls": [{"name": "find_places", "arguments": {"city": "Paris", "radius_km": 2}}]}
    spec = task.metadata["tools"][0]
    assert spec["type"] == "function"
    params = spec["function"]["parameters"]
    assert params["type"] == "object"
    assert params["properties"]["city"] == {"type": "string", "description": "City."}
    assert params["properties"]["radius_km"] == {"type": "number", "default": 1.0}
    assert params["properties"]["tags"]["type"] == "array"
    assert params["required"] == ["city", "tags"]  # "optional" and defaulted parameters are not required


@pytest.mark.parametrize("spec, schema, required", [
    ({"type": "int"}, {"type": "integer"}, True),
    ({"type": "Dict[str, Any], optional"}, {"type": "object"}, False),
    ({"type": "bool", "default": True}, {"type": "boolean", "default": True}, False),
    ({"type": "Union[int, str]"}, {}, True),  # not a type the schema can state: left open
])
def test_param_types(spec, schema, required):
    assert xlam_param_schema(spec) == (schema, required)


@pytest.mark.parametrize("row, reason", [
    ({**ROW, "tools": "[{bad json"}, "'tools' is not valid JSON"),
    ({**ROW, "answers": json.dumps({"name": "x"})}, "'answers' must be a list"),
    ({**ROW, "answers": json.dumps([{"arguments": {}}])}, "answers[0] is not {'name': str, 'arguments': object}"),
    ({**ROW, "query": "  "}, "missing or empty 'query'"),
    ([1, 2], "row is a list"),
])
def test_bad_rows_are_refused_with_the_reason(row, reason):
    task, why = parse_xlam_row(row)
    assert task is None and reason in why


def test_reader_skips_bad_rows_and_keeps_good_ones(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(ROW) + "\n{not json\n" + json.dumps({**ROW, "id": 8, "tools": "oops"}) + "\n")
    tasks = read_xlam_file(path)
    assert [t.task_id for t in tasks] == ["xlam-7"]
    assert [(s.line, s.reason.split(":")[0]) for s in tasks.skipped] == [(2, "invalid JSON"), (3, "'tools' is not valid JSON")]
    only_bad = tmp_path / "bad.json"
    only_bad.write_text(json.dumps([{"id": 1, "query": "q", "tools": "x", "answers": "[]"}]))
    with pytest.raises(TaskReaderError, match="no usable task rows"):
        read_xlam_file(only_bad)


def test_xlam_type_in_config_reads_train_and_val_parts():
    cfg = TaskReaderConfig(type="xlam", train=str(TUTORIAL / "xlam_fixture.json"), split_ratio=0.8)
    train, val = read_tasks(cfg, "train"), read_tasks(cfg, "val")
    assert (len(train), len(val)) == (192, 48)
    assert not {t.task_id for t in train} & {t.task_id for t in val}
    assert all(t.metadata["tools"] and t.answer["calls"] for t in train)


def test_converter_matches_the_reader_split_and_the_shipped_files(tmp_path):
    counts = convert_xlam(TUTORIAL / "xlam_fixture.json", tmp_path, val_ratio=0.2)
    assert counts == {"train": 192, "val": 48, "sft": 192, "skipped": 0}
    for name in ("train.jsonl", "val.jsonl", "sft.jsonl"):  # the tutorial ships exactly the converter's output
        assert (tmp_path / name).read_bytes() == (TUTORIAL / "data" / name).read_bytes(), name
    cfg = TaskReaderConfig(type="xlam", train=str(TUTORIAL / "xlam_fixture.json"), split_ratio=0.8)
    reader_val = [t.task_id for t in read_tasks(cfg, "val")]
    assert reader_val == [json.loads(line)["task_id"] for line in (tmp_path / "val.jsonl").open()]
    demo = json.loads((tmp_path / "sft.jsonl").open().readline())
    assert [m["role"] for m in demo["messages"]] == ["system", "user", "assistant"]
    call = demo["messages"][2]["tool_calls"][0]["function"]
    assert isinstance(call["arguments"], str) and isinstance(json.loads(call["arguments"]), dict)


def test_sft_demonstrations_render_with_trained_tool_calls(tiny_tokenizer):
    from ajet.render import ChatRenderer
    from ajet.trainer.sft_data import load_sft_samples

    samples, report = load_sft_samples(TUTORIAL / "data" / "sft.jsonl", ChatRenderer(tiny_tokenizer))
    assert len(samples) == 192 and not report.skipped
    trained = tiny_tokenizer.decode([t for t, m in zip(samples[0].input_ids, samples[0].loss_mask) if m])
    assert "<tool_call>" in trained and '"name": "' in trained  # the call is what SFT teaches


def test_fixture_is_what_the_script_writes(tmp_path):
    out = tmp_path / "fixture.json"
    subprocess.run([sys.executable, str(TUTORIAL / "make_fixture.py"), "--out", str(out),
                    "--heldout-dir", str(tmp_path)], check=True, capture_output=True)
    assert out.read_bytes() == (TUTORIAL / "xlam_fixture.json").read_bytes()
    rows = json.loads(out.read_text())
    asked = {r["query"] for r in rows}
    for name in ("heldout.json", "heldout2.json", "heldout3.json"):  # each drawn after the files before it, asking nothing they ask
        assert (tmp_path / name).read_bytes() == (TUTORIAL / name).read_bytes(), name
        held = json.loads((tmp_path / name).read_text())
        queries = {r["query"] for r in held}
        assert len(held) >= 100 and len(queries) == len(held) and not queries & asked
        assert min(r["id"] for r in held) >= len(rows)
        asked |= queries
    assert all(isinstance(r["tools"], str) and isinstance(r["answers"], str) for r in rows)  # xLAM's JSON strings
    assert sum(len(json.loads(r["answers"])) == 2 for r in rows) > 20  # parallel calls are in


def test_cli_data_xlam(tmp_path, capsys):
    assert main(["data", "xlam", str(TUTORIAL / "xlam_fixture.json"), "--out", str(tmp_path), "--val-ratio", "0.25"]) == 0
    assert "wrote 180 train tasks, 60 val tasks and 180 SFT demonstrations" in capsys.readouterr().out
    assert main(["data", "xlam", str(tmp_path / "missing.json"), "--out", str(tmp_path)]) == 2
