"""The `ajet` command line: train (the default command), `eval`, `serve` and `export`.

    ajet --conf my.yaml [--backbone debug] [--resume [PATH]] [--cfg] [key=value ...]
    ajet eval --conf my.yaml [--model PATH] [key=value ...]
    ajet serve --model M [--host 127.0.0.1] [--port 8000] [--max-tokens 512] ...
    ajet export --checkpoint PATH --out DIR [--merge]

This module only parses arguments, loads the config and calls the command's function; the work
lives in `ajet.backbone`, `ajet.evaluate`, `ajet.serve` and `ajet.trainer.export`, imported only
when their command runs, so `--help` and `--cfg` stay fast (no torch). Every `AjetError` is printed
as one red paragraph without a traceback and exits with its `exit_code` (2); Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ajet.errors import AjetError

COMMANDS = ("train", "eval", "serve", "export")
_OVERRIDES_HELP = (
    "config overrides in Hydra's grammar, after the YAML: trainer.steps=3 (the ajet. prefix is "
    "optional), +workflow_args.x=1 adds a key, ~key deletes one, 'algorithm=[sft,grpo]' sets a list"
)
_EPILOG = """\
commands:
  ajet [train] --conf X.yaml ...   train with the backbone (the default command)
  ajet eval --conf X.yaml ...      run the val split and report rewards
  ajet serve --model M ...         serve a model with an OpenAI-compatible API
  ajet export --checkpoint P ...   export a checkpoint as a LoRA adapter or a merged model

Run `ajet COMMAND --help` for a command's options; every config key is listed in
docs/configuration.md (or `ajet --help-config`).
"""


def main(argv: list[str] | None = None) -> int:
    """Run the `ajet` command line with `argv` (default: sys.argv[1:]); return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        command = args[0] if args and args[0] in COMMANDS else "train"
        if args and args[0] in COMMANDS:
            args = args[1:]
        return _HANDLERS[command](args)
    except AjetError as exc:
        _print_error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _print_error("interrupted")
        return 130
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


def _print_error(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    # soft_wrap: long key paths and file names stay on one line, whatever the terminal width.
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(Text("error: ", style="bold red") + Text(message, style="red"))


def _parser(command: str, description: str) -> argparse.ArgumentParser:
    prog = "ajet" if command == "train" else f"ajet {command}"
    return argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EPILOG if command == "train" else None,
    )


def _add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", metavar="YAML", help="your config file (only the keys it changes, under 'ajet:')")
    parser.add_argument("--cfg", action="store_true", help="print the resolved config as YAML and exit")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=_OVERRIDES_HELP)


def _train(argv: list[str]) -> int:
    from ajet.config.loader import available_backbones

    parser = _parser("train", "Tune the model behind an agent: roll out the workflow, score it, train.")
    _add_config_arguments(parser)
    parser.add_argument("--backbone", choices=available_backbones(),
                        help="what runs training (default: debug, in this process)")
    parser.add_argument("--resume", nargs="?", const=True, default=False, metavar="PATH",
                        help="continue a run: the latest checkpoint in output_dir, or the checkpoint PATH")
    parser.add_argument("--help-config", action="store_true", help="print every config key and exit")
    args = parser.parse_intermixed_args(argv)
    if args.help_config:
        from ajet.config.reference import render

        sys.stdout.write(render())
        return 0
    resume = args.resume
    if isinstance(resume, str) and "=" in resume and not Path(resume).exists():
        args.overrides.insert(0, resume)  # `--resume key=value`: a bare --resume, then an override
        resume = True
    if args.conf is None and not args.overrides:
        parser.print_usage(sys.stderr)
        _print_error("no config given; run `ajet --conf my.yaml` (see `ajet --help`)")
        return 2
    cfg = _load(args, backbone=args.backbone)
    if cfg is None:
        return 0
    if isinstance(resume, str):
        resume = str(Path(resume).resolve())
    from ajet.backbone.registry import run_backbone

    return _exit_code(run_backbone(cfg, resume=resume))


def _eval(argv: list[str]) -> int:
    parser = _parser("eval", "Run the workflow on the val split and report rewards, success and merge stats.")
    _add_config_arguments(parser)
    parser.add_argument("--model", metavar="PATH",
                        help="model or checkpoint to evaluate instead of ajet.model.path")
    args = parser.parse_intermixed_args(argv)
    cfg = _load(args)
    if cfg is None:
        return 0
    from ajet.evaluate import run_eval

    return _exit_code(run_eval(cfg, model=args.model))


