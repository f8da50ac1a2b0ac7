"""Task readers on real files: jsonl (bad rows, ids, mapping, splits, limit), huggingface on local
JSON / parquet / save_to_disk data written here, and python callables."""

from __future__ import annotations

import json
import logging
import textwrap

import pytest

from ajet.config.schema import FieldMapping, TaskReaderConfig
from ajet.errors import ConfigError, PluginError, TaskReaderError
from ajet.task_reader import read_tasks
from ajet.workflow import Task


def write_lines(path, lines):
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def jsonl_cfg(**kw) -> TaskReaderConfig:
    return TaskReaderConfig(type="jsonl", **kw)


# --- jsonl ------------------------------------------------------------------------------------


def test_bad_rows_are_skipped_with_file_and_line(tmp_path, caplog):
    path = write_lines(tmp_path / "train.jsonl", [
        {"query": "a", "answer": 1},                 # 1 ok
        "{not json",                                 # 2
        {"answer": 2},                               # 3 no query
        {"query": 5},                                # 4 query not a string
        "",                                          # 5 blank: ignored, not a row
        {"query": "b", "task_id": "x1"},             # 6 ok
        {"query": "c", "task_id": "x1"},             # 7 duplicate explicit id
        [1, 2],                                      # 8 not an object
        {"query": "a", "answer": 1},                 # 9 same as line 1: kept with its own id
        {"query": "   "},                            # 10 empty query
    ])
    with caplog.at_level(logging.WARNING, logger="ajet.task_reader"):
        ts = read_tasks(jsonl_cfg(train="train.jsonl"), "train", base_dir=tmp_path)
    f = str(path)
    assert [(s.file, s.line) for s in ts.skipped] == [(f, 2), (f, 3), (f, 4), (f, 7), (f, 8), (f, 10)]
    reasons = [s.reason for s in ts.skipped]
    assert reasons[0].startswith("invalid JSON: Expecting property name enclosed in double quotes")
    assert reasons[1] == "missing query field 'query' (row has: answer); set task_reader.fields.query"
    assert reasons[2] == "query field 'query' is a int, expected a string"
    assert reasons[3] == f"duplicate task_id 'x1' (first at {f}:6)"
    assert reasons[4] == "row is a list, expected a JSON object"
    assert reasons[5] == "query field 'query' is empty"
    assert f"{f}:4: query field 'query' is a int" in caplog.text
    first = Task.stable_id("a", 1, {})
    assert [t.task_id for t in ts.tasks] == [first, "x1", f"{first}-2"]
    assert [t.query for t in ts.tasks] == ["a", "b", "a"]
    assert ts.source == f"jsonl:{f}"
    assert str(ts.skipped[0]).startswith(f"{f}:2: invalid JSON")


def test_ids_are_stable_across_reads(tmp_path):
    write_lines(tmp_path / "t.jsonl", [{"query": "q1"}, {"query": "q2"}])
    ids = [t.task_id for t in read_tasks(jsonl_cfg(train="t.jsonl"), "train", tmp_path).tasks]
    assert ids == [t.task_id for t in read_tasks(jsonl_cfg(train="t.jsonl"), "train", tmp_path).tasks]
    assert len(set(ids)) == 2 and all(len(i) == 12 for i in ids)


def test_file_without_good_rows_is_an_error(tmp_path):
    path = write_lines(tmp_path / "bad.jsonl", ["nope", {"question": "x"}, {"query": 1}])
    with pytest.raises(TaskReaderError) as info:
        read_tasks(jsonl_cfg(train=str(path)), "train")
    message = str(info.value)
    assert message.startswith(f"jsonl:{path}: no usable task rows (3 bad). First problems:")
    assert f"{path}:1: invalid JSON" in message
    assert f"{path}:2: missing query field 'query' (row has: question)" in message
    assert "Fix the rows or the field mapping (task_reader.fields)." in message


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(TaskReaderError, match="no rows found; the source is empty"):
        read_tasks(jsonl_cfg(train="empty.jsonl"), "train", tmp_path)
    with pytest.raises(TaskReaderError) as info:
        read_tasks(jsonl_cfg(train="data/nope.jsonl"), "train", tmp_path)
    assert f"task_reader.train: task file {str(tmp_path / 'data' / 'nope.jsonl')!r} does not exist" in str(info.value)
    # the reader cannot tell who wrote the path: the hint gives the YAML's rule and the command line's
    assert "in the YAML resolves against the YAML's folder, one given on the command line against the current" \
        in str(info.value)
    with pytest.raises(TaskReaderError, match="task_reader.val: task file .*val.jsonl' does not exist"):
        read_tasks(jsonl_cfg(train="empty.jsonl", val="val.jsonl"), "val", tmp_path)


