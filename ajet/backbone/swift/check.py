"""Check a run's swift command lines and datasets with swift itself, before anything trains.

Run inside swift's environment by the backbone (`python -m ajet.backbone.swift.check request.json`):

- every stage's flags go through swift's own argument parser (the dataclasses `swift sft` and
  `swift rlhf` parse), so an unknown flag or a bad value is reported with swift's words and a
  did-you-mean, in seconds rather than after the model has loaded;
- every row of the SFT and DPO datasets is loaded by swift's dataset loader and encoded by the
  run's template, so a row swift cannot take is named (its line in the user's file) with swift's
  error.

Prints one JSON object: {"problems": ["...", ...]}; exit code 0 either way (the caller decides).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any


class _ParseError(Exception):
    pass


def check_flags(command: str, argv: list[str]) -> list[str]:
    from transformers import HfArgumentParser

    from swift.arguments import RLHFArguments, SftArguments
    from swift.utils.utils import _patch_get_type_hints

    cls = {"sft": SftArguments, "rlhf": RLHFArguments}[command]
    with _patch_get_type_hints():
        parser = HfArgumentParser([cls])

    def error(message: str) -> None:
        raise _ParseError(message)

    parser.error = error  # argparse would print and exit
    try:
        _, unknown = parser.parse_known_args(argv)
    except _ParseError as exc:
        return [f"swift {command} refuses the arguments: {exc}"]
    known = [o[2:] for o in parser._option_string_actions if o.startswith("--")]
    problems = []
    for item in unknown:
        if item.startswith("--"):
            name = item[2:].split("=", 1)[0]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(f"swift {command} has no argument {name!r}{hint}")
    return problems


def check_dataset(stage: dict[str, Any]) -> list[str]:
    from swift.dataset import load_dataset
    from swift.model import get_model_processor
    from swift.template import get_template

    import ajet.backbone.swift.template  # noqa: F401  (registers --template ajet)

    flags = stage["flags"]
    _, processor = get_model_processor(flags["model"], model_type=flags.get("model_type"), load_model=False)
    template = get_template(processor, template_type=flags.get("template"), agent_template=flags.get("agent_template"))
    template.set_mode("rlhf" if stage["stage"] == "dpo" else "train")
    try:
        dataset, _ = load_dataset([stage["dataset"]], split_dataset_ratio=0, num_proc=1)
    except Exception as exc:
        return [f"swift cannot load the {stage['stage']} dataset {stage['dataset']}: {type(exc).__name__}: {exc}"]
    problems = []
    lines = stage.get("source_lines") or []
    for i, row in enumerate(dataset):
        try:
            template.encode(row)
        except Exception as exc:  # swift's own reason, with the row's line in the user's file
            where = f"{stage['source']}:{lines[i]}" if i < len(lines) else f"row {i + 1}"
            problems.append(f"{where}: swift cannot encode this {stage['stage']} row: {type(exc).__name__}: {exc}")
            if len(problems) >= 5:
                break
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("request", help="JSON: {'stages': [{'stage', 'command', 'argv', 'flags', 'dataset', ...}]}")
    args = parser.parse_args(argv)
    with open(args.request, encoding="utf-8") as handle:
        request = json.load(handle)
    problems: list[str] = []
    for stage in request["stages"]:
        found = check_flags(stage["command"], stage["argv"])
        problems += [f"{stage['stage']} stage: {p}" for p in found]
        if not found and stage["stage"] in ("sft", "dpo"):
            problems += check_dataset(stage)
    print(json.dumps({"problems": problems}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
