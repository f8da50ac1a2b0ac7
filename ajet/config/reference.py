"""Generate the configuration reference (Markdown) from the pydantic models.

    python -m ajet.config.reference > docs/configuration.md

Every key path, its type, default and description come from `ajet/config/schema.py`; defaults
that the packaged `conf/ajet.yaml` sets (interpolations such as `output_dir`) are shown as written
there. A unit test fails when a field has no description or when docs/configuration.md is stale.
"""

from __future__ import annotations

import json
import re
import sys
import typing
from typing import Any, Literal, get_args, get_origin

import annotated_types
from omegaconf import OmegaConf
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from ajet.config import walk
from ajet.config.groups import packaged_conf_dir
from ajet.config.loader import available_backbones
from ajet.config.schema import FILE_PATH, PLUGIN_REF, RootConfig

_INTRO = """\
# Configuration reference

<!-- Generated from ajet/config/schema.py by `python -m ajet.config.reference > docs/configuration.md`.
     Do not edit by hand: tests/unit/test_config.py fails when this file is stale. -->

A run is configured by one YAML file that holds only what it changes, under a top-level `ajet:` key:

```yaml
ajet:
  project: energy
  model: {path: smollm2-135m-instruct, lora: {rank: 16, alpha: 32}}
  workflow: agent.py:EnergyAgent
  task_reader: {type: jsonl, train: train.jsonl, val: val.jsonl}
  judge: {type: function_call}
  algorithm: [sft, grpo]
  sft: {data: sft.jsonl}
  trainer: {steps: 50, lr: 1e-5}
```

## How the config is put together

Hydra composes these layers, later ones winning, then pydantic validates the result:

1. the defaults of every field (the tables below);
2. the packaged root, `conf/ajet.yaml` (shipped inside the wheel as `ajet/conf/`);
3. the presets your YAML picks in its `defaults:` list (see [Presets](#presets) and
   [presets.md](presets.md)), then your YAML's own `ajet:` keys (`--conf`);
4. the command line: presets picked there (`judge=function_call`, `model=tiny-random`,
   `--backbone=swift`; one of: {backbones}), then overrides in
   [Hydra's override grammar](https://hydra.cc/docs/advanced/override_grammar/basic/):

```
ajet --conf my.yaml --backbone=debug trainer.steps=3        # the ajet. prefix is optional
ajet --conf my.yaml ajet.rollout.group_size=8 'algorithm=[sft,grpo]'
ajet --conf my.yaml judge=function_call model=tiny-random   # pick presets by name
ajet --conf my.yaml +workflow_args.max_hops=3 ~trainable_agents  # + adds a key, ~ deletes one
ajet --conf my.yaml --cfg                                   # print the resolved config, run nothing
```

Interpolations resolve after composition: `${ajet.project}`, `${now:%Y%m%d-%H%M%S}`,
`${oc.env:OPENAI_API_KEY}`. A key that is not set and has no default (`ajet.workflow`) is an error.

**Relative paths.** Fields of type `path` and `plugin` below that come from your YAML resolve
against the YAML's folder, so `ajet` runs from any directory; values given on the command line
resolve against the current directory. A `path` value counts as a path when something exists there
or it has a file suffix (`.jsonl`, `.jinja`, ...); a split name (`train`), dataset builder name or
hub id passes through unchanged. A `plugin` is `package.module:Name` (left as is) or
`path/to/file.py:Name` (the file part is resolved).

**Errors.** Nothing runs before the config is valid. An error names the key path, the value, what
was expected and where the value came from (your YAML, the command line or the packaged defaults);
an unknown key gets a did-you-mean. The command exits with code 2 and no traceback:

```
invalid config: ajet.rollout.group_size = 'abc' (from the command line): expected a valid integer, unable to parse string as an integer
invalid config: ajet.rollout.group_sise = 3 (from my.yaml): unknown key; did you mean 'group_size'?
```

**The saved config.** Each run writes its fully resolved config to `config.yaml` in its run folder
(`output_dir`); `ajet --conf runs/<project>/<time>/config.yaml` repeats the run exactly, and with
`--resume` continues it.
"""