def test_dotted_field_mapping_and_metadata(tmp_path):
    tools = [{"type": "function", "function": {"name": "f"}}]
    write_lines(tmp_path / "t.jsonl", [
        {"id": 7, "info": {"question": "How much?", "gold": {"value": 3}, "source": "web"}, "tools": tools, "x": 1},
        {"id": 8, "info": {"question": "And now?"}, "tools": tools},  # no answer: None
    ])
    fields = FieldMapping(query="info.question", answer="info.gold.value", task_id="id")
    ts = read_tasks(jsonl_cfg(train="t.jsonl", fields=fields), "train", tmp_path)
    first, second = ts.tasks
    assert (first.task_id, first.query, first.answer) == ("7", "How much?", 3)
    assert second.answer is None
    # metadata: every top-level field except the exactly mapped ones ('id'); 'info' stays
    assert set(first.metadata) == {"info", "tools", "x"} and first.metadata["tools"] == tools
    picked = FieldMapping(query="info.question", answer=None, task_id=None, metadata=["tools", "info.source"])
    ts = read_tasks(jsonl_cfg(train="t.jsonl", fields=picked), "train", tmp_path)
    assert ts.tasks[0].metadata == {"tools": tools, "source": "web"}
    assert ts.tasks[1].metadata == {"tools": tools}
    assert ts.tasks[0].answer is None


def test_list_index_paths_and_row_metadata_object(tmp_path):
    write_lines(tmp_path / "t.jsonl", [
        {"messages": [{"role": "user", "content": "hi"}], "answer": "yo", "metadata": {"level": 2}, "tag": "a"},
    ])
    ts = read_tasks(jsonl_cfg(train="t.jsonl", fields=FieldMapping(query="messages.0.content")), "train", tmp_path)
    task = ts.tasks[0]
    assert task.query == "hi" and task.answer == "yo"
    assert task.metadata == {"messages": [{"role": "user", "content": "hi"}], "level": 2, "tag": "a"}


def _numbered(tmp_path, n=10):
    return write_lines(tmp_path / "t.jsonl", [{"query": f"q{i}", "task_id": f"id{i}"} for i in range(n)])


def test_split_ratio_is_deterministic_and_disjoint(tmp_path):
    _numbered(tmp_path)
    cfg = jsonl_cfg(train="t.jsonl", split_ratio=0.8, shuffle_seed=0)
    train = [t.task_id for t in read_tasks(cfg, "train", tmp_path).tasks]
    val = [t.task_id for t in read_tasks(cfg, "val", tmp_path).tasks]
    assert len(train) == 8 and len(val) == 2  # round(10 * 0.8)
    assert set(train) | set(val) == {f"id{i}" for i in range(10)} and not set(train) & set(val)
    assert train == sorted(train, key=lambda s: int(s[2:]))  # file order kept inside a part
    assert val == [t.task_id for t in read_tasks(cfg, "val", tmp_path).tasks]  # same again
    other = jsonl_cfg(train="t.jsonl", split_ratio=0.8, shuffle_seed=1)
    assert [t.task_id for t in read_tasks(other, "val", tmp_path).tasks] != val
    assert "val part of split_ratio=0.8, shuffle_seed=0" in read_tasks(cfg, "val", tmp_path).source


def test_split_ratio_keeps_one_task_on_each_side(tmp_path):
    _numbered(tmp_path, n=3)
    cfg = jsonl_cfg(train="t.jsonl", split_ratio=0.99)
    assert len(read_tasks(cfg, "train", tmp_path)) == 2 and len(read_tasks(cfg, "val", tmp_path)) == 1


def test_limit(tmp_path):
    _numbered(tmp_path)
    ts = read_tasks(jsonl_cfg(train="t.jsonl", limit=3), "train", tmp_path)
    assert [t.task_id for t in ts.tasks] == ["id0", "id1", "id2"]
    full = jsonl_cfg(train="t.jsonl", split_ratio=0.5)
    limited = jsonl_cfg(train="t.jsonl", split_ratio=0.5, limit=2)
    # limit applies after the split: the first 2 of the same val part
    val = [t.task_id for t in read_tasks(full, "val", tmp_path).tasks]
    assert [t.task_id for t in read_tasks(limited, "val", tmp_path).tasks] == val[:2]


