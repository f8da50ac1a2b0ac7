"""Experiment trackers (`trainer.report_to`): the run's scalars, step by step, where its users watch
runs: TensorBoard, Weights & Biases, SwanLab, MLflow, Trackio. metrics.jsonl and curves.png are
written whatever this list holds; each tracker named here gets every step's numbers as
`<stage>/<key>`, the resolved config, and the run folder's path (`ajet_run_dir`), and the run folder
gets `trackers.json` naming where each tracker wrote.

Nothing reaches the network unless asked: each tracker runs offline, into the run folder, unless its
own environment variable says otherwise (a variable the user set wins):

    tensorboard   <run>/tensorboard (event files)
    wandb         WANDB_MODE=offline, WANDB_DIR=<run>   (`wandb sync <run>/wandb/offline-run-*` uploads it)
    swanlab       SWANLAB_MODE=local, SWANLAB_LOG_DIR=<run>/swanlab   (`swanlab watch` shows it)
    mlflow        MLFLOW_TRACKING_URI=file:<run>/mlruns (MLflow's file store; MLFLOW_ALLOW_FILE_STORE=true)
    trackio       TRACKIO_DIR=<run>/trackio (a SQLite file; `trackio show` shows it)

The swift and LLaMA-Factory backbones report through their own trainers' `report_to` instead, with
the same variables set for their processes (`tracker_env`).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import Any, Literal, Protocol

from ajet.errors import ConfigError

log = logging.getLogger(__name__)

Tracker = Literal["tensorboard", "wandb", "swanlab", "mlflow", "trackio"]
# tracker -> (the module it imports, the package that brings it)
PACKAGES: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb"), "swanlab": ("swanlab", "swanlab"),
    "mlflow": ("mlflow", "mlflow-skinny"), "trackio": ("trackio", "trackio"),
}


def tracker_env(names: list[str], run_dir: Path) -> dict[str, str]:
    """The environment variables that keep `names` offline and inside `run_dir` (those the user has
    not set already)."""
    wanted: dict[str, str] = {}
    if "wandb" in names:
        wanted.update(WANDB_MODE="offline", WANDB_DIR=str(run_dir))
    if "swanlab" in names:
        wanted.update(SWANLAB_MODE="local", SWANLAB_LOG_DIR=str(run_dir / "swanlab"))
    if "mlflow" in names:
        wanted.update(MLFLOW_TRACKING_URI=(run_dir / "mlruns").resolve().as_uri(), MLFLOW_ALLOW_FILE_STORE="true")
    if "trackio" in names:
        wanted["TRACKIO_DIR"] = str(run_dir / "trackio")
    return {k: v for k, v in wanted.items() if not os.environ.get(k)}


def check_installed(names: list[str]) -> None:
    """Refuse, before anything runs, a tracker whose package is not installed."""
    missing = [n for n in names if importlib.util.find_spec(PACKAGES[n][0]) is None]
    if missing:
        packages = " ".join(PACKAGES[n][1] for n in missing)
        raise ConfigError(f"trainer.report_to names {', '.join(missing)}, not installed here: pip install "
                          f"{packages} (or pip install 'ajet[trackers]'), or take it out of trainer.report_to")


class Reporters:
    """The trackers of one run. `log(step, stage, metrics)` sends the numeric metrics of a step; `close()`
    finishes them and puts back the environment variables they were given."""

    def __init__(self, names: list[str], run_dir: Path, config: dict[str, Any], *, project: str,
                 run_name: str) -> None:
        check_installed(names)
        run_dir.mkdir(parents=True, exist_ok=True)
        env = tracker_env(names, run_dir)
        # put back on close: a later run in this process (benchmarks/swift_vs_debug.py) must get its own folder
        self._env_before = {key: os.environ.get(key) for key in env}
        os.environ.update(env)  # the trackers read them (trackio and MLflow only from the environment)
        config = {**config, "ajet_run_dir": str(run_dir.resolve())}
        self._open: dict[str, _Run] = {}
        self.where: dict[str, str] = {}
        try:
            for name in dict.fromkeys(names):
                self._open[name], self.where[name] = _OPENERS[name](run_dir, config, project, run_name)
        except BaseException:
            self.close()  # the trackers already opened must not stay open
            raise
        (run_dir / "trackers.json").write_text(json.dumps(self.where, indent=1) + "\n", encoding="utf-8")

    def log(self, step: int, stage: str, metrics: dict[str, Any]) -> None:
        scalars = {f"{stage}/{k}": float(v) for k, v in metrics.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        for name, run in self._open.items():
            try:
                run.log(scalars, step=step)
            except Exception as exc:  # a tracker that fails must not stop training: metrics.jsonl has it all
                log.warning("trainer.report_to %s: could not log step %d: %s", name, step, exc)

    def close(self) -> None:
        for name, run in self._open.items():
            try:
                run.finish()
            except Exception as exc:
                log.warning("trainer.report_to %s: could not close the run: %s", name, exc)
        self._open.clear()
        for key, value in self._env_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._env_before = {}


class _Run(Protocol):
    """An open tracker run: wandb's and swanlab's runs as they are, the others through the adapters below."""

    def log(self, scalars: dict[str, float], step: int) -> Any: ...

    def finish(self) -> Any: ...


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists and scalars are leaves."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


class _TensorBoard:
    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def log(self, scalars: dict[str, float], step: int) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def finish(self) -> None:
        self.writer.close()


class _MLflow:
    def log(self, scalars: dict[str, float], step: int) -> None:
        import mlflow

        mlflow.log_metrics(scalars, step=step)

    def finish(self) -> None:
        import mlflow

        mlflow.end_run()


class _Trackio:
    def __init__(self, run: Any) -> None:
        self.run = run

    def log(self, scalars: dict[str, float], step: int) -> None:
        self.run.log(scalars, step=step)

    def finish(self) -> None:
        import trackio

        trackio.finish()  # run.finish() alone would leave it trackio's current run


def _open_tensorboard(run_dir: Path, config: dict[str, Any], project: str, run_name: str) -> tuple[_Run, str]:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir / "tensorboard"))
    writer.add_text("config", "```json\n" + json.dumps(config, indent=1, default=str) + "\n```", 0)
    return _TensorBoard(writer), str(run_dir / "tensorboard")


def _open_wandb(run_dir: Path, config: dict[str, Any], project: str, run_name: str) -> tuple[_Run, str]:
    import wandb

    # passed, not left to the environment: wandb reads its variables once per process, so a second run in
    # the same process would otherwise land in the first one's folder (tracker_env has set both)
    run = wandb.init(project=project, name=run_name, dir=os.environ["WANDB_DIR"], mode=os.environ["WANDB_MODE"],
                     config=config, reinit="finish_previous")
    return run, getattr(run, "url", None) or str(Path(run.dir).parent)


def _open_swanlab(run_dir: Path, config: dict[str, Any], project: str, run_name: str) -> tuple[_Run, str]:
    import swanlab

    # SWANLAB_MODE and SWANLAB_LOG_DIR (set by tracker_env) are read at every init
    run = swanlab.init(project=project, experiment_name=run_name, config=config)
    return run, os.environ["SWANLAB_LOG_DIR"]


def _open_mlflow(run_dir: Path, config: dict[str, Any], project: str, run_name: str) -> tuple[_Run, str]:
    import mlflow

    mlflow.set_experiment(project)
    run = mlflow.start_run(run_name=run_name, tags={"ajet.run_dir": config["ajet_run_dir"]})
    mlflow.log_params({k: str(v)[:500] for k, v in flatten(config).items()})
    mlflow.log_dict(config, "config.json")
    return _MLflow(), f"{mlflow.get_tracking_uri()} run {run.info.run_id}"


def _open_trackio(run_dir: Path, config: dict[str, Any], project: str, run_name: str) -> tuple[_Run, str]:
    import trackio

    run = trackio.init(project=project, name=run_name, config=config)
    return _Trackio(run), os.environ["TRACKIO_DIR"]


_OPENERS = {"tensorboard": _open_tensorboard, "wandb": _open_wandb, "swanlab": _open_swanlab,
            "mlflow": _open_mlflow, "trackio": _open_trackio}
