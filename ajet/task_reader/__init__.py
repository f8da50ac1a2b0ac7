"""Task readers: where tasks come from. `read_tasks(cfg, split)` is the entry point.

    jsonl        one JSON object per line (cfg.train / cfg.val files)
    huggingface  `datasets.load_dataset` on a local folder or data files, offline
    python       a user function `fn(split, **cfg.kwargs)` returning dicts or Task objects
    xlam         function-calling rows shaped like xlam-60k (query, tools, answers as JSON strings)

The split rules are the same for every reader (docs/task_readers.md):
- val comes from the val source when there is one (jsonl/huggingface: `cfg.val`; python: the
  function called with split='val');
- with `split_ratio` set instead, the train source is read once, shuffled with `shuffle_seed`
  and cut: the first part is train, the rest val, so the two never overlap;
- with neither, the val split is an empty `TaskSet` (training needs no val; `ajet eval` does).
`limit` applies to each split after the split is made.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ajet.errors import ConfigError
from ajet.task_reader.base import SkippedRow, TaskSet, split_tasks
from ajet.task_reader.huggingface import read_huggingface_source
from ajet.task_reader.jsonl import read_jsonl_source
from ajet.task_reader.python import read_python_source
from ajet.task_reader.xlam import read_xlam_source

# type -> (read one source, does the config name a val source of its own?)
READERS: dict[str, tuple[Callable[..., TaskSet], Callable[[Any], bool]]] = {
    "jsonl": (read_jsonl_source, lambda cfg: cfg.val is not None),
    "huggingface": (read_huggingface_source, lambda cfg: cfg.val is not None),
    "python": (read_python_source, lambda cfg: cfg.split_ratio is None),
    "xlam": (read_xlam_source, lambda cfg: cfg.val is not None),
}

__all__ = ["READERS", "SkippedRow", "TaskSet", "read_tasks"]


def read_tasks(cfg: Any, split: Literal["train", "val"], base_dir: str | Path | None = None) -> TaskSet:
    """Read the `split` tasks described by `cfg` (an `ajet.config.schema.TaskReaderConfig`).

    Relative paths resolve against `base_dir` (the YAML's folder). Raises TaskReaderError for a
    missing source or one without a usable row, ConfigError for contradictory settings.
    """
    if split not in ("train", "val"):
        raise ConfigError(f"read_tasks: split must be 'train' or 'val', got {split!r}")
    if cfg.type not in READERS:
        raise ConfigError(f"task_reader.type = {cfg.type!r}: expected one of {', '.join(READERS)}")
    read, has_val = READERS[cfg.type]
    _check(cfg)
    if split == "val" and has_val(cfg):
        return read(cfg, "val", base_dir, cfg.limit)
    if cfg.split_ratio is None:
        if split == "train":
            return read(cfg, "train", base_dir, cfg.limit)
        return TaskSet(source=f"{cfg.type}: no val source (set task_reader.val or task_reader.split_ratio)")
    whole = read(cfg, "train", base_dir, None)
    train, val = split_tasks(whole.tasks, cfg.split_ratio, cfg.shuffle_seed)
    chosen = train if split == "train" else val
    if cfg.limit is not None:
        chosen = chosen[: cfg.limit]
    return TaskSet(
        tasks=chosen,
        skipped=list(whole.skipped),
        source=f"{whole.source} ({split} part of split_ratio={cfg.split_ratio}, shuffle_seed={cfg.shuffle_seed})",
    )


def _check(cfg: Any) -> None:
    if cfg.type in ("jsonl", "huggingface", "xlam") and cfg.val is not None and cfg.split_ratio is not None:
        raise ConfigError(
            f"task_reader.val = {cfg.val!r} and task_reader.split_ratio = {cfg.split_ratio} are both set; "
            "use val for a separate val source, or split_ratio to cut val out of train, not both"
        )
    if cfg.type in ("jsonl", "xlam") and cfg.kwargs:
        raise ConfigError(
            f"task_reader.kwargs = {cfg.kwargs!r}: the {cfg.type} reader takes no extra arguments "
            "(kwargs are for the huggingface and python readers)"
        )
    if cfg.type != "python" and cfg.function is not None:
        raise ConfigError(f"task_reader.function is set but task_reader.type is {cfg.type!r}; set type: python")
