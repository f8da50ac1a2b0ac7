"""`ajet view`'s API over real HTTP, on a real run folder of the tiny model (one GRPO step with
validation, and an `ajet eval` folder): runs and metrics, the episode table (filters, sort, pages),
one episode, its tokens against samples.jsonl and the tokenizer, comparison within a GRPO group, bad
parameters, corrupt and half-written lines, a growing file, and that nothing in the folder changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from ajet.algorithm.advantages import group_advantages
from ajet.view.jsonl_index import JsonlIndex
from tests.unit.view_run import ajet_view, build_eval_folder, build_view_run, copy_run


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("view")
    run = build_view_run(base / "made")
    evaluation = build_eval_folder(base / "made")
    damaged = copy_run(run, base / "damaged")
    with (damaged / "episodes.jsonl").open("a") as f:
        f.write("{this is not json at all" + "x" * 300 + "\n")
        f.write('{"episode_id": "cut-short", "reward": 0.5, "messa')  # a writer killed mid-line
    with (damaged / "metrics.jsonl").open("a") as f:
        f.write("[1, 2]\n")
    growing = copy_run(run, base / "growing")
    return {"run": run, "eval": evaluation, "damaged": damaged, "growing": growing,
            "before": {name: _snapshot(p) for name, p in (("run", run), ("eval", evaluation))}}


@pytest.fixture(scope="module")
def api(folders, tmp_path_factory):
    log = tmp_path_factory.mktemp("view-log") / "view.log"
    with ajet_view([folders[k] for k in ("run", "eval", "damaged", "growing")], log) as url:
        with httpx.Client(base_url=url + "api/", timeout=120) as client:
            yield client


def test_runs_and_their_metrics(api, folders):
    runs = api.get("runs").json()
    assert [r["id"] for r in runs] == [0, 1, 2, 3]
    run, evaluation = runs[0], runs[1]
    assert (run["model"], run["stages"], run["steps"], run["kind"]) == ("tiny-random", ["grpo"], 1, "training")
    assert run["episode_files"] == {"episodes": 4, "val_episodes": 2} and run["has_samples"]
    assert evaluation["kind"] == "eval" and evaluation["episode_files"] == {"eval_episodes": 2}
    assert evaluation["eval"]["episodes"] == 2
    metrics = api.get("runs/0/metrics").json()
    assert metrics == {"rows": _lines(folders["run"] / "metrics.jsonl"), "corrupt": []}
    assert metrics["rows"][0]["stage"] == "grpo" and "val_success_rate" in metrics["rows"][0]


def test_episode_table_filters_sorts_and_pages(api, folders):
    episodes = _lines(folders["run"] / "episodes.jsonl")
    body = api.get("runs/0/episodes").json()
    assert (body["file"], body["total"], body["matched"]) == ("episodes", 4, 4)
    assert [r["episode_id"] for r in body["rows"]] == [e["episode_id"] for e in episodes]
    first = body["rows"][0]
    assert (first["line"], first["turns"], first["stop"], first["step"]) == (1, 3, "length", 1)
    assert body["facets"]["steps"] == [1] and body["facets"]["corrupt"] == 0

    ranked = api.get("runs/0/episodes", params={"sort": "reward", "order": "desc"}).json()["rows"]
    assert [r["reward"] for r in ranked] == sorted((e["reward"] for e in episodes), reverse=True)
    top = max(e["reward"] for e in episodes)
    assert [r["reward"] for r in api.get("runs/0/episodes", params={"reward_min": top}).json()["rows"]] == [top]
    task = episodes[0]["task"]["task_id"]
    by_task = api.get("runs/0/episodes", params={"task": task}).json()
    assert by_task["matched"] == 2 and {r["task_id"] for r in by_task["rows"]} == {task}
    assert api.get("runs/0/episodes", params={"q": episodes[2]["answer"][:12]}).json()["rows"][0]["line"] == 3
    assert api.get("runs/0/episodes", params={"group": episodes[0]["group_id"]}).json()["matched"] == 2
    assert api.get("runs/0/episodes", params={"success": "true"}).json()["matched"] == sum(e["success"] for e in episodes)
    assert api.get("runs/0/episodes", params={"turns_min": 3, "tools_max": 0, "step": 1, "failure": "none",
                                              "stop": "length"}).json()["matched"] == 4
    assert api.get("runs/0/episodes", params={"turns_min": 4}).json()["matched"] == 0
    assert api.get("runs/0/episodes", params={"failure": "any"}).json()["matched"] == 0
    page = api.get("runs/0/episodes", params={"offset": 1, "limit": 2}).json()
    assert [r["line"] for r in page["rows"]] == [2, 3] and page["matched"] == 4
    val = api.get("runs/0/episodes", params={"file": "val_episodes"}).json()
    assert val["total"] == 2 and val["rows"][0]["episode_id"] == _lines(folders["run"] / "val_episodes.jsonl")[0]["episode_id"]


def test_one_episode_with_its_group_and_advantages(api, folders):
    episodes = _lines(folders["run"] / "episodes.jsonl")
    samples = _lines(folders["run"] / "samples.jsonl")
    body = api.get("runs/0/episodes/3").json()
    view = body.pop("_view")
    assert body == episodes[2]
    assert body["messages"][0] == {"role": "system", "content": "Answer briefly."}
    assert set(body["reward_parts"]) == {"length", "penalty.letter_e"}
    assert [m["line"] for m in view["group"]] == [i + 1 for i, e in enumerate(episodes) if e["group_id"] == body["group_id"]]
    mine = [s for s in samples if s["episode_id"] == body["episode_id"]]
    assert [s["advantage"] for s in view["samples"]] == [s["advantage"] for s in mine]
    assert [s["fork_reason"] for s in view["samples"]] == [s["fork_reason"] for s in body["samples"]]


def test_tokens_are_what_the_trainer_saw(api, folders, tiny_tokenizer):
    episodes = _lines(folders["run"] / "episodes.jsonl")
    samples = _lines(folders["run"] / "samples.jsonl")
    # samples.jsonl holds the advantages the step trained with: the group-normalised rewards
    advantages, _ = group_advantages([s["reward"] for s in samples], [s["group_id"] for s in samples])
    assert [s["advantage"] for s in samples] == pytest.approx(advantages)
    assert any(abs(a) > 0.1 for a in advantages)
    for line, episode in enumerate(episodes, start=1):
        body = api.get(f"runs/0/episodes/{line}/tokens").json()
        mine = [s for s in samples if s["episode_id"] == episode["episode_id"]]
        assert body["source"] == "samples" and body["tokenizer"] and len(body["samples"]) == len(mine) == 2
        for shown, recorded in zip(body["samples"], mine):
            assert shown["ids"] == recorded["input_ids"] and shown["mask"] == recorded["loss_mask"]
            assert shown["logprobs"] == recorded["old_logprobs"] and shown["advantage"] == recorded["advantage"]
            assert shown["text"] == [tiny_tokenizer.decode([t], clean_up_tokenization_spaces=False)
                                     for t in recorded["input_ids"]]
            assert [t for t, s in zip(shown["ids"], shown["special"]) if s] == [
                t for t in recorded["input_ids"] if t in tiny_tokenizer.all_special_ids]
        # each call's completion is in its sample, masked in, with the engine's logprobs
        calls = {c["index"]: c for c in episode["llm_calls"]}
        for sample in body["samples"]:
            trained = [(t, lp) for t, m, lp in zip(sample["ids"], sample["mask"], sample["logprobs"]) if m]
            expected = [(t, lp) for i in sample["calls"] for t, lp in zip(calls[i]["completion_ids"], calls[i]["logprobs"])]
            assert [t for t, _ in trained] == [t for t, _ in expected]
            assert [lp for _, lp in trained] == pytest.approx([lp for _, lp in expected])
        assert body["samples"][1]["fork_reason"] == episode["samples"][1]["fork_reason"] is not None


def test_eval_folder_shows_llm_calls(api, folders):
    episodes = _lines(folders["eval"] / "eval_episodes.jsonl")
    table = api.get("runs/1/episodes").json()
    assert table["file"] == "eval_episodes" and table["total"] == 2
    body = api.get("runs/1/episodes/1/tokens").json()
    assert body["source"] == "llm_calls" and "no samples.jsonl" in body["note"]
    call = episodes[0]["llm_calls"][0]
    first = body["samples"][0]
    assert first["ids"] == call["prompt_ids"] + call["completion_ids"]
    assert first["mask"] == [0] * len(call["prompt_ids"]) + [1] * len(call["completion_ids"])
    assert first["logprobs"][len(call["prompt_ids"]):] == call["logprobs"] and first["advantage"] is None
    assert api.get("runs/1/metrics").json() == {"rows": [], "corrupt": []}


def test_compare_two_episodes_of_a_group(api, folders):
    episodes = _lines(folders["run"] / "episodes.jsonl")
    a, b = [i + 1 for i, e in enumerate(episodes) if e["group_id"] == episodes[0]["group_id"]]
    body = api.get("runs/0/compare", params={"a": a, "b": b}).json()
    assert (body["a"]["episode_id"], body["b"]["episode_id"]) == (episodes[a - 1]["episode_id"], episodes[b - 1]["episode_id"])
    assert body["a"]["group_id"] == body["b"]["group_id"] and len(body["b"]["_view"]["samples"]) == 2
    other = next(i + 1 for i, e in enumerate(episodes) if e["group_id"] != episodes[0]["group_id"])
    refused = api.get("runs/0/compare", params={"a": a, "b": other})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "b"
    assert "different GRPO groups" in refused.json()["error"]["message"]


@pytest.mark.parametrize(("path", "params", "status", "param"), [
    ("runs/0/episodes", {"limit": "abc"}, 400, "limit"),
    ("runs/0/episodes", {"limit": "100000"}, 400, "limit"),
    ("runs/0/episodes", {"reward_min": "high"}, 400, "reward_min"),
    ("runs/0/episodes", {"success": "maybe"}, 400, "success"),
    ("runs/0/episodes", {"sort": "color"}, 400, "sort"),
    ("runs/0/episodes", {"file": "../config.yaml"}, 400, "file"),
    ("runs/0/episodes/abc", {}, 400, "line"),
    ("runs/0/episodes/99", {}, 404, "line"),
    ("runs/9/episodes", {}, 404, "run"),
    ("runs/0/compare", {"a": 1}, 400, "b"),
])
def test_bad_parameters_are_named(api, path, params, status, param):
    response = api.get(path, params=params)
    assert response.status_code == status
    assert response.json()["error"]["param"] == param and response.json()["error"]["message"]


def test_corrupt_and_half_written_lines_are_shown_as_such(api, folders):
    table = api.get("runs/2/episodes").json()
    assert table["total"] == 6 and table["facets"]["corrupt"] == 2 and table["facets"]["episodes"] == 4
    bad, cut = table["rows"][4:]
    assert bad == {"corrupt": True, "line": 5, "text": "{this is not json at all" + "x" * 176,
                   "reason": bad["reason"]} and bad["reason"].startswith("not JSON")
    assert cut["corrupt"] and cut["line"] == 6 and cut["reason"] == "half-written (no newline yet)"
    assert cut["text"] == '{"episode_id": "cut-short", "reward": 0.5, "messa'
    assert api.get("runs/2/episodes/5").json()["corrupt"] is True
    assert api.get("runs/2/episodes/6/tokens").json()["line"] == 6
    assert api.get("runs/2/episodes", params={"success": "false"}).json()["facets"]["corrupt"] == 2
    metrics = api.get("runs/2/metrics").json()
    assert len(metrics["rows"]) == 1 and metrics["corrupt"][0]["line"] == 2
    assert "not a JSON object" in metrics["corrupt"][0]["reason"]
    # the writer finishes its line: the next request shows the episode
    with (folders["damaged"] / "episodes.jsonl").open("a") as f:
        f.write('ges": [], "reward_float": NaN}\n')
    table = api.get("runs/2/episodes").json()
    assert table["facets"]["corrupt"] == 1
    assert [r["line"] for r in table["rows"]] == [1, 2, 3, 4, 6, 5]  # corrupt lines last
    assert table["rows"][4]["episode_id"] == "cut-short"
    response = api.get("runs/2/episodes/6")
    assert "NaN" not in response.text and response.json()["reward_float"] is None  # NaN is not JSON


def test_a_growing_file_is_followed(api, folders):
    path = folders["growing"] / "episodes.jsonl"
    assert api.get("runs/3/episodes").json()["total"] == 4
    rows = _lines(path)
    with path.open("a") as f:
        for i, row in enumerate(rows[:2]):
            f.write(json.dumps({**row, "episode_id": f"new-{i}", "step": 2}) + "\n")
    body = api.get("runs/3/episodes", params={"step": 2}).json()
    assert body["total"] == 6 and [r["episode_id"] for r in body["rows"]] == ["new-0", "new-1"]
    assert api.get("runs/3/episodes/6").json()["episode_id"] == "new-1"
    # a resumed run rewrites its log atomically (a new, shorter file): indexed again from the start
    tmp = path.with_name(".episodes.tmp")
    tmp.write_text(json.dumps({**rows[0], "episode_id": "only"}) + "\n")
    os.replace(tmp, path)
    assert [r["episode_id"] for r in api.get("runs/3/episodes").json()["rows"]] == ["only"]


def test_the_index_reads_only_what_was_appended(tmp_path):
    path = tmp_path / "log.jsonl"
    seen = []
    index = JsonlIndex(path, lambda row: seen.append(row["n"]) or {"n": row["n"]})
    index.refresh()
    assert index.lines() == []
    path.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(1000)) + "\n")  # a blank line at the end
    index.refresh()
    with path.open("a") as f:
        f.write(json.dumps({"n": 1000}) + "\n")
    index.refresh()
    index.refresh()
    assert seen == list(range(1001))  # every line summarised once
    assert [ln.number for ln in index.lines()[-2:]] == [1000, 1002]  # line numbers count the blank line
    assert index.read(index.line(1002)) == {"n": 1000}


def test_sorting_keeps_ties_in_line_order_and_missing_values_last():
    from ajet.view.episodes import EpisodeFilter, select, summarize_episode
    from ajet.view.jsonl_index import Line

    rewards = [0.5, 1.0, 0.5, None, 1.0]
    lines = [Line(n, 0, 0, summarize_episode({"reward": r})) for n, r in enumerate(rewards, start=1)]
    assert [ln.number for ln in select(lines, EpisodeFilter(), "reward", descending=True)] == [2, 5, 1, 3, 4]
    assert [ln.number for ln in select(lines, EpisodeFilter(), "reward", descending=False)] == [1, 3, 2, 5, 4]


def test_the_run_folders_are_never_written(api, folders):
    for run_id in (0, 1):
        api.get("runs")
        api.get(f"runs/{run_id}/metrics")
        for line in (1, 2):
            api.get(f"runs/{run_id}/episodes/{line}")
            api.get(f"runs/{run_id}/episodes/{line}/tokens")
    api.get("runs/0/compare", params={"a": 1, "b": 2})
    assert {name: _snapshot(folders[name]) for name in ("run", "eval")} == folders["before"]


def test_view_of_a_missing_folder_is_a_clear_error(tmp_path, capsys):
    from ajet.cli import main

    assert main(["view", str(tmp_path / "nope"), "--no-browser"]) == 2
    assert f"error: '{tmp_path / 'nope'}' is not a folder" in capsys.readouterr().err
    assert main(["view", str(tmp_path), "--no-browser"]) == 2
    assert "is it a run folder (runs/<project>/<run>)" in capsys.readouterr().err


def test_the_page_ships_in_the_wheel():
    import fnmatch

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["ajet.view"]
    package = root / "ajet" / "view"
    files = [str(p.relative_to(package)) for p in (package / "static").rglob("*") if p.is_file()]
    assert {"static/index.html", "static/app.js", "static/episode.js", "static/style.css",
            "static/vendor/uplot/uPlot.iife.min.js", "static/vendor/uplot/LICENSE"} <= set(files)
    # setuptools' '*' does not cross '/': each file must match a pattern of its own folder
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, p) and f.count("/") == p.count("/") for p in patterns)]
    assert unshipped == []


def test_view_help_and_no_browser_without_a_desktop(monkeypatch, capsys):
    import sys

    from ajet.cli import main
    from ajet.view.command import browser_available

    assert main(["view", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ajet view ") and all(f in out for f in ("--host", "--port", "--no-browser", "RUN_DIR"))
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert browser_available() is False  # a server or container: print the address, open nothing


def test_samples_log_starts_a_new_line_after_a_cut_one(tmp_path):
    from ajet.backbone.sample_log import write_samples
    from ajet.samples import Sample

    (tmp_path / "samples.jsonl").write_text('{"step": 1, "input_ids": [1, 2')  # killed mid-write
    sample = Sample(input_ids=[5, 6, 7], loss_mask=[0, 1, 1], old_logprobs=[0.0, -0.5, float("nan")], reward=1.0,
                    group_id="1/t", agent="assistant", episode_id="e", task_id="t", meta={"calls": [0]})
    write_samples(tmp_path, 2, [sample, sample], [0.5, -0.5], trained=[0])
    lines = (tmp_path / "samples.jsonl").read_text().splitlines()
    assert lines[0] == '{"step": 1, "input_ids": [1, 2'
    rows = [json.loads(line) for line in lines[1:]]
    assert [(r["index"], r["advantage"], r["trained"]) for r in rows] == [(0, 0.5, True), (1, -0.5, False)]
    assert rows[0]["old_logprobs"] == [0.0, -0.5, None] and rows[0]["calls"] == [0]  # NaN is not JSON


def test_without_the_tokenizer_tokens_are_ids_only(folders):
    from ajet.view.tokens import token_view

    episode = _lines(folders["run"] / "episodes.jsonl")[0]
    rows = [s for s in _lines(folders["run"] / "samples.jsonl") if s["episode_id"] == episode["episode_id"]]
    body = token_view(episode, rows, "/nowhere/model")
    assert body["tokenizer"] is False and body["samples"][0]["text"] is None
    assert "could not be loaded offline" in body["tokenizer_note"]
    assert body["samples"][0]["ids"] == rows[0]["input_ids"]
