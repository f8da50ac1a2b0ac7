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
from ajet.view.episodes import summarize_episode
from ajet.view.jsonl_index import JsonlIndex

EPISODE_FILES = ("episodes", "val_episodes", "eval_episodes")  # <name>.jsonl, in the order offered
_KNOWN = ("config.yaml", "metrics.jsonl", SAMPLES_FILE, *(f"{name}.jsonl" for name in EPISODE_FILES))


class ViewError(AjetError):
    """`ajet view` was given something that is not a run folder."""


def _sample_summary(row: dict[str, Any]) -> dict[str, Any]:
    return {"episode_id": row.get("episode_id"), "index": row.get("index"), "step": row.get("step")}


class RunFolder:
    def __init__(self, path: Path, run_id: int) -> None:
        path = Path(path).expanduser()
        if not path.is_dir():
            raise ViewError(f"{str(path)!r} is not a folder; give a run folder such as runs/<project>/<run> "
                            "(training) or an `ajet eval` output folder")
        if not any((path / name).is_file() for name in _KNOWN):
            raise ViewError(f"{str(path)!r} has none of {', '.join(_KNOWN)}; is it a run folder "
                            "(runs/<project>/<run>) or an `ajet eval` output folder?")
        self.path = path.resolve()
        self.id = run_id
        self.metrics = JsonlIndex(self.path / "metrics.jsonl", dict)
        self.episodes = {name: JsonlIndex(self.path / f"{name}.jsonl", summarize_episode) for name in EPISODE_FILES}
        self.samples = JsonlIndex(self.path / SAMPLES_FILE, _sample_summary)

    # ------------------------------------------------------------------ config
    def config(self) -> dict[str, Any]:
        """The `ajet:` section of the run's config.yaml ({} when there is none or it cannot be read)."""
        import yaml

        try:
            data = yaml.safe_load((self.path / "config.yaml").read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
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
        if (self.path / "eval.json").is_file():
            try:
                eval_report = json.loads((self.path / "eval.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                eval_report = {"corrupt": True}
        return {
            "id": self.id, "name": self.name(), "path": str(self.path), "project": cfg.get("project"),
            "model": self.model_name(cfg), "algorithm": cfg.get("algorithm"),
            "kind": "eval" if "eval_episodes" in files and not rows else "training",
            "steps": max((r.get("step", 0) for r in rows if isinstance(r.get("step"), int)), default=0),
            "stages": list(dict.fromkeys(str(r.get("stage")) for r in rows)),
            "episode_files": files, "has_samples": self.samples.path.is_file(), "eval": eval_report,
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
