"""Config groups: presets a user picks by name, Hydra style (`judge=function_call`, `model=tiny-random`).

A group is a folder of YAML files in the config search path; an option is one file. The search
path is the user's own `conf/` folder beside their YAML (when it exists) and then the packaged tree
(`conf/` at the top of the repository, shipped inside the wheel as `ajet/conf/`). A user's file
shadows a packaged one of the same name. Any section of `ajet:` can be a group (`judge/`,
`model/`, `rollout/`, ...); the `workflow/` group sets `workflow` and `workflow_args` together.

Where a pick lands:
- in the YAML's `defaults:` list: beneath the YAML's own `ajet:` keys (they refine the preset);
- on the command line: over the YAML. For `workflow`, `task_reader` and `judge`, whose keys only
  mean something for the type the preset names, the YAML's section is dropped first; other groups
  (`model`, `backbone`, ...) are merged key by key, so `model=tiny-random` keeps your LoRA settings.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import yaml

from ajet.errors import ConfigError
from ajet.safeyaml import YAMLProblem, check_aliases

ALIASES = {"judger": "judge"}  # AgentJet's word for a judge
# Keys of `ajet:` that a command-line pick of the group replaces instead of merging into.
REPLACED_BY_PICK = {"workflow": ("workflow", "workflow_args"), "task_reader": ("task_reader",), "judge": ("judge",)}
USER_CONF_DIR = "conf"


def packaged_conf_dir() -> Path:
    """The packaged tree: `ajet/conf` inside a wheel, the repository's `conf/` in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "conf", package.parent / "conf"):
        if (candidate / "ajet.yaml").is_file():
            return candidate
    raise ConfigError(f"ajet's packaged config tree is missing (looked in {package / 'conf'} and "
                      f"{package.parent / 'conf'}); reinstall ajet")


def search_path(conf_path: Path | None) -> list[Path]:
    """Folders searched for group options, first match wins: the user's `conf/`, then the packaged tree."""
    folders = []
    if conf_path is not None:
        user = conf_path.resolve().parent / USER_CONF_DIR
        if user.is_dir() and user.resolve() != packaged_conf_dir().resolve():
            folders.append(user)
    folders.append(packaged_conf_dir())
    return folders


def package_of(group: str) -> str:
    """Where a group's option is mounted in the config tree."""
    return "ajet" if group == "workflow" else f"ajet.{group}"


def canonical(group: str) -> str:
    return ALIASES.get(group, group)


def is_group_name(group: str) -> bool:
    """`workflow`, or a section of `ajet:` (judge, model, rollout, ...): the keys a preset can fill."""
    from pydantic import BaseModel

    from ajet.config.schema import AjetConfig

    group = canonical(group)
    field = AjetConfig.model_fields.get(group)
    section = field is not None and isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    return group == "workflow" or section


def options(group: str, folders: list[Path]) -> list[str]:
    """Option names of a group over the search path."""
    names = {p.stem for folder in folders for p in (folder / canonical(group)).glob("*.yaml")}
    return sorted(names)


def option_file(group: str, option: str, folders: list[Path]) -> Path | None:
    for folder in folders:
        path = folder / canonical(group) / f"{option}.yaml"
        if path.is_file():
            return path
    return None


@dataclass
class Pick:
    """One group choice: from the YAML's defaults list or from the command line."""

    group: str
    option: str
    file: Path
    from_command_line: bool

    @property
    def package(self) -> str:
        return package_of(self.group)

    def label(self, packaged: Path) -> str:
        """How error messages name the preset: `conf/judge/x.yaml` (packaged) or its full path."""
        try:
            return f"the preset conf/{self.file.resolve().relative_to(packaged.resolve())}"
        except ValueError:
            return f"the preset {self.file}"

    @property
    def defaults_entry(self) -> dict[str, str]:
        return {f"{self.group}@{self.package}": self.option}


def pick(group: str, option: str, folders: list[Path], source: str, from_command_line: bool) -> Pick:
    """Resolve `group=option`, or raise a ConfigError naming the presets there are."""
    group = canonical(group)
    if not is_group_name(group):
        raise ConfigError(f"invalid config: {source} picks a preset of {group!r}, which is not a config group; "
                          "groups are workflow, task_reader, judge (or judger), model, backbone, or any other "
                          "section of ajet")
    path = option_file(group, option, folders)
    if path is None:
        raise ConfigError(no_preset_message(group, option, folders, source))
    try:
        check_aliases(path.read_bytes())  # a user's preset is read by Hydra: bound its aliases first
    except YAMLProblem as exc:
        raise ConfigError(f"{path}: refused: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError):
        pass  # Hydra reports what is wrong with it, naming the file
    return Pick(group, option, path, from_command_line)


def no_preset_message(group: str, option: str, folders: list[Path], source: str) -> str:
    found = options(group, folders)
    close = difflib.get_close_matches(option, found, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    listing = ", ".join(found) if found else "none"
    set_key = {"judge": "judge.type", "model": "model.path", "task_reader": "task_reader.type"}.get(group)
    key_hint = f"; to set a value instead, use {set_key}={option}" if set_key else ""
    where = " or ".join(str(f / group) for f in folders)
    return (f"invalid config: {group}={option} (from {source}): no preset named {option!r} in {where}; "
            f"{hint}presets: {listing}{key_hint}")
