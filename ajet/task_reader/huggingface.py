"""The `huggingface` task reader: `datasets.load_dataset` on local data, never the network.

Where the rows come from, for split `which` ('train' or 'val'), with `spec = cfg.train / cfg.val`:

- `spec` is a data file (.json, .jsonl, .csv, .parquet, .arrow, .txt): that file is loaded with the
  builder its suffix names (or `cfg.path` when that is a builder name like 'json').
- otherwise `spec` is a split name (default 'train' for train) of the dataset at `cfg.path`: a folder
  written by `save_to_disk`, a folder of data files (`load_dataset(folder)` infers the splits from
  the file names), or a dataset already in the local Hugging Face cache.

The load runs with HF_HUB_OFFLINE / HF_DATASETS_OFFLINE on, so a dataset that is not local fails
with a clear error instead of a download. `cfg.kwargs` go to `load_dataset` (e.g. `name`, `cache_dir`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ajet.errors import TaskReaderError
from ajet.task_reader.base import TaskBuilder, TaskSet, resolve_path

_BUILDERS = {
    ".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".arrow": "arrow", ".txt": "text",
}


def read_huggingface_source(cfg: Any, which: str, base_dir: str | Path | None, limit: int | None) -> TaskSet:
    """Load the `which` split described by `cfg` (a TaskReaderConfig) and map its rows."""
    spec = cfg.train if which == "train" else cfg.val
    if spec is None and which == "val":
        raise TaskReaderError("task_reader.val is not set; name the val split or data file")
    dataset, label = _load(cfg, spec or "train", which, base_dir)
    builder = TaskBuilder(cfg.fields, source=f"huggingface:{label}")
    for index, row in enumerate(dataset, 1):
        builder.add_row(row, label, index)
        if limit is not None and len(builder.tasks) >= limit:
            break
    return builder.finish()


def _load(cfg: Any, spec: str, which: str, base_dir: str | Path | None) -> tuple[Any, str]:
    import datasets

    key = f"task_reader.{which}"
    kwargs = dict(cfg.kwargs)
    if Path(spec).suffix.lower() in _BUILDERS:
        data_file = resolve_path(spec, base_dir)
        if not data_file.is_file():
            raise TaskReaderError(f"{key}: data file {str(data_file)!r} does not exist")
        builder = _builder_name(cfg.path, base_dir) or _BUILDERS[data_file.suffix.lower()]
        label = str(data_file)
        call = lambda: datasets.load_dataset(builder, data_files={"train": str(data_file)}, split="train", **kwargs)
    else:
        if not cfg.path:
            raise TaskReaderError(
                f"{key} = {spec!r} is a split name but task_reader.path is not set; set path to the dataset "
                "folder, or name a data file (.jsonl, .json, .csv, .parquet) instead"
            )
        # The config loader resolves `train`/`val` like file paths; a split name is the last component.
        split = Path(spec).name
        location = _dataset_location(cfg.path, base_dir)
        label = f"{location}[{split}]"
        call = lambda: _load_split(location, split, kwargs)
    try:
        with _offline(), _quiet():
            return call(), label
    except TaskReaderError:
        raise
    except Exception as exc:
        raise TaskReaderError(
            f"{key}: loading {label} with datasets failed: {type(exc).__name__}: {exc}. The reader is offline: "
            "use a local folder or data file, or a dataset already in the Hugging Face cache."
        ) from exc


def _builder_name(path: str | None, base_dir: str | Path | None) -> str | None:
    """`path` when it names a packaged builder ('json', 'csv', ...) rather than a folder."""
    if not path or resolve_path(path, base_dir).exists():
        return None
    name = Path(path).name  # the config loader may have made 'json' into '<yaml folder>/json'
    return name if name in _BUILDERS.values() else None


def _dataset_location(path: str, base_dir: str | Path | None) -> str:
    """A local folder when one exists; otherwise the name as written (a cached hub id or builder)."""
    resolved = resolve_path(path, base_dir)
    if resolved.exists():
        return str(resolved)
    if base_dir is not None:  # undo the loader's resolution of an id like 'openai/gsm8k'
        with contextlib.suppress(ValueError):
            return str(Path(path).relative_to(Path(base_dir).resolve()))
    return path


def _load_split(location: str, split: str, kwargs: dict[str, Any]) -> Any:
    import datasets

    folder = Path(location)
    if folder.is_dir() and ((folder / "dataset_dict.json").exists() or (folder / "state.json").exists()):
        loaded = datasets.load_from_disk(str(folder))  # written by save_to_disk
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise TaskReaderError(f"{location} has splits {sorted(loaded)}, not {split!r}")
            return loaded[split]
        return loaded
    return datasets.load_dataset(location, split=split, **kwargs)


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """Force datasets and huggingface_hub offline for the duration (their flags are read at import)."""
    import datasets.config as dconfig

    try:
        import huggingface_hub.constants as hconst
    except ImportError:  # pragma: no cover - datasets depends on it
        hconst = None
    saved_env = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    saved = (dconfig.HF_HUB_OFFLINE, dconfig.HF_DATASETS_OFFLINE, getattr(hconst, "HF_HUB_OFFLINE", None))
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    dconfig.HF_HUB_OFFLINE = dconfig.HF_DATASETS_OFFLINE = True
    if hconst is not None:
        hconst.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        dconfig.HF_HUB_OFFLINE, dconfig.HF_DATASETS_OFFLINE = saved[0], saved[1]
        if hconst is not None:
            hconst.HF_HUB_OFFLINE = saved[2]
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No 'Generating train split' progress bars in the middle of ajet's own output."""
    import datasets

    was_disabled = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()
