"""The `xlam` task reader and SFT converter: function-calling data in the shape of Salesforce's
xlam-function-calling-60k (the data of seed 003).

A row is `{"id": 7, "query": str, "tools": JSON string, "answers": JSON string}`, where `tools` is a
list of `{"name", "description", "parameters": {param: {"type": "str, optional", "description",
"default"}}}` and `answers` the expected calls `[{"name", "arguments": {...}}]`. The file is a
JSON array (as xlam-60k ships) or JSON Lines; `tools`/`answers` may also be lists already.

    task_reader: {type: xlam, train: xlam.json, split_ratio: 0.9}

gives tasks for the `function_call` judge: `answer = {"calls": [...]}` and `metadata.tools` the
tools as OpenAI function specs with JSON-schema parameters (so `schema_hit_rate` can check calls).
`convert_xlam` (command: `ajet data xlam IN --out DIR`) writes train.jsonl / val.jsonl in ajet's
task shape and sft.jsonl demonstrations (system, user, assistant tool calls) in OpenAI format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ajet.errors import TaskReaderError
from ajet.task_reader.base import RELATIVE_PATHS_HINT, TaskBuilder, TaskSet, resolve_path, split_tasks
from ajet.workflow import Task

SYSTEM_PROMPT = ("You are a helpful assistant with access to tools. When you need to call a function, "
                 "call it with the arguments the user's request gives.")
_TYPES = {"str": "string", "string": "string", "int": "integer", "integer": "integer", "float": "number",
          "number": "number", "bool": "boolean", "boolean": "boolean", "list": "array", "array": "array",
          "tuple": "array", "set": "array", "dict": "object", "object": "object", "any": None}


def xlam_param_schema(spec: Any) -> tuple[dict[str, Any], bool]:
    """One xLAM parameter (`{"type": "List[int], optional", ...}`) as a JSON schema; and whether required."""
    if not isinstance(spec, dict):
        return {}, True
    raw = str(spec.get("type", "")).strip()
    optional = bool(re.search(r",\s*optional\s*$", raw, re.I)) or ("default" in spec and spec["default"] != "")
    base = re.sub(r",\s*optional\s*$", "", raw, flags=re.I).strip()
    outer = re.split(r"[\[\s|]", base, maxsplit=1)[0].lower()
    schema: dict[str, Any] = {}
    json_type = _TYPES.get(outer, _TYPES.get(base.lower()))
    if json_type:
        schema["type"] = json_type
    if spec.get("description"):
        schema["description"] = str(spec["description"])
    if "default" in spec and spec["default"] not in ("", None):
        schema["default"] = spec["default"]
    return schema, not optional


def xlam_tools_to_openai(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """xLAM tool specs -> OpenAI `{"type": "function", "function": {..., "parameters": JSON schema}}`.
    Tools already in JSON-schema form (parameters.type == 'object') pass through."""
    out = []
    for tool in tools:
        params = tool.get("parameters") or {}
        if params.get("type") == "object" and isinstance(params.get("properties"), dict):
            schema = params
        else:
            properties, required = {}, []
            for name, spec in params.items():
                properties[name], needed = xlam_param_schema(spec)
                if needed:
                    required.append(name)
            schema = {"type": "object", "properties": properties, "required": required}
        out.append({"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                                     "parameters": schema}})
    return out


def parse_xlam_row(row: Any) -> tuple[Task | None, str | None]:
    """One xLAM row as a Task, or (None, reason) for a bad row."""
    if not isinstance(row, dict):
        return None, f"row is a {type(row).__name__}, expected a JSON object"
    query = row.get("query")
    if not isinstance(query, str) or not query.strip():
        return None, "missing or empty 'query'"
    parsed = {}
    for key in ("tools", "answers"):
        value = row.get(key)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                return None, f"'{key}' is not valid JSON: {exc.msg} (column {exc.colno})"
        if not isinstance(value, list):
            return None, f"'{key}' must be a list (or a JSON string of one), got {type(value).__name__}"
        parsed[key] = value
    for i, call in enumerate(parsed["answers"]):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or \
                not isinstance(call.get("arguments", {}), dict):
            return None, f"answers[{i}] is not {{'name': str, 'arguments': object}}"
    for i, tool in enumerate(parsed["tools"]):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return None, f"tools[{i}] has no 'name'"
    calls = [{"name": c["name"], "arguments": c.get("arguments") or {}} for c in parsed["answers"]]
    tools = xlam_tools_to_openai(parsed["tools"])
    raw_id = row.get("id")
    task_id = f"xlam-{raw_id}" if raw_id not in (None, "") else Task.stable_id(query, calls, {"tools": tools})
    return Task(task_id=task_id, query=query, answer={"calls": calls}, metadata={"tools": tools}), None


def iter_rows(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line or index, row, parse error) of a JSON-array or JSON-lines file."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskReaderError(f"{path}: not a valid JSON array ({exc.msg} at line {exc.lineno}); "
                                  "xlam files are a JSON array or JSON Lines") from exc
        for index, row in enumerate(rows, 1):
            yield index, row, None
        return
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield line_no, json.loads(line), None
        except json.JSONDecodeError as exc:
            yield line_no, None, f"invalid JSON: {exc.msg} (column {exc.colno})"


def read_xlam_file(path: Path, limit: int | None = None, key: str = "task_reader.train") -> TaskSet:
    if not path.is_file():
        raise TaskReaderError(f"{key}: xlam file {str(path)!r} does not exist; check the path "
                              f"({RELATIVE_PATHS_HINT})")
    builder = TaskBuilder(None, source=f"xlam:{path}")
    for line, row, error in iter_rows(path):
        task, reason = (None, error) if error else parse_xlam_row(row)
        if task is None:
            builder.skip(str(path), line, reason or "bad row")
            continue
        builder.add_row(task, str(path), line)
        if limit is not None and len(builder.tasks) >= limit:
            break
    return builder.finish()


def read_xlam_source(cfg: Any, which: str, base_dir: str | Path | None, limit: int | None) -> TaskSet:
    """The `xlam` reader: `cfg.train` / `cfg.val` name xLAM-shaped files."""
    name = cfg.train if which == "train" else cfg.val
    if name is None:
        raise TaskReaderError(f"task_reader.{which} is not set; name the {which} xlam file")
    return read_xlam_file(resolve_path(name, base_dir), limit, key=f"task_reader.{which}")


def demonstration(task: Task, system_prompt: str = SYSTEM_PROMPT) -> dict[str, Any]:
    """An SFT row: the tools, the system prompt, the query and the expected calls as tool_calls."""
    calls = [{"id": f"call_{i}", "type": "function",
              "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
             for i, c in enumerate(task.answer["calls"])]
    messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": task.query},
                {"role": "assistant", "content": "", "tool_calls": calls}]
    return {"tools": task.metadata["tools"], "messages": messages}


def convert_xlam(source: str | Path, out: str | Path, *, val_ratio: float = 0.1, seed: int = 0,
                 limit: int | None = None, system_prompt: str = SYSTEM_PROMPT) -> dict[str, int]:
    """xLAM file -> out/train.jsonl, out/val.jsonl (ajet tasks) and out/sft.jsonl (train demonstrations).

    The split is ajet's (`split_tasks`: seeded shuffle, order kept inside each part), so the same
    command gives the same files; demonstrations come from the train part only."""
    if not 0 <= val_ratio < 1:
        raise TaskReaderError(f"--val-ratio must be in [0, 1), got {val_ratio}")
    tasks = read_xlam_file(Path(source), limit, key="xlam source")
    train, val = split_tasks(tasks.tasks, 1 - val_ratio, seed) if val_ratio > 0 else (tasks.tasks, [])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def write(name: str, rows: list[dict[str, Any]]) -> None:
        with (out / name).open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")

    as_row = lambda t: {"task_id": t.task_id, "query": t.query, "answer": t.answer, "metadata": t.metadata}
    write("train.jsonl", [as_row(t) for t in train])
    write("val.jsonl", [as_row(t) for t in val])
    write("sft.jsonl", [demonstration(t, system_prompt) for t in train])
    return {"train": len(train), "val": len(val), "sft": len(train), "skipped": len(tasks.skipped)}