def _serve(argv: list[str]) -> int:
    from ajet.config.schema import EngineConfig, GatewayConfig, ModelConfig
    from ajet.gateway.request import BODY_TIMEOUT_S, SERVE_MAX_TOKENS

    parser = _parser("serve", "Serve a model with the hf engine behind an OpenAI-compatible API "
                              "(chat completions, and completions with token ids for the remote engine).")
    parser.add_argument("--model", required=True, help="'smollm2-135m-instruct', 'tiny-random', a folder or a hub id")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    parser.add_argument("--served-model-name", metavar="NAME", help="name in /v1/models and responses "
                        "(default: the --model value)")
    parser.add_argument("--chat-template", metavar="T", help="Jinja chat template, inline or a .jinja file")
    parser.add_argument("--device", default="auto", choices=ModelConfig.model_fields["device"].annotation.__args__,
                        help="default: %(default)s (CUDA when available)")
    parser.add_argument("--dtype", default="auto", choices=ModelConfig.model_fields["dtype"].annotation.__args__,
                        help="default: %(default)s (bfloat16 on CUDA, float32 on CPU)")
    parser.add_argument("--max-batch-size", type=int, metavar="N",
                        default=EngineConfig.model_fields["max_batch_size"].default,
                        help="most requests decoded together (default: %(default)s)")
    parser.add_argument("--max-tokens", type=int, metavar="N", default=SERVE_MAX_TOKENS,
                        help="max_tokens of a chat request that sets none (default: %(default)s; "
                             "completions default to 16, like vLLM)")
    parser.add_argument("--max-request-bytes", type=int, metavar="N",
                        default=GatewayConfig.model_fields["max_request_bytes"].default,
                        help="larger request bodies get HTTP 413 (default: %(default)s)")
    parser.add_argument("--body-timeout", type=float, metavar="S", default=BODY_TIMEOUT_S,
                        help="seconds a request body may take to arrive before HTTP 408 (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=EngineConfig.model_fields["seed"].default,
                        help="seed of requests that set none (default: %(default)s)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
                        help="uvicorn's log level (default: %(default)s)")
    args = parser.parse_args(argv)
    for flag, value in (("--max-batch-size", args.max_batch_size), ("--max-tokens", args.max_tokens),
                        ("--max-request-bytes", args.max_request_bytes), ("--body-timeout", args.body_timeout)):
        if not value > 0:
            parser.error(f"{flag} must be > 0, got {value}")
    from ajet.serve import main as serve_main

    return _exit_code(serve_main(
        model=args.model, host=args.host, port=args.port, chat_template=args.chat_template,
        max_batch_size=args.max_batch_size, device=args.device, dtype=args.dtype,
        served_model_name=args.served_model_name, default_max_tokens=args.max_tokens,
        max_request_bytes=args.max_request_bytes, body_timeout_s=args.body_timeout, seed=args.seed,
        log_level=args.log_level))


def _export(argv: list[str]) -> int:
    parser = _parser("export", "Export a training checkpoint as a LoRA adapter, or as a merged model in "
                               "Hugging Face format that transformers, vLLM and `ajet serve` load.")
    parser.add_argument("--checkpoint", required=True, metavar="PATH", help="checkpoint folder of a run")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write")
    parser.add_argument("--merge", action="store_true", help="merge the adapter into the base weights")
    args = parser.parse_args(argv)
    from ajet.trainer.export import export_checkpoint

    return _exit_code(export_checkpoint(checkpoint=args.checkpoint, out=args.out, merge=args.merge))


def _load(args: argparse.Namespace, backbone: str | None = None) -> Any:
    """Load and validate the config; with --cfg print it and return None."""
    from ajet.config.loader import config_to_yaml, load_config

    cfg = load_config(args.conf, args.overrides, backbone=backbone)
    if args.cfg:
        sys.stdout.write(config_to_yaml(cfg))
        return None
    return cfg


def _exit_code(result: Any) -> int:
    """Commands may return an exit code; anything else (None, a result object) means success."""
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


_HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "train": _train, "eval": _eval, "serve": _serve, "export": _export,
}


if __name__ == "__main__":
    sys.exit(main())
