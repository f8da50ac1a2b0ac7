"""`trainer.report_to`: each experiment tracker, its real package, offline, into the run folder; read back
with the tracker's own file format: the scalars of every step, the resolved config, the run folder linked.

Each tracker runs in a subprocess of its own (trackers keep process-wide state: a current run, folders
read from the environment at import). A tracker whose package is not installed is skipped, naming it
(the README's test command installs them all: the `trackers` extra).
"""

from __future__ import annotations

import json
import os
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.backbone import reporters
from ajet.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
CONFIG = {"model": {"path": "tiny-random"}, "trainer": {"lr": 0.001, "report_to": ["x"]}}
SCRIPT = """
import json, sys
from pathlib import Path
from ajet.backbone.reporters import Reporters
run = Path(sys.argv[2])
r = Reporters([sys.argv[1]], run, json.loads(sys.argv[3]), project="ajet-test", run_name="run-1")
for step in (1, 2, 3):
    r.log(step, "sft", {"loss": 1.0 / step, "note": "not a number", "finished": True})
r.close()
"""
OFFLINE_VARS = ("WANDB_MODE", "WANDB_DIR", "SWANLAB_MODE", "SWANLAB_LOG_DIR", "MLFLOW_TRACKING_URI",
                "MLFLOW_ALLOW_FILE_STORE", "TRACKIO_DIR")


def run_tracker(name: str, run: Path) -> dict:
    module, package = reporters.PACKAGES[name]
    pytest.importorskip(module, reason=f"{package} is not installed (pip install -e '.[trackers]')")
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARS}  # ajet's defaults: offline, in the run
    env.update(PYTHONPATH=str(REPO), WANDB_SILENT="true", HOME=str(run.parent))  # no tracker writes to ~
    done = subprocess.run([sys.executable, "-c", SCRIPT, name, str(run), json.dumps(CONFIG)], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    where = json.loads((run / "trackers.json").read_text())
    assert list(where) == [name] and str(run) in where[name]
    return where


def test_tensorboard(tmp_path):
    run = tmp_path / "run"
    run_tracker("tensorboard", run)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"tensors": 0})
    events.Reload()
    assert [(e.step, round(e.value, 4)) for e in events.Scalars("sft/loss")] == [(1, 1.0), (2, 0.5), (3, 0.3333)]
    assert "sft/note" not in events.Tags()["scalars"] and "sft/finished" not in events.Tags()["scalars"]
    text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert '"lr": 0.001' in text and str(run.resolve()) in text


def test_wandb_offline_run_folder(tmp_path):
    run = tmp_path / "run"
    run_tracker("wandb", run)
    [folder] = (run / "wandb").glob("offline-run-*")
    records = wandb_records(next(folder.glob("*.wandb")))
    history = [r.history for r in records if r.WhichOneof("record_type") == "history"]
    losses = {}
    for h in history:
        items = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in h.item}
        if "sft/loss" in items:
            losses[items["_step"]] = round(items["sft/loss"], 4)
    assert losses == {1: 1.0, 2: 0.5, 3: 0.3333}
    [start] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    config = {i.key: json.loads(i.value_json) for i in start.config.update}
    assert config["trainer"]["lr"] == 0.001 and config["ajet_run_dir"] == str(run.resolve())


def wandb_records(path: Path) -> list:
    """The records of a W&B run file: a 7-byte header, then LevelDB log blocks of 32 KiB, each record
    [crc 4][length 2][type 1][payload], a record split over blocks as first/middle/last pieces."""
    from wandb.proto import wandb_internal_pb2

    data, pos, out, pending = path.read_bytes(), 7, [], b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
        elif kind == 0:
            pending = b""
    return out


def test_mlflow_file_store(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run_tracker("mlflow", run)
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow reads its file store only when allowed
    client = MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())
    [found] = client.search_runs([client.get_experiment_by_name("ajet-test").experiment_id])
    history = client.get_metric_history(found.info.run_id, "sft/loss")
    assert [(m.step, round(m.value, 4)) for m in history] == [(1, 1.0), (2, 0.5), (3, 0.3333)]
    assert found.data.params["trainer.lr"] == "0.001" and found.data.tags["ajet.run_dir"] == str(run.resolve())
    assert found.info.run_name == "run-1"


def test_swanlab_local(tmp_path):
    run = tmp_path / "run"
    run_tracker("swanlab", run)
    [folder] = (run / "swanlab").glob("run-*")
    config = (folder / "files" / "config.yaml").read_text()
    assert "0.001" in config and str(run.resolve()) in config
    log = next(folder.glob("*.swanlab")).read_bytes()  # SwanLab's own record file, one record per log call
    assert log.count(b"sft/loss") >= 3 and b"sft/note" not in log


