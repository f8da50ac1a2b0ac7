"""One run folder as the viewer reads it (never writes): a training run (`runs/<project>/<run>/`:
metrics.jsonl, episodes.jsonl, val_episodes.jsonl, samples.jsonl, config.yaml) or an `ajet eval`
folder (eval_episodes.jsonl, eval.json, config.yaml). Every JSONL file is read through an
incremental index, so the folder of a live run is followed as it grows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ajet.backbone.sample_log import SAMPLES_FILE
from ajet.errors import AjetError
from ajet.safeyaml import YAMLProblem, safe_load
from ajet.view.episodes import summarize_episode
from ajet.view.jsonl_index import JsonlIndex
from ajet.view.safe_open import read_small
from ajet.view.tokens import summarize_sample

EPISODE_FILES = ("episodes", "val_episodes", "eval_episodes")  # <name>.jsonl, in the order offered
_KNOWN = ("config.yaml", "metrics.jsonl", SAMPLES_FILE, *(f"{name}.jsonl" for name in EPISODE_FILES))
MAX_SMALL_FILE = 4 * 1024 * 1024  # config.yaml, eval.json


class ViewError(AjetError):
    """`ajet view` was given something that is not a run folder."""


class RunFolder:
    def __init__(self, path: Path, run_id: int) -> None:
        path = Path(path).expanduser()
        if not path.is_dir():
            raise ViewError(f"{str(path)!r} is not a folder; give a run folder such as runs/<project>/<run> "
                            "(training) or an `ajet eval` output folder")
        if not any((path / name).exists() for name in _KNOWN):
            raise ViewError(f"{str(path)!r} has none of {', '.join(_KNOWN)}; is it a run folder "
                            "(runs/<project>/<run>) or an `ajet eval` output folder?")
        self.path = path.resolve()
        self.id = run_id
        self.metrics = JsonlIndex(self.path / "metrics.jsonl", dict, self.path)
        self.episodes = {name: JsonlIndex(self.path / f"{name}.jsonl", summarize_episode, self.path)
                         for name in EPISODE_FILES}
        self.samples = JsonlIndex(self.path / SAMPLES_FILE, summarize_sample, self.path)
        self.config_problem: str | None = None

    # ------------------------------------------------------------------ config
    def config(self) -> dict[str, Any]:
        """The `ajet:` section of the run's config.yaml ({} when there is none or it cannot be read:
        `config_problem` says why)."""
        import yaml

        self.config_problem = None
        try:
            data = safe_load(read_small(self.path / "config.yaml", self.path, MAX_SMALL_FILE)) or {}
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError, YAMLProblem) as exc:
            why = "nested too deep" if isinstance(exc, RecursionError) else str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.config_problem = why if why.startswith("config.yaml") else f"config.yaml: {why}"
            return {}
        section = data.get("ajet", data) if isinstance(data, dict) else {}
        return section if isinstance(section, dict) else {}

    def model_name(self, config: dict[str, Any] | None = None) -> str | None:
        """The model the run trained (its tokenizer gives the tokens' text); `config`: one already read."""
        model = (self.config() if config is None else config).get("model")
        path = model.get("path") if isinstance(model, dict) else None
        return path if isinstance(path, str) and path else None

    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"

    # ------------------------------------------------------------------ files
    def refresh(self) -> None:
        self.metrics.refresh()
        for index in self.episodes.values():
            index.refresh()
        self.samples.refresh()

    def episode_index(self, name: str) -> JsonlIndex:
        return self.episodes[name]

    def describe(self) -> dict[str, Any]:
        """What the run list shows."""
        self.refresh()
        rows = [ln.summary for ln in self.metrics.lines() if ln.summary is not None]
        cfg = self.config()
        files = {name: len(index.lines()) for name, index in self.episodes.items() if index.path.is_file()}
        eval_report = None
        if (self.path / "eval.json").exists():
            try:
                eval_report = json.loads(read_small(self.path / "eval.json", self.path, MAX_SMALL_FILE))
            except (OSError, ValueError, RecursionError):
                eval_report = {"corrupt": True}
        indexes = [self.metrics, *self.episodes.values(), self.samples]
        problems = [i.problem for i in indexes if i.problem] + ([self.config_problem] if self.config_problem else [])
        return {
            "id": self.id, "name": self.name(), "path": str(self.path), "project": cfg.get("project"),
            "model": self.model_name(cfg), "algorithm": cfg.get("algorithm"),
            "kind": "eval" if "eval_episodes" in files and not rows else "training",
            "steps": max((r.get("step", 0) for r in rows if isinstance(r.get("step"), int)), default=0),
            "stages": list(dict.fromkeys(str(r.get("stage")) for r in rows)),
            "episode_files": files, "has_samples": self.samples.path.is_file(), "eval": eval_report,
            "problems": problems, "behind_bytes": sum(i.behind for i in indexes),
        }

    def metric_rows(self) -> dict[str, Any]:
        self.metrics.refresh()
        rows, corrupt = [], []
        for line in self.metrics.lines():
            if line.summary is None:
                corrupt.append(self.metrics.read(line))
            else:
                rows.append(line.summary)
        return {"rows": rows, "corrupt": corrupt}

    def samples_of(self, episode_id: str) -> list[dict[str, Any]]:
        """The samples.jsonl rows of one episode, in sample order (the newest copy of each index)."""
        self.samples.refresh()
        found: dict[Any, dict[str, Any]] = {}
        for line in self.samples.lines():
            if line.summary is not None and line.summary["episode_id"] == episode_id:
                row = self.samples.read(line)
                if not row.get("corrupt"):
                    found[row.get("index")] = row
        return [found[k] for k in sorted(found, key=lambda k: (k is None, k if isinstance(k, int) else 0))]