def test_val_file_and_no_val_source(tmp_path):
    _numbered(tmp_path)
    write_lines(tmp_path / "v.jsonl", [{"query": "val question"}])
    ts = read_tasks(jsonl_cfg(train="t.jsonl", val="v.jsonl"), "val", tmp_path)
    assert [t.query for t in ts.tasks] == ["val question"]
    empty = read_tasks(jsonl_cfg(train="t.jsonl"), "val", tmp_path)
    assert empty.tasks == [] and empty.skipped == []
    assert "no val source (set task_reader.val or task_reader.split_ratio)" in empty.source


def test_contradictory_settings(tmp_path):
    with pytest.raises(ConfigError, match="task_reader.val = 'v.jsonl' and task_reader.split_ratio = 0.5 are both set"):
        read_tasks(jsonl_cfg(train="t.jsonl", val="v.jsonl", split_ratio=0.5), "train", tmp_path)
    with pytest.raises(ConfigError, match="the jsonl reader takes no extra arguments"):
        read_tasks(jsonl_cfg(train="t.jsonl", kwargs={"x": 1}), "train", tmp_path)
    with pytest.raises(TaskReaderError, match="task_reader.train is not set"):
        read_tasks(jsonl_cfg(), "train", tmp_path)


# --- huggingface --------------------------------------------------------------------------------


def hf_cfg(tmp_path, **kw) -> TaskReaderConfig:
    kw.setdefault("kwargs", {"cache_dir": str(tmp_path / "hf_cache")})
    return TaskReaderConfig(type="huggingface", **kw)


def test_huggingface_folder_of_json_files_with_splits(tmp_path):
    data = tmp_path / "ds"
    data.mkdir()
    write_lines(data / "train.jsonl", [{"question": f"t{i}", "label": i} for i in range(4)])
    write_lines(data / "validation.jsonl", [{"question": "v0", "label": 9}, {"question": None, "label": 1}])
    fields = FieldMapping(query="question", answer="label")
    cfg = hf_cfg(tmp_path, path="ds", val="validation", fields=fields)
    train = read_tasks(cfg, "train", tmp_path)
    assert [(t.query, t.answer) for t in train.tasks] == [("t0", 0), ("t1", 1), ("t2", 2), ("t3", 3)]
    val = read_tasks(cfg, "val", tmp_path)
    assert [(t.query, t.answer) for t in val.tasks] == [("v0", 9)]
    # the second row's question is null: skipped with the dataset, split and row number
    assert [(s.file, s.line) for s in val.skipped] == [(f"{data}[validation]", 2)]
    assert val.skipped[0].reason == "query field 'question' is a NoneType, expected a string"
    assert len(read_tasks(hf_cfg(tmp_path, path="ds", fields=fields, limit=2), "train", tmp_path)) == 2


def test_huggingface_parquet_data_file(tmp_path):
    import datasets

    datasets.Dataset.from_list([{"query": "p0", "answer": "a"}, {"query": "p1", "answer": "b"}]).to_parquet(
        str(tmp_path / "tasks.parquet")
    )
    ts = read_tasks(hf_cfg(tmp_path, train="tasks.parquet"), "train", tmp_path)
    assert [t.query for t in ts.tasks] == ["p0", "p1"]
    assert ts.source == f"huggingface:{tmp_path / 'tasks.parquet'}"
    split = hf_cfg(tmp_path, train="tasks.parquet", split_ratio=0.5)
    assert len(read_tasks(split, "train", tmp_path)) == 1 and len(read_tasks(split, "val", tmp_path)) == 1


def test_huggingface_builder_named_by_path(tmp_path):
    # JSON lines in a .txt file: the suffix says 'text', path: json says how to read it. The config
    # loader resolves path against the YAML folder, so '<folder>/json' must still mean the builder.
    write_lines(tmp_path / "rows.txt", [{"query": "a"}, {"query": "b"}])
    for path in ("json", str(tmp_path / "json")):
        ts = read_tasks(hf_cfg(tmp_path, path=path, train="rows.txt"), "train", tmp_path)
        assert [t.query for t in ts.tasks] == ["a", "b"]