def render() -> str:
    """The whole reference page as Markdown."""
    packaged = _packaged_values()
    parts = [_INTRO.replace("{backbones}", ", ".join(f"`{b}`" for b in available_backbones())), _presets()]
    tables: dict[str, list[str]] = {}
    descriptions: dict[str, str] = {}
    for path, field, section in walk.iter_fields(RootConfig, ""):
        descriptions[path] = field.description or ""
        if path != "ajet":
            tables.setdefault(path.rsplit(".", 1)[0], []).append(_row(path, field, section, packaged))
    for section_path, rows in tables.items():
        # A dict of sections (ajet.agents.<name>) takes the dict field's description.
        heading = descriptions.get(section_path) or descriptions.get(section_path.removesuffix(".<name>"), "")
        parts.append(f"## `{section_path}`\n\n{heading}\n")
        parts.append("| Key | Type | Default | Description |\n|---|---|---|---|")
        parts.extend(rows)
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def _presets() -> str:
    """The packaged presets, by group, each with the first line of its comment."""
    root = packaged_conf_dir()
    lines = ["## Presets", "",
             "Pick one by name on the command line (`judge=function_call`) or in your YAML's `defaults:` "
             "list; add your own in a `conf/<group>/` folder beside your YAML ([presets.md](presets.md)).", "",
             "| Group | Preset | What it sets |", "|---|---|---|"]
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for preset in sorted(folder.glob("*.yaml")):
            comments = [ln[1:].strip() for ln in preset.read_text().splitlines()
                        if ln.startswith("#") and not ln.startswith("# @package")]
            text = " ".join(comments)
            summary = re.split(r"(?<=\.)\s", text.split(": ", 1)[-1] if text.startswith("`") else text)[0]
            lines.append(f"| `{folder.name}` | `{preset.stem}` | {summary.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def missing_descriptions() -> list[str]:
    """Key paths of fields that have no description (the reference would have a hole there)."""
    return [path for path, field, _ in walk.iter_fields(RootConfig, "") if not (field.description or "").strip()]


def _packaged_values() -> dict[str, Any]:
    """Values set in the packaged ajet.yaml (unresolved), by dotted key path."""
    raw = OmegaConf.to_container(OmegaConf.load(packaged_conf_dir() / "ajet.yaml"), resolve=False)
    out: dict[str, Any] = {}

    def flatten(node: Any, prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict) and value:
                flatten(value, path)
            else:
                out[path] = value

    flatten({k: v for k, v in raw.items() if k != "defaults"}, "")
    return out


def _row(path: str, field: FieldInfo, section: type[BaseModel] | None, packaged: dict[str, Any]) -> str:
    if section is not None and not _nullable(field):
        type_text, default = "section", f"see [`{path}`](#{_anchor(path)})"
    else:
        type_text = _type_text(field.annotation, field) + _constraints(field)
        if section is not None:
            type_text += f" (see [`{path}`](#{_anchor(path)}))"
        elif "section" in type_text:  # a dict of sections
            type_text += f" (see [`{path}.<name>`](#{_anchor(path + '.<name>')}))"
        if path in packaged:
            default = f"`{json.dumps(packaged[path])}`"
        elif field.is_required():
            default = "required"
        else:
            default = f"`{json.dumps(to_jsonable_python(field.get_default(call_default_factory=True)))}`"
    cells = [f"`{path}`", type_text, default, field.description or ""]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _anchor(path: str) -> str:
    return path.replace(".", "").replace("<", "").replace(">", "")


def _nullable(field: FieldInfo) -> bool:
    return type(None) in walk.members(field.annotation)


def _type_text(annotation: Any, field: FieldInfo | None = None) -> str:
    marks = walk.markers(field) if field is not None else set()
    names: list[str] = []
    for member in walk.members(annotation):
        origin = get_origin(member)
        if member is type(None):
            text = "null"
        elif member is str and FILE_PATH in marks:
            text = "path"
        elif member is str and PLUGIN_REF in marks:
            text = "plugin"
        elif member is Any or member is typing.Any:
            text = "any"
        elif origin is Literal:
            text = " | ".join(repr(v) for v in get_args(member))
        elif origin is list:
            text = f"list[{_type_text(get_args(member)[0])}]"
        elif origin is dict:
            key, value = get_args(member)
            text = f"dict[{_type_text(key)}, {_type_text(value)}]"
        elif walk.is_model(member):
            text = "section"
        else:
            text = getattr(member, "__name__", str(member))
        names.append(text)
    return " | ".join(names)


def _constraints(field: FieldInfo) -> str:
    signs = {annotated_types.Ge: ("ge", ">="), annotated_types.Gt: ("gt", ">"),
             annotated_types.Le: ("le", "<="), annotated_types.Lt: ("lt", "<")}
    found = []
    for meta in field.metadata:
        for kind, (attr, sign) in signs.items():
            if isinstance(meta, kind):
                found.append(f"{sign} {getattr(meta, attr)}")
    return f", {' and '.join(found)}" if found else ""


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
