"""The `python` task reader: a user function `fn(split, **kwargs)` returns dicts or `Task` objects."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ajet.errors import AjetError, PluginError, TaskReaderError
from ajet.plugins import load_object
from ajet.task_reader.base import TaskBuilder, TaskSet


def read_python_source(cfg: Any, which: str, base_dir: str | Path | None, limit: int | None) -> TaskSet:
    """Call `cfg.function(split=which, **cfg.kwargs)` and map what it returns."""
    ref = cfg.function
    if not ref:
        raise TaskReaderError("task_reader.function is not set; name a 'module:fn' or 'file.py:fn' returning tasks")
    fn = load_object(ref, base_dir)
    if not callable(fn):
        raise PluginError(f"task_reader.function = {ref!r} names a {type(fn).__name__}, not a function")
    label = f"python:{ref}"
    try:
        result = fn(split=which, **cfg.kwargs)
        if inspect.isawaitable(result):
            result = _run(result)
    except AjetError:
        raise
    except Exception as exc:
        raise TaskReaderError(f"{label}(split={which!r}) raised {type(exc).__name__}: {exc}") from exc
    if isinstance(result, (str, bytes, dict)) or not isinstance(result, Iterable):
        raise TaskReaderError(
            f"{label}(split={which!r}) returned a {type(result).__name__}; return a list (or iterator) of "
            "dicts or ajet.Task objects"
        )
    builder = TaskBuilder(cfg.fields, source=f"{label}(split={which!r})")
    try:
        for index, item in enumerate(result, 1):
            builder.add_row(item, label, index)
            if limit is not None and len(builder.tasks) >= limit:
                break
    except Exception as exc:  # a generator that fails half-way
        raise TaskReaderError(f"{label}(split={which!r}) failed while iterating: {type(exc).__name__}: {exc}") from exc
    if which == "val" and not builder.tasks and not builder.skipped:
        return TaskSet(source=builder.source)  # the function has no val split; that is allowed
    return builder.finish()


def _run(awaitable: Any) -> Any:
    """Run an async reader to completion, also when called from inside a running event loop."""
    async def wrap() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrap())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wrap()).result()