def test_huggingface_save_to_disk_folder(tmp_path):
    import datasets

    dd = datasets.DatasetDict({
        "train": datasets.Dataset.from_list([{"query": "a"}, {"query": "b"}]),
        "test": datasets.Dataset.from_list([{"query": "c"}]),
    })
    dd.save_to_disk(str(tmp_path / "saved"))
    cfg = hf_cfg(tmp_path, path="saved", val="test")
    assert [t.query for t in read_tasks(cfg, "train", tmp_path).tasks] == ["a", "b"]
    assert [t.query for t in read_tasks(cfg, "val", tmp_path).tasks] == ["c"]
    with pytest.raises(TaskReaderError, match=r"has splits \['test', 'train'\], not 'validation'"):
        read_tasks(hf_cfg(tmp_path, path="saved", val="validation"), "val", tmp_path)


def test_huggingface_errors(tmp_path):
    with pytest.raises(TaskReaderError, match=r"task_reader.train: data file '.*missing.jsonl' does not exist"):
        read_tasks(hf_cfg(tmp_path, train="missing.jsonl"), "train", tmp_path)
    with pytest.raises(TaskReaderError, match="is a split name but task_reader.path is not set"):
        read_tasks(hf_cfg(tmp_path, train="train"), "train", tmp_path)
    data = tmp_path / "ds"
    data.mkdir()
    write_lines(data / "train.jsonl", [{"query": "x"}])
    with pytest.raises(TaskReaderError) as info:
        read_tasks(hf_cfg(tmp_path, path="ds", val="validation"), "val", tmp_path)
    assert "loading" in str(info.value) and 'Unknown split "validation"' in str(info.value)
    assert "The reader is offline" in str(info.value)


def test_huggingface_hub_id_is_not_downloaded(tmp_path):
    with pytest.raises(TaskReaderError, match="The reader is offline"):
        read_tasks(hf_cfg(tmp_path, path="nobody-owns-this/ajet-missing-dataset"), "train", tmp_path)


# --- python -----------------------------------------------------------------------------------

READER = textwrap.dedent(
    """
    from ajet import Task

    def tasks(split, n=2, prefix="q"):
        rows = [{"query": f"{prefix}{split}{i}", "answer": i} for i in range(n)]
        rows.append(Task(task_id="fixed", query="from a Task"))
        rows.append("not a row")
        return rows

    def only_train(split):
        return [{"query": "t"}] if split == "train" else []

    async def async_tasks(split):
        return [{"query": "async " + split}]

    def generated(split):
        for i in range(1000):
            yield {"query": f"g{i}"}

    def broken(split):
        raise RuntimeError("database down")

    def scalar(split):
        return 42

    def empty(split):
        return []

    NOT_CALLABLE = [1, 2]
    """
)


def py_cfg(tmp_path, fn, **kw):
    (tmp_path / "reader.py").write_text(READER)
    return TaskReaderConfig(type="python", function=f"reader.py:{fn}", **kw)


def test_python_reader(tmp_path):
    ts = read_tasks(py_cfg(tmp_path, "tasks", kwargs={"n": 3, "prefix": "Q"}), "train", tmp_path)
    assert [t.query for t in ts.tasks] == ["Qtrain0", "Qtrain1", "Qtrain2", "from a Task"]
    assert ts.tasks[1].answer == 1 and ts.tasks[3].task_id == "fixed"
    assert [(s.file, s.line, s.reason) for s in ts.skipped] == [
        ("python:reader.py:tasks", 5, "row is a str, expected a JSON object")]
    val = read_tasks(py_cfg(tmp_path, "tasks"), "val", tmp_path)
    assert [t.query for t in val.tasks] == ["qval0", "qval1", "from a Task"]


def test_python_reader_splits_limits_and_async(tmp_path):
    assert read_tasks(py_cfg(tmp_path, "only_train"), "val", tmp_path).tasks == []  # no val split: allowed
    assert [t.query for t in read_tasks(py_cfg(tmp_path, "async_tasks"), "val", tmp_path).tasks] == ["async val"]
    ts = read_tasks(py_cfg(tmp_path, "generated", limit=5), "train", tmp_path)
    assert [t.query for t in ts.tasks] == ["g0", "g1", "g2", "g3", "g4"]
    ratio = py_cfg(tmp_path, "tasks", kwargs={"n": 9}, split_ratio=0.5)
    train, val = read_tasks(ratio, "train", tmp_path), read_tasks(ratio, "val", tmp_path)
    assert len(train) == 5 and len(val) == 5  # 10 tasks from split='train', cut in half
    assert all("train" in t.query or t.task_id == "fixed" for t in val.tasks)


async def test_python_async_reader_inside_a_running_loop(tmp_path):
    ts = read_tasks(py_cfg(tmp_path, "async_tasks"), "train", tmp_path)
    assert [t.query for t in ts.tasks] == ["async train"]


