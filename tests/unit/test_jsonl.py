"""ajet.jsonl: what a crash leaves behind is resumed from, a broken line is refused by number."""

from __future__ import annotations

import json

import pytest

from ajet.errors import ConfigError
from ajet.jsonl import JsonlAppender, read_rows


def test_appender_resumes_after_a_line_cut_off_by_a_crash(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"n": 1}) + "\n" + '{"n": 2, "cut', encoding="utf-8")
    assert read_rows(path) == [{"n": 1}]
    with JsonlAppender(path) as out:
        assert out.existing == [{"n": 1}]
        out.write({"n": 3})
    assert read_rows(path) == [{"n": 1}, {"n": 3}] and out.written == 1


def test_a_broken_line_amid_rows_is_refused_by_number(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"n": 1}\nnot json\n{"n": 3}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as read_error:
        read_rows(path)
    # A reader that does not resume (a summary, a benchmark) is not told about --fresh.
    assert str(read_error.value) == f"{path}:2 is not a JSON line; fix or delete the file"
    with pytest.raises(ConfigError, match=r"rows.jsonl:2 is not a JSON line.*\(or pass --fresh to start over\)"):
        JsonlAppender(path)
    with JsonlAppender(path, fresh=True) as out:
        assert out.existing == []
        out.write({"n": 4})
    assert read_rows(path) == [{"n": 4}]


def test_a_missing_file_has_no_rows(tmp_path):
    assert read_rows(tmp_path / "absent.jsonl") == []
