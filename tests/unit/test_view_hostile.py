"""`ajet view` on run folders that were made to break it (issue 41), over real HTTP against a real
`ajet view` subprocess: every route answers (no 500, no hang, bounded memory), a line that cannot be
shown is a corrupt row and the lines after it still show, files that are not regular files inside the
folder are refused and named, a YAML alias bomb is refused, the Host header is checked, and beyond
loopback the viewer needs a key or does not start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.unit.view_run import ROOT, ajet_view, build_hostile_folders, hostile_episode, jsonl_text

@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return build_hostile_folders(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def url(folders, tmp_path_factory):
    with ajet_view([folders["bad"], folders["special"]], tmp_path_factory.mktemp("log") / "view.log") as address:
        yield address


def test_runs_answer_for_every_folder(url):
    runs = httpx.get(url + "api/runs", timeout=30)
    assert runs.status_code == 200 and len(runs.content) < 100_000  # the alias bomb was not expanded
    bad, special = runs.json()
    assert bad["steps"] == 2 and bad["problems"] == [] and bad["model"] == "tiny-random"
    problems = " | ".join(special["problems"])
    assert "episodes.jsonl is a FIFO" in problems and "val_episodes.jsonl is a link to /dev/zero" in problems
    assert "eval_episodes.jsonl is a link to" in problems and "outside the run folder" in problems
    assert "config.yaml" in problems and "alias" in problems
    metrics = httpx.get(url + "api/runs/0/metrics", timeout=30).json()
    assert [r["step"] for r in metrics["rows"]] == [1, 2] and len(metrics["corrupt"]) == 1


def test_every_bad_line_is_a_corrupt_row_and_later_lines_still_show(url):
    table = httpx.get(url + "api/runs/0/episodes", timeout=30).json()
    by_line = {r["line"]: r for r in table["rows"]}
    assert sorted(by_line) == list(range(1, 10))
    assert {n for n, r in by_line.items() if r.get("corrupt")} == {2, 4, 7, 8}  # 7, 8: fields of another type
    assert "nested deeper" in by_line[2]["reason"] and "nested deeper" in by_line[4]["reason"]
    assert by_line[9]["episode_id"] == "e9"  # the lines after the bad ones


@pytest.mark.parametrize("line", range(1, 10))
def test_each_episode_and_its_tokens_answer_without_a_500(url, line):
    for route in (f"api/runs/0/episodes/{line}", f"api/runs/0/episodes/{line}/tokens"):
        r = httpx.get(url + route, timeout=60)
        assert r.status_code == 200, (route, r.text[:500])
    compare = httpx.get(url + "api/runs/0/compare", params={"a": 1, "b": line}, timeout=60)
    assert compare.status_code in (200, 400), compare.text[:500]


def test_bad_sample_rows_leave_the_good_ones_shown(url):
    episode = httpx.get(url + "api/runs/0/episodes/1", timeout=30).json()
    assert [s["index"] for s in episode["_view"]["samples"]] == [1]
    tokens = httpx.get(url + "api/runs/0/episodes/1/tokens", timeout=60).json()
    assert tokens["source"] == "samples" and [s["ids"] for s in tokens["samples"]] == [[1, 2, 3]]
    for line in (5, 6):  # ids that are not integers (["x"], [Infinity]): that episode's tokens are a corrupt record
        body = httpx.get(url + f"api/runs/0/episodes/{line}/tokens", timeout=60).json()
        assert body["corrupt"] and "prompt_ids is not a list of integers" in body["reason"], body


def test_special_files_are_refused_without_hanging(url):
    for name in ("episodes", "val_episodes", "eval_episodes"):
        r = httpx.get(url + "api/runs/1/episodes", params={"file": name}, timeout=30)
        assert r.status_code == 200 and r.json()["total"] == 0


def test_the_host_header_must_name_loopback(url):
    for host in ("127.0.0.1", "localhost:1234", "[::1]:80"):
        assert httpx.get(url + "api/runs", headers={"host": host}, timeout=30).status_code == 200
    for host in ("evil.example", "evil.example:80", "127.0.0.1.evil.example", ""):
        r = httpx.get(url + "api/runs", headers={"host": host}, timeout=30)
        assert r.status_code == 403 and r.json()["error"]["code"] == "host_not_allowed", host


def test_beyond_loopback_without_a_key_it_does_not_start(folders):
    done = subprocess.run([sys.executable, "-m", "ajet.cli", "view", str(folders["bad"]), "--host", "0.0.0.0",
                           "--no-browser"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k != "AJET_VIEW_API_KEY"})
    assert done.returncode == 2 and "ajet view with --host 0.0.0.0 and no API key" in done.stderr
    assert "--api-key" in done.stderr and "Traceback" not in done.stderr


def test_with_a_key_the_api_needs_it(folders, tmp_path):
    with ajet_view([folders["bad"]], tmp_path / "view.log", "--api-key", "s3cret") as address:
        assert "?key=s3cret" in (tmp_path / "view.log").read_text()
        assert httpx.get(address, timeout=30).status_code == 200  # the page holds no run data
        assert httpx.get(address + "api/runs", timeout=30).status_code == 401
        assert httpx.get(address + "api/runs", headers={"authorization": "Bearer nope"}, timeout=30).status_code == 401
        assert httpx.get(address + "api/runs", headers={"authorization": "Bearer s3cret"}, timeout=30).status_code == 200


def test_an_over_long_line_is_a_corrupt_row_never_held_whole(tmp_path, monkeypatch):
    from ajet.view import jsonl_index
    from ajet.view.episodes import summarize_episode

    monkeypatch.setattr(jsonl_index, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(jsonl_index, "_CHUNK", 64)
    path = tmp_path / "episodes.jsonl"
    path.write_text(jsonl_text(hostile_episode(1), '{"episode_id": "' + "x" * 50_000 + '"}', hostile_episode(3)))
    index = jsonl_index.JsonlIndex(path, summarize_episode)
    index.refresh()
    first, long, last = index.lines()
    assert (first.summary["episode_id"], last.summary["episode_id"]) == ("e1", "e3")
    assert long.summary is None and "over the viewer's limit of 1,000" in long.error
    shown = index.read(long)
    assert shown["corrupt"] and len(shown["text"]) == jsonl_index.TEXT_SHOWN


def test_one_refresh_reads_a_bounded_amount_and_the_next_goes_on(tmp_path, monkeypatch):
    from ajet.view import jsonl_index
    from ajet.view.episodes import summarize_episode

    path = tmp_path / "episodes.jsonl"
    path.write_text(jsonl_text(*(hostile_episode(n) for n in range(10))))
    monkeypatch.setattr(jsonl_index, "MAX_REFRESH_BYTES", path.stat().st_size // 3)
    index = jsonl_index.JsonlIndex(path, summarize_episode)
    counts = []
    for _ in range(5):
        index.refresh()
        counts.append(len(index.lines()))
    assert counts[0] < 10 and index.behind == 0 and counts[-1] == 10 and counts == sorted(counts)