def test_python_reader_errors(tmp_path):
    with pytest.raises(TaskReaderError, match=r"python:reader.py:broken\(split='train'\) raised RuntimeError: database down"):
        read_tasks(py_cfg(tmp_path, "broken"), "train", tmp_path)
    with pytest.raises(TaskReaderError, match="returned a int; return a list"):
        read_tasks(py_cfg(tmp_path, "scalar"), "train", tmp_path)
    with pytest.raises(PluginError, match="names a list, not a function"):
        read_tasks(py_cfg(tmp_path, "NOT_CALLABLE"), "train", tmp_path)
    with pytest.raises(PluginError, match="has no attribute 'nope'"):
        read_tasks(py_cfg(tmp_path, "nope"), "train", tmp_path)
    with pytest.raises(TaskReaderError, match=r"python:reader.py:empty\(split='train'\): no rows found"):
        read_tasks(py_cfg(tmp_path, "empty"), "train", tmp_path)
    with pytest.raises(TaskReaderError, match="task_reader.function is not set"):
        read_tasks(TaskReaderConfig(type="python"), "train", tmp_path)


def test_the_docs_examples_run(tmp_path):
    """docs/task_readers.md: the python reader example and the JSONL row example work as shown."""
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).parents[2] / "docs" / "task_readers.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if b.startswith("# tasks.py"))
    (tmp_path / "tasks.py").write_text(code)
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "tasks.py:make_tasks" in b)
    cfg = TaskReaderConfig(**yaml.safe_load(block)["task_reader"])
    train, val = read_tasks(cfg, "train", tmp_path), read_tasks(cfg, "val", tmp_path)
    assert len(train) == 50 and len(val) == 50
    assert (train.tasks[3].query, train.tasks[3].answer, train.tasks[3].task_id) == ("What is 3 + 7?", 10, "train-3")
    (tmp_path / "row.jsonl").write_text(re.findall(r"```jsonl\n(.*?)```", doc, re.S)[0])
    task = read_tasks(jsonl_cfg(train="row.jsonl"), "train", tmp_path).tasks[0]
    assert task.task_id == "gas-001" and task.answer["calls"][0]["name"] == "get_price"


# --- hostile files (issue 7, item 8) -----------------------------------------------------------


def test_a_byte_order_mark_is_not_part_of_the_first_row(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"query": "first"}\n{"query": "second"}\n')  # what Notepad writes
    ts = read_tasks(jsonl_cfg(train=str(path)), "train")
    assert [t.query for t in ts.tasks] == ["first", "second"] and ts.skipped == []


def test_deep_rows_and_text_that_is_not_unicode_are_skipped_and_reported(tmp_path):
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join([
        '{"query": "ok"}',
        '{"query": "lone \\ud800 surrogate"}',  # valid JSON, not valid Unicode
        '{"query": "q", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}",  # json.loads: RecursionError
        '{"query": "q2", "meta": ' + "[" * 80 + "]" * 80 + "}",  # parses, too deep to render or store
        '{"query": "q3", "meta": {"\\udfff": 1}}',
        '{"query": "fine", "meta": ' + "[" * 20 + "]" * 20 + "}",
    ]) + "\n", encoding="utf-8")
    ts = read_tasks(jsonl_cfg(train=str(path)), "train")
    assert [t.query for t in ts.tasks] == ["ok", "fine"]
    assert [(s.line, s.reason) for s in ts.skipped] == [
        (2, "row.query holds an unpaired surrogate '\\ud800' at character 5, which is not valid Unicode"),
        (3, "invalid JSON: nested deeper than 64 levels"),
        (4, "row is nested deeper than 64 levels"),
        (5, "a key in row.meta holds an unpaired surrogate, which is not valid Unicode"),
    ]


def test_a_python_reader_returning_bad_text_is_skipped_too(tmp_path):
    (tmp_path / "gen.py").write_text(textwrap.dedent('''
        from ajet import Task

        def tasks(split):
            return [{"query": "good"}, {"query": "bad \\ud83d"}, Task(task_id="t", query="also \\udc00 bad")]
    '''))
    ts = read_tasks(TaskReaderConfig(type="python", function="gen.py:tasks"), "train", base_dir=tmp_path)
    assert [t.query for t in ts.tasks] == ["good"]
    assert [s.reason.split(" holds")[0] for s in ts.skipped] == ["row.query", "task.query"]
