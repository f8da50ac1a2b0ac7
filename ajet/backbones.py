"""Backbones are registered by name, so a third party can add one without touching ajet. This is the
lookup only (which backbones exist, which one wrote a checkpoint), below the config and export code that
asks; starting one is `ajet.backbone.registry.run_backbone`.

A backbone is a `Backbone` record published under the entry-point group `ajet.backbones`:

    # pyproject.toml of a package that adds a backbone
    [project.entry-points."ajet.backbones"]
    mybackend = "my_pkg.ajet_backbone:BACKBONE"

The record names its functions as `module:function` strings, imported only when used, so listing
the backbones (`ajet --help`, config validation) stays fast and never imports torch or a backend.
ajet's own three (debug, swift, llamafactory) are registered the same way in ajet's pyproject and
are also known without installed metadata (a source checkout on PYTHONPATH).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ajet.errors import CheckpointError, ConfigError, PluginError

if TYPE_CHECKING:
    from ajet.config.schema import AjetConfig

GROUP = "ajet.backbones"
CHECKPOINT_MARKER = "ajet_checkpoint.json"  # in a checkpoint (or run) folder a backbone wrote in its own format
_BUILT_IN = {
    "debug": "ajet.backbone.debug:BACKBONE",
    "swift": "ajet.backbone.swift:BACKBONE",
    "llamafactory": "ajet.backbone.llamafactory:BACKBONE",
}


@dataclass(frozen=True)
class Backbone:
    """What ajet needs to know about a backbone.

    run: 'module:function' taking (cfg: AjetConfig, resume: bool | str) and returning a dict with at
      least `run_dir`; raises ajet errors (BackboneError when the backend's subprocess fails).
    setup: 'module:function' taking (python: str | None, force: bool) that builds the backbone's
      managed environment and returns its Python executable; None when it needs none.
    export: 'module:function' taking (checkpoint: Path, out: Path, merge: bool) for checkpoints this
      backbone wrote (they carry `ajet_checkpoint.json` naming the backbone); None: ajet's own export.
    refused: (algorithm, why) pairs for algorithms the backend has under that name but this backbone does
      not map (its version cannot run ajet's workflow and judge): the refusal says why.
    """

    name: str
    summary: str
    algorithms: tuple[str, ...]
    run: str
    setup: str | None = None
    export: str | None = None
    refused: tuple[tuple[str, str], ...] = ()

    def check(self, cfg: AjetConfig) -> None:
        """Refuse a config this backbone cannot train, naming the backbones that can."""
        missing = [s for s in cfg.stages if s not in self.algorithms]
        if not missing:
            return
        able = [b.name for b in backbones().values() if all(s in b.algorithms for s in missing)]
        where = f"use --backbone={' or --backbone='.join(able)}" if able else "no installed backbone trains it"
        why = dict(self.refused).get(missing[0])
        raise ConfigError(
            f"invalid config: algorithm {missing[0]!r} is not trained by the {self.name} backbone "
            f"(it trains {', '.join(self.algorithms)}){f': {why}' if why else ''}; {where}")

    def call(self, attr: str, *args: Any, **kwargs: Any) -> Any:
        """Import and call the function named by `attr` ('run', 'setup' or 'export')."""
        ref = getattr(self, attr)
        if ref is None:
            raise ConfigError(f"the {self.name} backbone has no {attr} step")
        return load_function(ref)(*args, **kwargs)


def load_function(ref: str) -> Any:
    module, _, name = ref.partition(":")
    try:
        return getattr(import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"cannot load {ref!r}: {exc}") from exc


@lru_cache(maxsize=1)
def backbones() -> dict[str, Backbone]:
    """Every registered backbone by name: ajet's own plus the `ajet.backbones` entry points."""
    refs = dict(_BUILT_IN)
    for ep in entry_points(group=GROUP):
        refs[ep.name] = ep.value
    found: dict[str, Backbone] = {}
    for name, ref in sorted(refs.items()):
        record = load_function(ref)
        if not isinstance(record, Backbone):
            raise PluginError(f"entry point {name!r} of group {GROUP!r} ({ref}) is not an ajet Backbone record")
        found[name] = record
    return found


def names() -> list[str]:
    return sorted(backbones())


def get(name: str) -> Backbone:
    """The backbone called `name`, or a ConfigError listing the registered ones."""
    found = backbones()
    if name in found:
        return found[name]
    close = difflib.get_close_matches(name, list(found), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown backbone {name!r}; installed: {', '.join(sorted(found))}{hint}")


def checkpoint_owner(path: str | Path) -> tuple[Backbone, Path] | None:
    """(backbone, checkpoint folder) for a checkpoint a backbone wrote in its own format: the folder's
    `ajet_checkpoint.json` names the backbone, or, in a run folder, its newest checkpoint (`latest`,
    relative to the run folder). None: ajet's own checkpoint format (no marker, or `debug`)."""
    path = Path(path)
    marker = path / CHECKPOINT_MARKER
    if not marker.is_file():
        return None
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
        name = info["backbone"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{marker} does not name its backbone ({exc}); is the checkpoint complete?") from exc
    if name == "debug":
        return None
    owner = get(name)
    if owner.export is None:
        raise ConfigError(f"{path} was written by the {name} backbone, which has no export step")
    if "latest" in info:  # a run folder: its newest checkpoint
        if not info["latest"]:
            raise CheckpointError(f"the {name} run {str(path)!r} has no finished checkpoint yet")
        return owner, path / info["latest"]
    return owner, path
