"""Walking the pydantic config models by key path: field names at a level (for did-you-mean), the
defaults of every field (the base layer Hydra composes onto), and which fields hold file paths or
plugin references. Shared by the loader and the configuration reference generator.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from ajet.config.schema import FILE_PATH, PLUGIN_REF, RootConfig

# OmegaConf's marker for a value that must be set; Hydra accepts overrides of such keys.
MISSING = "???"


def members(annotation: Any) -> list[Any]:
    """The alternatives of a type: `A | B | None` -> [A, B, None]; Annotated wrappers removed."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return members(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [m for arg in get_args(annotation) for m in members(arg)]
    return [annotation]


def markers(field: FieldInfo) -> set[str]:
    """The ajet markers (FILE_PATH, PLUGIN_REF) a field carries, at top level or inside Optional."""
    found = {m for m in field.metadata if m in (FILE_PATH, PLUGIN_REF)}

    def scan(annotation: Any) -> None:
        origin = get_origin(annotation)
        if origin is Annotated:
            found.update(m for m in annotation.__metadata__ if m in (FILE_PATH, PLUGIN_REF))
        elif origin is Union or origin is types.UnionType:
            for arg in get_args(annotation):
                scan(arg)

    scan(field.annotation)
    return found


def is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def child_types(tp: Any, segment: str | int) -> list[Any] | None:
    """Types that `segment` under a value of type `tp` may have; None when `tp` takes no such key.

    An empty list means "anything goes below here" (Any, or a free-form dict of Any).
    """
    found: list[Any] = []
    for member in members(tp):
        origin = get_origin(member)
        if member is Any or member is typing.Any:
            return []
        if is_model(member):
            if isinstance(segment, str) and segment in member.model_fields:
                found.append(member.model_fields[segment].annotation)
        elif origin is dict or member is dict:
            args = get_args(member)
            if not args or members(args[1]) == [Any]:
                return []
            found.append(args[1])
        elif (origin is list or member is list) and _is_index(segment):
            args = get_args(member)
            if not args:
                return []
            found.append(args[0])
    return found or None


def _is_index(segment: str | int) -> bool:
    return isinstance(segment, int) or (isinstance(segment, str) and segment.isdigit())


def model_at(path: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The config model class found at `path` (e.g. ('ajet', 'rollout') -> RolloutConfig)."""
    tps: list[Any] = [RootConfig]
    for segment in path:
        nxt: list[Any] = []
        for tp in tps:
            nxt.extend(child_types(tp, segment) or [])
        if not nxt:
            return None
        tps = nxt
    models = [m for tp in tps for m in members(tp) if is_model(m)]
    return models[0] if models else None


def unknown_key(path: tuple[str, ...]) -> tuple[int, list[str]] | None:
    """Check a key path against the models: None when valid, else (index of the bad segment, the
    field names valid at that level). Below free-form dicts anything is accepted."""
    tps: list[Any] = [RootConfig]
    for i, segment in enumerate(path):
        nxt: list[Any] = []
        accepts_anything = False
        for tp in tps:
            child = child_types(tp, segment)
            if child == []:
                accepts_anything = True
            elif child:
                nxt.extend(child)
        if accepts_anything:
            return None
        if not nxt:
            names = sorted({f for tp in tps for m in members(tp) if is_model(m) for f in m.model_fields})
            return i, names
        tps = nxt
    return None


def schema_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Every field's default as plain data; required fields are '???' (required sections recurse)."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if field.is_required():
            sub = [m for m in members(field.annotation) if is_model(m)]
            out[name] = schema_defaults(sub[0]) if sub else MISSING
        else:
            out[name] = to_jsonable_python(field.get_default(call_default_factory=True))
    return out


def marked_values(data: Any, tp: Any = RootConfig, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """Yield (key path, marker) for every value in `data` stored in a FILE_PATH / PLUGIN_REF field."""
    if isinstance(data, dict):
        for key, value in data.items():
            for member in members(tp):
                if is_model(member) and key in member.model_fields:
                    field = member.model_fields[key]
                    for marker in markers(field):
                        yield (*path, key), marker
                    yield from marked_values(value, field.annotation, (*path, key))
                    break
                if get_origin(member) is dict and get_args(member):
                    yield from marked_values(value, get_args(member)[1], (*path, key))
                    break
    elif isinstance(data, list):
        for member in members(tp):
            if get_origin(member) is list and get_args(member):
                for i, value in enumerate(data):
                    yield from marked_values(value, get_args(member)[0], (*path, i))
                break


def iter_fields(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, FieldInfo, type[BaseModel] | None]]:
    """Depth-first (key path, field, section model or None) for every field reachable from `model`.
    Fields that are dicts of models are walked with a `<name>` placeholder segment."""
    for name, field in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        section = next((m for m in members(field.annotation) if is_model(m)), None)
        yield path, field, section
        if section is not None:
            yield from iter_fields(section, path)
            continue
        for member in members(field.annotation):
            if get_origin(member) is dict and get_args(member):
                value_model = next((m for m in members(get_args(member)[1]) if is_model(m)), None)
                if value_model is not None:
                    yield from iter_fields(value_model, f"{path}.<name>")
