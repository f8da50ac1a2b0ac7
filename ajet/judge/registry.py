"""Build a judge from its config: built-in names, or a plugin `module:Class` / `file.py:Class`.

`build_judge` is the one entry point the rest of ajet uses. Built-in judges validate their keyword
arguments with a small pydantic model through `parse_args`, which turns pydantic's errors into
`ConfigError`s that name the config key (`judge.args.<key>`), the value, what was expected, and a
did-you-mean for misspelled argument names. Nested judges (the parts of a `composite`) are built
with a longer key path, e.g. `judge.args.parts[1].judge.args.mode`.
"""

from __future__ import annotations

import difflib
import inspect
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ajet.errors import AjetError, ConfigError, PluginError
from ajet.judge.base import Judge
from ajet.judge.success_reward import SuccessReward
from ajet.plugins import load_object

# name -> "module:Class"; imported lazily so `import ajet.judge` stays cheap (llm_judge pulls openai).
BUILTIN_JUDGES: dict[str, str] = {
    "exact_match": "ajet.judge.exact_match:ExactMatchJudge",
    "math_boxed": "ajet.judge.math_boxed:MathBoxedJudge",
    "function_call": "ajet.judge.function_call:FunctionCallJudge",
    "composite": "ajet.judge.composite:CompositeJudge",
    "llm_judge": "ajet.judge.llm_judge:LLMJudge",
    "grounded": "ajet.judge.grounded:GroundedJudge",
    "agent": "ajet.judge.agent:AgentJudge",
    "tool_reference": "ajet.judge.tool_reference:ToolReferenceJudge",
}

# Where the judge being built sits in the config, and the folder plugin paths resolve against.
# Context variables (not constructor arguments) so `ExactMatchJudge(mode="number")` stays a plain call.
_WHERE: ContextVar[str] = ContextVar("ajet_judge_where", default="judge")
_BASE_DIR: ContextVar[Path | None] = ContextVar("ajet_judge_base_dir", default=None)

ArgsT = TypeVar("ArgsT", bound=BaseModel)


def build_judge(cfg: Any, base_dir: str | Path | None = None, *, where: str = "judge") -> Judge:
    """Build the judge `cfg` (an `ajet.config.schema.JudgeConfig`, or a dict of its fields) names.

    `base_dir` is the folder `file.py:Class` plugin paths resolve against (the YAML's folder);
    `where` is the config key path used in error messages.
    """
    cfg = _as_judge_config(cfg, where)
    base = Path(base_dir) if base_dir is not None else None
    where_token = _WHERE.set(where)
    base_token = _BASE_DIR.set(base)
    try:
        cls = _resolve_class(cfg.type, base, where)
        judge = _construct(cls, dict(cfg.args), cfg.type, where)
    finally:
        _WHERE.reset(where_token)
        _BASE_DIR.reset(base_token)
    judge.success_threshold = float(cfg.success_threshold)
    return SuccessReward(judge) if cfg.reward == "success" else judge


def current_base_dir() -> Path | None:
    """The plugin base folder of the `build_judge` call in progress (for judges that build judges)."""
    return _BASE_DIR.get()


def current_where() -> str:
    """The config key path of the judge being built (`judge`, `judge.args.parts[0].judge`, ...)."""
    return _WHERE.get()


def parse_args(model: type[ArgsT], args: dict[str, Any], judge_name: str) -> ArgsT:
    """Validate a judge's keyword arguments; raise `ConfigError` naming `<where>.args.<key>`."""
    prefix = f"{current_where()}.args"
    allowed = sorted(model.model_fields)
    for key in args:
        if key not in model.model_fields:
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{prefix}.{key}: unknown argument {key!r} of judge {judge_name!r}{hint} "
                f"(allowed: {', '.join(allowed) or 'none'})"
            )
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, prefix, judge_name)) from None


def check_weights(value: dict[str, float], defaults: dict[str, float], noun: str) -> dict[str, float]:
    """Weights a judge's YAML overrides: known names (with a did-you-mean), >= 0, and at least one
    positive once merged with `defaults`. `noun` names what is weighted ('metric', 'part')."""
    for key, weight in value.items():
        if key not in defaults:
            close = difflib.get_close_matches(key, list(defaults), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown {noun} {key!r}{hint} ({noun}s: {', '.join(defaults)})")
        if weight < 0:
            raise ValueError(f"weight of {key!r} is {weight}; weights must be >= 0")
    if sum({**defaults, **value}.values()) <= 0:
        raise ValueError(f"all weights are 0; give at least one {noun} a positive weight")
    return value


def _format_validation(exc: ValidationError, prefix: str, judge_name: str) -> str:
    lines = []
    for err in exc.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        value = err.get("input")
        shown = "" if err["type"] == "missing" else f" = {value!r}"
        message = err["msg"].removeprefix("Value error, ")
        lines.append(f"{prefix}{loc}{shown}: {message} (judge {judge_name!r})")
    return "\n".join(lines)


def _as_judge_config(cfg: Any, where: str) -> Any:
    from ajet.config.schema import JudgeConfig

    if isinstance(cfg, JudgeConfig):
        return cfg
    if isinstance(cfg, dict):
        try:
            return JudgeConfig.model_validate(cfg)
        except ValidationError as exc:
            raise ConfigError(_format_validation(exc, where, str(cfg.get("type", "?")))) from None
    raise ConfigError(f"{where}: expected a judge config {{type: ..., args: {{...}}}}, got {cfg!r}")


def _resolve_class(type_name: str, base_dir: Path | None, where: str) -> type[Judge]:
    if type_name in BUILTIN_JUDGES:
        return load_object(BUILTIN_JUDGES[type_name])
    if ":" not in type_name:
        close = difflib.get_close_matches(type_name, list(BUILTIN_JUDGES), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"{where}.type = {type_name!r}: not a built-in judge ({', '.join(BUILTIN_JUDGES)}) and not a "
            f"plugin reference; {hint}A plugin is named 'package.module:Class' or 'path/to/file.py:Class'."
        )
    obj = load_object(type_name, base_dir)
    if not (inspect.isclass(obj) and issubclass(obj, Judge)):
        kind = type(obj).__name__ if not inspect.isclass(obj) else f"class {obj.__name__}"
        raise PluginError(
            f"{where}.type = {type_name!r} names a {kind}, not a subclass of ajet.Judge; define "
            f"`class {type_name.rpartition(':')[2]}(ajet.Judge)` with `async def score(self, task, output)`."
        )
    if inspect.isabstract(obj):
        raise PluginError(
            f"{where}.type = {type_name!r}: {obj.__name__} is abstract (it must implement "
            f"`async def score(self, task, output) -> Reward`)."
        )
    return obj


def _construct(cls: type[Judge], args: dict[str, Any], type_name: str, where: str) -> Judge:
    try:
        return cls(**args)
    except AjetError:
        raise
    except Exception as exc:
        # A plugin judge with its own signature (or checks) rejected the YAML's arguments.
        raise ConfigError(
            f"{where}.args = {args!r}: {cls.__name__}(**args) failed: {type(exc).__name__}: {exc}. "
            f"Check the arguments against {type_name!r}'s __init__."
        ) from None
