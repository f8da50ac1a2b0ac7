"""Load user code named `package.module:Name` or `path/to/file.py:Name`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from ajet.errors import PluginError


def load_object(ref: str, base_dir: str | Path | None = None) -> Any:
    """Return the object `ref` names. File paths resolve against `base_dir` (the YAML's folder)."""
    if not isinstance(ref, str) or ":" not in ref:
        raise PluginError(
            f"plugin reference {ref!r} must look like 'package.module:Name' or 'path/to/file.py:Name'"
        )
    target, _, name = ref.rpartition(":")
    if not target or not name:
        raise PluginError(f"plugin reference {ref!r} names no module or no object")
    module = _load_file(target, base_dir) if target.endswith(".py") else _load_module(target, ref)
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in vars(module) if not n.startswith("_"))
            raise PluginError(
                f"{target!r} has no attribute {name!r} (plugin {ref!r}); it defines: {', '.join(public[:20])}"
            )
        obj = getattr(obj, part)
    return obj


def _load_module(dotted: str, ref: str) -> Any:
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError as exc:
        if exc.name and dotted.startswith(exc.name):
            raise PluginError(
                f"module {dotted!r} not found (plugin {ref!r}); install it or use 'path/to/file.py:Name'"
            ) from None
        raise PluginError(f"importing {dotted!r} failed: {exc}") from exc


def _load_file(path_text: str, base_dir: str | Path | None) -> Any:
    path = Path(path_text).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    path = path.resolve()
    if not path.is_file():
        raise PluginError(f"plugin file {str(path)!r} does not exist")
    module_name = f"ajet_user_{path.stem}_{abs(hash(str(path))) % 10**8}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot import {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # The file's folder goes on sys.path so it can import its siblings (tools.py next to agent.py).
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise PluginError(f"importing {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
    return module
