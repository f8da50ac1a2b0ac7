"""Load a run's configuration: Hydra composes, pydantic validates.

Layers, later ones win:

1. the defaults of the pydantic models (`ajet/config/schema.py`, the one source of defaults),
2. the packaged config `ajet/conf/ajet.yaml` and its groups (`backbone/<name>.yaml` chosen by
   `--backbone`, `algorithm/<name>.yaml` mounted at `ajet.<name>`),
3. the user YAML, which holds only an `ajet:` section with what it changes,
4. command-line overrides in Hydra's grammar (`trainer.steps=3`, `+ajet.workflow_args.x=1`,
   `~key`, `algorithm=[sft,grpo]`); the `ajet.` prefix is optional.

Hydra's Compose API does the merging and the override parsing: the user YAML is written to a
temporary primary config whose defaults list pulls in layers 1 and 2. Interpolations are then
resolved, relative paths rewritten (see `ajet.config.schema`), and the tree validated. Every error
is an `ajet.errors.ConfigError` naming the key path, the value, what was expected and the layer the
value came from.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import ValidationError

from ajet.config import groups, walk
from ajet.config.env import read_env_file
from ajet.config.messages import format_validation_error, one_line, unknown_key_text
from ajet.config.schema import FILE_PATH, AjetConfig, RootConfig
from ajet.errors import ConfigError
from ajet.runlock import claim_new_folder
from ajet.safeyaml import YAMLProblem, check_aliases

COMMAND_LINE = "the command line"
PACKAGED = "the packaged defaults"
# A relative FilePath value with one of these suffixes is a path even when nothing exists there yet,
# so a missing file is reported by its absolute path; other values are paths only if they exist.
_FILE_SUFFIXES = {
    ".jsonl", ".json", ".yaml", ".yml", ".txt", ".csv", ".tsv", ".parquet", ".arrow",
    ".jinja", ".j2", ".py", ".gguf", ".safetensors", ".bin", ".pt",
}
_OVERRIDE_HELP = "overrides look like key=value, +key=value (add a key), ~key (delete a key), key=[a,b] (a list)"


def available_backbones() -> list[str]:
    """The registered backbone names (`ajet.backbones`, entry-point group `ajet.backbones`)."""
    from ajet.backbones import names

    return names()


def load_config(
    conf: str | Path | None, overrides: Sequence[str] = (), backbone: str | None = None, *,
    claim_run_dir: bool = False,
) -> AjetConfig:
    """Compose defaults, presets, the YAML `conf` and `overrides`, resolve, validate; return `cfg.ajet`.

    claim_run_dir: when `output_dir` is named by the time (`${now:...}`, the packaged default), create
    it now, exclusively, taking `<name>-2`, ... when a run started in the same second already has it
    (`ajet.runlock.claim_new_folder`). The CLI asks for it when it starts a run; `--cfg` does not."""
    conf_path = Path(conf) if conf is not None else None
    if conf_path is not None and conf_path.is_file():
        read_env_file(conf_path.resolve().parent)  # `.env` beside the YAML, for ${oc.env:...} keys
    folders = groups.search_path(conf_path)
    user, yaml_defaults = _read_user_yaml(conf_path) if conf_path is not None else (OmegaConf.create({}), [])
    sources = _Sources(conf_path, user)
    picks = {p.group: p for p in (groups.pick(g, o, folders, sources.label, False) for g, o in yaml_defaults)}
    hydra_overrides, cli_picks = _prepare_overrides(list(overrides), sources, folders)
    if backbone is not None:
        cli_picks["backbone"] = backbone
    for group, option in cli_picks.items():
        if group != "backbone":
            picks[group] = groups.pick(group, option, folders, COMMAND_LINE, True)
            if "ajet" in user:  # the preset replaces the YAML's section (its args fit another type)
                for key in groups.REPLACED_BY_PICK.get(group, ()):
                    user.ajet.pop(key, None)
    sources.user_keys = _key_paths(OmegaConf.to_container(user, resolve=False))
    hydra_overrides = _pick_backbone(cli_picks.get("backbone"), user, picks, folders, sources) + hydra_overrides
    sources.picks = list(picks.values())
    composed = _compose(user, list(picks.values()), hydra_overrides, folders, sources)
    time_named = "${now:" in str(OmegaConf.to_container(composed, resolve=False).get("ajet", {}).get("output_dir", ""))
    data = _resolve(composed, sources)
    _resolve_paths(data, sources)
    try:
        root = RootConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, data, sources.of)) from None
    cfg = root.ajet
    if claim_run_dir and time_named:
        cfg.output_dir = claim_new_folder(cfg.output_dir)
    cfg._base_dir = conf_path.resolve().parent if conf_path is not None else Path.cwd()
    cfg._source_file = conf_path.resolve() if conf_path is not None else None
    return cfg


def _pick_backbone(cli_choice: str | None, user: DictConfig, picks: dict[str, groups.Pick],
                   folders: list[Path], sources: _Sources) -> list[str]:
    """The backbone: --backbone (or `backbone=B`), else the YAML's defaults pick or ajet.backbone.name,
    else debug. Its preset (conf/backbone/<name>.yaml), when there is one, joins the picks."""
    yaml_pick = picks.pop("backbone", None)
    peeked = OmegaConf.select(user, "ajet.backbone.name", default=None, throw_on_resolution_failure=False)
    choice = cli_choice or (yaml_pick.option if yaml_pick else None) or (peeked if isinstance(peeked, str) else None)
    source = COMMAND_LINE if cli_choice is not None else sources.label
    _check_backbone(choice or "debug", source)
    if choice is None:
        choice = "debug"
    preset = groups.option_file("backbone", choice, folders)
    if preset is not None:
        picks["backbone"] = groups.Pick("backbone", choice, preset, cli_choice is not None)
    if cli_choice is None:
        return []
    sources.cli_keys.add(("ajet", "backbone", "name"))
    return [f"ajet.backbone.name={choice}"]  # the command line beats the YAML


class _Sources:
    """Which layer set a key path: the command line, a preset, the user YAML, or the packaged defaults."""

    def __init__(self, conf_path: Path | None, user: DictConfig):
        self.conf_path = conf_path
        self.label = str(conf_path) if conf_path is not None else PACKAGED
        self.user_keys = _key_paths(OmegaConf.to_container(user, resolve=False))
        self.cli_keys: set[tuple] = set()
        self.picks: list[groups.Pick] = []
        self._preset_keys: dict[int, set[tuple]] = {}

    def _preset_sets(self, pick: groups.Pick, path: tuple) -> bool:
        if id(pick) not in self._preset_keys:
            raw = OmegaConf.to_container(OmegaConf.load(pick.file), resolve=False) or {}
            prefix = tuple(pick.package.split("."))
            self._preset_keys[id(pick)] = _key_paths(raw, prefix) if isinstance(raw, dict) else set()
        return any(path[: len(k)] == k for k in self._preset_keys[id(pick)])

    def _preset(self, path: tuple, from_command_line: bool) -> groups.Pick | None:
        for pick in self.picks:
            if pick.from_command_line == from_command_line and self._preset_sets(pick, path):
                return pick
        return None

    def of(self, path: tuple) -> str:
        if any(path[: len(k)] == k for k in self.cli_keys):
            return COMMAND_LINE
        pick = self._preset(path, from_command_line=True)
        if pick is None and not any(path[: len(k)] == k for k in self.user_keys):
            pick = self._preset(path, from_command_line=False)
        if pick is not None:
            return pick.label(groups.packaged_conf_dir())
        if any(path[: len(k)] == k for k in self.user_keys):
            return self.label
        return PACKAGED

    def base_dir(self, path: tuple) -> Path | None:
        source = self.of(path)
        if source == COMMAND_LINE:
            return Path.cwd()
        if source == PACKAGED or self.conf_path is None or source.startswith("the preset conf/"):
            return None  # packaged values are not paths to rewrite
        return self.conf_path.resolve().parent  # the YAML and the presets in its own conf/ folder


def _key_paths(data: Any, prefix: tuple = ()) -> set[tuple]:
    out: set[tuple] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            out.add((*prefix, key))
            out |= _key_paths(value, (*prefix, key))
    return out


def _read_user_yaml(path: Path) -> tuple[DictConfig, list[tuple[str, str]]]:
    """The YAML's `ajet:` section, and the (group, option) picks of its `defaults:` list."""
    if not path.exists():
        raise ConfigError(f"config file {str(path)!r} does not exist (current directory: {os.getcwd()})")
    if not path.is_file():
        raise ConfigError(f"config path {str(path)!r} is not a file; pass the YAML file itself to --conf")
    try:
        check_aliases(path.read_bytes())  # before OmegaConf copies an alias bomb into 10^9 nodes
        loaded = OmegaConf.load(path)
    except YAMLProblem as exc:
        raise ConfigError(f"{path}: refused: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and context_mark is not None:
            problem += f" ({context} at line {context_mark.line + 1}, column {context_mark.column + 1})"
        raise ConfigError(f"{path}: YAML syntax error{where}: {problem}; fix the YAML and run again") from None
    except (OmegaConfBaseException, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the YAML: {one_line(exc)}") from None
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"{path}: the file must be a mapping with one top-level key 'ajet:'; "
                          "found a list")
    for key in loaded.keys():
        if key not in ("ajet", "defaults"):
            raise ConfigError(f"{path}: unknown top-level key {key!r}; {_top_level_hint(str(key))}")
    picks = _defaults_list(path, OmegaConf.to_container(loaded).get("defaults", []))
    loaded.pop("defaults", None)
    if "ajet" in loaded and loaded.ajet is None:
        loaded.ajet = {}
    if "ajet" in loaded and not isinstance(loaded.ajet, DictConfig):
        raise ConfigError(f"{path}: 'ajet:' must be a mapping of settings, got {OmegaConf.to_container(loaded)['ajet']!r}")
    return loaded, picks


def _defaults_list(path: Path, entries: Any) -> list[tuple[str, str]]:
    """`defaults: [{judge: function_call}, {model: tiny-random}]` as (group, option) pairs."""
    shape = "a list of `- group: option` entries, e.g. `- judge: function_call`"
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: 'defaults:' must be {shape}; got {entries!r}")
    picks: list[tuple[str, str]] = []
    for entry in entries:
        if entry == "_self_":
            continue  # ajet always puts your own keys after the presets of this list
        if not (isinstance(entry, dict) and len(entry) == 1):
            raise ConfigError(f"{path}: defaults entry {entry!r} is not `group: option`; 'defaults:' must be {shape}")
        (group, option), = entry.items()
        if not isinstance(option, str):
            raise ConfigError(f"{path}: defaults entry {entry!r}: the option must be a preset name, got {option!r}")
        picks.append((str(group).removeprefix("override ").strip(), option))
    return picks


def _top_level_hint(key: str) -> str:
    if key == "hydra":
        return ("a user YAML holds an 'ajet:' section and optionally a 'defaults:' list of presets; ajet "
                "finds its packaged config and your conf/ folder itself, so remove the Hydra boilerplate")
    if key in AjetConfig.model_fields:
        return f"settings live under 'ajet:'; move it to ajet.{key}"
    if difflib.get_close_matches(key, ["ajet"], n=1):
        return "did you mean 'ajet'?"
    return "everything ajet reads lives under 'ajet:'"


def _prepare_overrides(overrides: list[str], sources: _Sources,
                       folders: list[Path]) -> tuple[list[str], dict[str, str]]:
    """Parse each override with Hydra's own parser, add the optional `ajet.` prefix, check keys.
    Returns the overrides for Hydra and the group picks (`judge=function_call`, `backbone=swift`)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    out: list[str] = []
    picks: dict[str, str] = {}
    for line in overrides:
        try:
            (override,) = parser.parse_overrides([line])
        except OverrideParseException as exc:
            detail = str(exc).splitlines()[1] if len(str(exc).splitlines()) > 1 else str(exc)
            detail = detail.split(" expecting ")[0]
            raise ConfigError(f"bad command-line override {line!r}: {detail}; {_OVERRIDE_HELP}") from None
        key = override.key_or_group
        group = groups.canonical(key.removeprefix("ajet."))
        value = None if override.is_delete() or override.is_add() else override.value()
        if override.package is None and isinstance(value, str) and groups.is_group_name(group):
            # `judge=function_call` picks a preset; `workflow=agent.py:Agent` (no such preset) sets the key.
            if group == "backbone" or groups.option_file(group, value, folders) is not None or group != "workflow":
                picks[group] = value
                continue
        if override.package is not None or key == "ajet" or key.startswith("ajet."):
            out.append(line)
        else:
            lead = line[: len(line) - len(line.lstrip("~+"))]
            out.append(f"{lead}ajet.{line[len(lead):]}")
            key = f"ajet.{key}"
        if override.package is None:
            path = tuple(key.split("."))
            _check_key(path, COMMAND_LINE)
            sources.cli_keys.add(path)
    return out, picks


def _check_key(path: tuple[str, ...], source: str) -> None:
    problem = walk.unknown_key(path)
    if problem is None:
        return
    index, names = problem
    shown = ".".join(path[: index + 1])
    raise ConfigError(f"invalid config: {shown} (from {source}): {unknown_key_text(path[index], names)}")


def _check_backbone(name: str, source: str) -> None:
    names = available_backbones()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown backbone {name!r} (from {source}); expected one of: {', '.join(names)}{hint}")


def _compose(user: DictConfig, picks: list[groups.Pick], overrides: list[str], folders: list[Path],
             sources: _Sources) -> DictConfig:
    """Run Hydra's Compose API on a temporary primary config holding the user YAML.

    Defaults list: schema defaults, the packaged root (conf/ajet.yaml), the YAML's own picks, the
    YAML itself (`_self_`), then the command line's picks, which therefore win over the YAML.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    with tempfile.TemporaryDirectory(prefix="ajet-conf-") as tmp:
        defaults = {"ajet": walk.schema_defaults(RootConfig)["ajet"]}
        OmegaConf.save(OmegaConf.create(defaults), Path(tmp) / "_ajet_schema_defaults.yaml")
        # A copy, so a user's own conf/ajet.yaml can never shadow the packaged root.
        root = OmegaConf.load(groups.packaged_conf_dir() / "ajet.yaml")
        root.pop("defaults", None)
        OmegaConf.save(root, Path(tmp) / "_ajet_packaged_root.yaml")
        primary = OmegaConf.create({
            "defaults": ["_ajet_schema_defaults", "_ajet_packaged_root",
                         *[p.defaults_entry for p in picks if not p.from_command_line], "_self_",
                         *[p.defaults_entry for p in picks if p.from_command_line]],
            "hydra": {"searchpath": [f"file://{folder}" for folder in folders]},
        })
        primary.merge_with(user)
        OmegaConf.save(primary, Path(tmp) / "_ajet_user.yaml")
        # An application that already runs Hydra keeps its global state; ours is temporary.
        global_hydra = GlobalHydra.instance()
        outer = global_hydra.hydra if global_hydra.is_initialized() else None
        global_hydra.clear()
        try:
            with initialize_config_dir(config_dir=tmp, version_base="1.3", job_name="ajet"):
                return compose(config_name="_ajet_user", overrides=overrides)
        except (HydraException, OmegaConfBaseException) as exc:
            text = one_line(exc)
            from_cli = text.startswith(("Could not override", "Could not delete", "Could not append"))
            raise ConfigError(f"invalid config: {text} (from {COMMAND_LINE if from_cli else sources.label})") from None
        finally:
            if outer is not None:  # initialize_config_dir swapped the singleton: fetch it again
                GlobalHydra.instance().clear()
                GlobalHydra.instance().initialize(outer)


def _resolve(cfg: DictConfig, sources: _Sources) -> dict[str, Any]:
    """Resolve interpolations (`${ajet.project}`, `${now:...}`, `${oc.env:VAR}`) into plain data."""
    try:
        data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        path = tuple(key.split(".")) if key != "?" else ()
        msg = one_line(exc).split(" full_key:")[0]
        # "KeyError raised while resolving interpolation: \"Environment variable 'X' not found\""
        msg = re.sub(r"^\w+ raised while resolving interpolation: \"?(.*?)\"?$", r"\1", msg)
        raise ConfigError(f"invalid config: {key} (from {sources.of(path)}): cannot resolve the interpolation: "
                          f"{msg}") from None
    return _drop_missing(data)


def _drop_missing(data: Any) -> Any:
    """Remove unset ('???') values so pydantic reports them as required fields."""
    if isinstance(data, dict):
        return {k: _drop_missing(v) for k, v in data.items() if v != walk.MISSING}
    if isinstance(data, list):
        return [_drop_missing(v) for v in data]
    return data


def _resolve_paths(data: dict[str, Any], sources: _Sources) -> None:
    """Rewrite relative FilePath / PluginRef values against the folder of the layer that set them."""
    for path, marker in list(walk.marked_values(data)):
        parent = data
        for segment in path[:-1]:
            parent = parent[segment]
        value = parent[path[-1]]
        base = sources.base_dir(path)
        if not isinstance(value, str) or base is None:
            continue
        parent[path[-1]] = _resolve_path(value, base) if marker == FILE_PATH else _resolve_plugin(value, base)


def _resolve_path(value: str, base: Path) -> str:
    if not value or "\n" in value or "{" in value or "://" in value:
        return value  # inline text (a chat template) or a URL, not a path
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    candidate = base / path
    if candidate.exists() or path.suffix.lower() in _FILE_SUFFIXES:
        return os.path.normpath(candidate)
    return value  # a split name, dataset builder or hub id


def _resolve_plugin(value: str, base: Path) -> str:
    target, sep, name = value.rpartition(":")
    if not sep or not target.endswith(".py"):
        return value  # 'pkg.mod:Name' or a built-in name
    path = Path(target).expanduser()
    if not path.is_absolute():
        path = Path(os.path.normpath(base / path))
    return f"{path}:{name}"


def _escape_interpolations(value: Any) -> Any:
    """Keep literal '${' text literal when the YAML is loaded again by OmegaConf."""
    if isinstance(value, str):
        return value.replace("${", "\\${")
    if isinstance(value, dict):
        return {k: _escape_interpolations(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_interpolations(v) for v in value]
    return value


def config_to_yaml(cfg: AjetConfig) -> str:
    """The fully resolved config as YAML; `load_config` of this text gives the same config."""
    data = {"ajet": _escape_interpolations(cfg.model_dump(mode="json"))}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


def save_resolved_config(cfg: AjetConfig, run_dir: Path) -> Path:
    """Write `config.yaml` into the run folder (atomically), so the run can be repeated exactly."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / "config.yaml"
    tmp = target.with_name(f".config.yaml.{os.getpid()}.tmp")
    tmp.write_text(config_to_yaml(cfg), encoding="utf-8")
    os.replace(tmp, target)
    return target