def test_trackio_local(tmp_path):
    run = tmp_path / "run"
    run_tracker("trackio", run)
    db = sqlite3.connect(run / "trackio" / "ajet-test.db")
    rows = [(step, json.loads(metrics)) for step, metrics in db.execute("SELECT step, metrics FROM metrics ORDER BY step")]
    assert [(s, round(m["sft/loss"], 4)) for s, m in rows if "sft/loss" in m] == [(1, 1.0), (2, 0.5), (3, 0.3333)]
    configs = " ".join(str(row) for row in db.execute("SELECT * FROM configs"))
    assert "0.001" in configs and str(run.resolve()) in configs


def test_a_tracker_that_is_not_installed_is_refused_before_the_run(monkeypatch):
    monkeypatch.setitem(reporters.PACKAGES, "tensorboard", ("json", "tensorboard"))  # installed wherever this runs
    monkeypatch.setitem(reporters.PACKAGES, "wandb", ("ajet_no_such_module", "wandb"))
    with pytest.raises(ConfigError, match=r"trainer.report_to names wandb, not installed here: pip install wandb "
                                          r"\(or pip install 'ajet\[trackers\]'\)"):
        reporters.check_installed(["tensorboard", "wandb"])


SEQUENCE = """
import json, os, sys
from pathlib import Path
from ajet.backbone.reporters import Reporters
names, variables = json.loads(sys.argv[1]), json.loads(sys.argv[2])
before = {k: os.environ.get(k) for k in variables}
for run in sys.argv[3:]:
    r = Reporters(names, Path(run), {}, project="ajet-test", run_name=Path(run).name)
    r.log(1, "sft", {"loss": 1.0})
    r.close()
    after = {k: os.environ.get(k) for k in variables}
    assert after == before, (before, after)
"""


@pytest.mark.parametrize("names", [["tensorboard", "mlflow"], ["wandb"]])
def test_two_runs_in_one_process_each_write_to_their_own_folder(tmp_path, monkeypatch, names):
    """benchmarks/swift_vs_debug.py runs one backbone after another in a process: the variables the first
    run's trackers were given must not send the second one's into the first folder."""
    for name in names:
        pytest.importorskip(reporters.PACKAGES[name][0], reason=f"{reporters.PACKAGES[name][1]} is not installed")
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARS}
    env.update(PYTHONPATH=str(REPO), WANDB_SILENT="true", HOME=str(tmp_path))
    env.update(WANDB_MODE="offline", MLFLOW_ALLOW_FILE_STORE="true")  # set by the user: kept as they are
    runs = [tmp_path / "run-1", tmp_path / "run-2"]
    done = subprocess.run([sys.executable, "-c", SEQUENCE, json.dumps(names), json.dumps(OFFLINE_VARS),
                           *map(str, runs)], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    for run in runs:
        assert list(json.loads((run / "trackers.json").read_text())) == names
        if "tensorboard" in names:
            assert list((run / "tensorboard").glob("events.out.tfevents.*"))
        if "wandb" in names:
            assert len(list((run / "wandb").glob("offline-run-*"))) == 1
    if "mlflow" in names:
        from mlflow.tracking import MlflowClient

        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow reads its file store only when allowed
        for run in runs:
            client = MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())
            experiment = client.get_experiment_by_name("ajet-test").experiment_id
            assert [r.info.run_name for r in client.search_runs([experiment])] == [run.name]


def test_the_backbones_hand_their_trainers_report_to_and_keep_them_offline(tmp_path, monkeypatch):
    for var in OFFLINE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WANDB_MODE", "online")  # what the user set wins
    env = reporters.tracker_env(["wandb", "mlflow"], tmp_path)
    assert env == {"WANDB_DIR": str(tmp_path), "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").resolve().as_uri(),
                   "MLFLOW_ALLOW_FILE_STORE": "true"}
    from ajet.backbone.llamafactory.args import stage_args
    from ajet.backbone.swift.args import optimizer_args
    from ajet.config.loader import load_config

    conf = REPO / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
    cfg = load_config(conf, [f"output_dir={tmp_path}", "trainer.report_to=[wandb,swanlab]"])
    assert optimizer_args(cfg, 1e-4, 10)["report_to"] == ["wandb", "swanlab"]
    lf = stage_args(cfg, "sft", model_path="m", dataset_dir=tmp_path, output_dir=tmp_path, adapter=None, cuda=False)
    assert lf["report_to"] == ["wandb", "swanlab"]
    plain = load_config(conf, [f"output_dir={tmp_path}"])
    assert "report_to" not in optimizer_args(plain, 1e-4, 10)
    assert stage_args(plain, "sft", model_path="m", dataset_dir=tmp_path, output_dir=tmp_path, adapter=None,
                      cuda=False)["report_to"] == "none"
