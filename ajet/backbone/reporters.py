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
from typing import Any, Literal

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
    """The trackers of one run. `log(step, stage, metrics)` sends the numeric metrics of a step."""

    def __init__(self, names: list[str], run_dir: Path, config: dict[str, Any], *, project: str,
                 run_name: str) -> None:
        check_installed(names)
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        for key, value in tracker_env(names, run_dir).items():
            os.environ[key] = value  # the trackers read them (trackio and MLflow only from the environment)
        config = {**config, "ajet_run_dir": str(run_dir.resolve())}
        self._open: dict[str, Any] = {}
        self.where: dict[str, str] = {}
        for name in dict.fromkeys(names):
            self._open[name], self.where[name] = _OPENERS[name](run_dir, config, project, run_name)
        if self.where:
            (run_dir / "trackers.json").write_text(json.dumps(self.where, indent=1) + "\n", encoding="utf-8")

    def log(self, step: int, stage: str, metrics: dict[str, Any]) -> None:
        scalars = {f"{stage}/{k}": float(v) for k, v in metrics.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        for name, run in self._open.items():
            try:
                _LOGGERS[name](run, scalars, step)
            except Exception as exc:  # a tracker that fails must not stop training: metrics.jsonl has it all
                log.warning("trainer.report_to %s: could not log step %d: %s", name, step, exc)

    def close(self) -> None:
        for name, run in self._open.items():
            try:
                _CLOSERS[name](run)
            except Exception as exc:
                log.warning("trainer.report_to %s: could not close the run: %s", name, exc)
        self._open.clear()


def _open_tensorboard(run_dir: Path, config: dict[str, Any], project: str, run_name: str):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir / "tensorboard"))
    writer.add_text("config", "```json\n" + json.dumps(config, indent=1, default=str) + "\n```", 0)
    return writer, str(run_dir / "tensorboard")


def _open_wandb(run_dir: Path, config: dict[str, Any], project: str, run_name: str):
    import wandb

    run = wandb.init(project=project, name=run_name, dir=str(run_dir), config=config,
                     mode=os.environ.get("WANDB_MODE", "offline"), reinit="finish_previous")
    return run, getattr(run, "url", None) or str(Path(run.dir).parent)


def _open_swanlab(run_dir: Path, config: dict[str, Any], project: str, run_name: str):
    import swanlab

    run = swanlab.init(project=project, experiment_name=run_name, config=config,
                       logdir=os.environ.get("SWANLAB_LOG_DIR", str(run_dir / "swanlab")),
                       mode=os.environ.get("SWANLAB_MODE", "local"))
    return run, os.environ.get("SWANLAB_LOG_DIR", str(run_dir / "swanlab"))


def _open_mlflow(run_dir: Path, config: dict[str, Any], project: str, run_name: str):
    import mlflow

    mlflow.set_experiment(project)
    run = mlflow.start_run(run_name=run_name, tags={"ajet.run_dir": config["ajet_run_dir"]})
    mlflow.log_params({k: str(v)[:500] for k, v in _flat(config).items()})
    mlflow.log_dict(config, "config.json")
    return run, f"{mlflow.get_tracking_uri()} run {run.info.run_id}"


def _open_trackio(run_dir: Path, config: dict[str, Any], project: str, run_name: str):
    import trackio

    run = trackio.init(project=project, name=run_name, config=config)
    return run, os.environ.get("TRACKIO_DIR", "trackio's own folder")


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _log_mlflow(run, scalars, step):
    import mlflow

    mlflow.log_metrics(scalars, step=step)


def _log_swanlab(run, scalars, step):
    import swanlab

    swanlab.log(scalars, step=step)


def _log_trackio(run, scalars, step):
    import trackio

    trackio.log(scalars, step=step)


def _end_mlflow(run):
    import mlflow

    mlflow.end_run()


def _end_swanlab(run):
    import swanlab

    swanlab.finish()


def _end_trackio(run):
    import trackio

    trackio.finish()


_OPENERS = {"tensorboard": _open_tensorboard, "wandb": _open_wandb, "swanlab": _open_swanlab,
            "mlflow": _open_mlflow, "trackio": _open_trackio}
_LOGGERS = {
    "tensorboard": lambda w, scalars, step: ([w.add_scalar(k, v, step) for k, v in scalars.items()], w.flush()),
    "wandb": lambda run, scalars, step: run.log(scalars, step=step),
    "swanlab": _log_swanlab, "mlflow": _log_mlflow, "trackio": _log_trackio,
}
_CLOSERS = {"tensorboard": lambda w: w.close(), "wandb": lambda run: run.finish(), "swanlab": _end_swanlab,
            "mlflow": _end_mlflow, "trackio": _end_trackio}
