"""Run inside the LLaMA-Factory environment: check a training YAML with LLaMA-Factory's own parser.

    <env python> check_args.py train.yaml

Imports only the standard library, PyYAML and llamafactory (ajet is not installed there; this file
is run by path). Exit 0 and print `ajet-check: ok` when `get_train_args` accepts the arguments;
otherwise exit 3 and print `ajet-check: <LLaMA-Factory's message>`, with the closest known keys for
keys it does not know. The check parses and validates only: no model or data is loaded.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys


def _known_keys() -> list[str]:
    from llamafactory.hparams.parser import _TRAIN_ARGS

    return sorted({f.name for cls in _TRAIN_ARGS for f in dataclasses.fields(cls)})


def _hint(message: str) -> str:
    unknown = re.findall(r"'([A-Za-z0-9_.]+)'", message.split(":", 1)[-1]) if "not used" in message else []
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, _known_keys(), n=1)
        hints.append(f"{key!r}: did you mean {close[0]!r}?" if close else f"{key!r} is not a LLaMA-Factory key")
    return f" ({'; '.join(hints)})" if hints else ""


def main(path: str) -> int:
    import yaml
    from llamafactory.hparams import get_train_args

    with open(path, encoding="utf-8") as handle:
        args = yaml.safe_load(handle)
    try:
        get_train_args(args)
    except (ValueError, TypeError) as exc:
        message = " ".join(str(exc).split())
        print(f"ajet-check: {message}{_hint(message)}", flush=True)
        return 3
    print("ajet-check: ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
