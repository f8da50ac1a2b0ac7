"""Tool retrieval over 1,000 near-duplicate tools: recall@1/@8 of BM25 and the trained retriever.

    python benchmarks/tool_retrieval.py [--train-per-tool 3] [--epochs 10] [--full] [--out DIR]

The tool set and the queries come from ajet/retrieval/synthetic.py (deterministic): 10 commodities x
10 measures x 10 scopes (get_gas_price_city, get_gas_price_state, get_electricity_price_city, ...).
The retriever trains on the training queries (InfoNCE, in-batch + BM25 hard negatives; by default a
linear head over the frozen packaged MiniLM) and both retrievers are scored on held-out queries, whose
sentence frames and places never appear in training. Last line:

    recall_at_8=<trained> bm25_recall_at_8=<bm25>

With `--agent`, also the agent's success with retrieval against the same agent given the right tools:
SmolLM2 is trained (SFT, `ajet --backbone=debug`) on demonstrations of training queries, each seeing
the trained retriever's top 8 with the right tool among them, then `ajet eval` runs it twice on
held-out queries against the real 1,000-tool MCP server (ajet/retrieval/server.py): with
`tool_retrieval: {top_k: 8}` as a user runs it, and with `include_reference: true`, where the right
tool always takes the place of the retriever's last pick. Both offer 8 near-duplicates, so the gap is
what retrieval misses cost the agent. Last line then:

    recall_at_8=<trained> bm25_recall_at_8=<bm25> agent_success_retrieved=<x> agent_success_right_tools=<y>
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ajet.retrieval.bm25 import BM25Retriever  # noqa: E402
from ajet.retrieval.synthetic import build_queries, build_tools, recall  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-per-tool", type=int, default=3)
    parser.add_argument("--heldout-per-tool", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--full", action="store_true", help="fine-tune the encoder too (slow on a CPU)")
    parser.add_argument("--base", default="minilm", help="encoder: minilm (packaged) | folder | model preset")
    parser.add_argument("--out", type=Path, help="keep the trained retriever (and with --agent, the agent's "
                        "run) here")
    parser.add_argument("--agent", action="store_true", help="also train SmolLM2 and compare agent success")
    parser.add_argument("--agent-demos", type=int, default=96, help="SFT demonstrations (default: %(default)s)")
    parser.add_argument("--agent-val", type=int, default=60, help="held-out tasks evaluated (default: %(default)s)")
    parser.add_argument("overrides", nargs="*", help="key=value for the agent's ajet commands")
    args = parser.parse_args()
    from ajet.retrieval.embedding import EmbeddingRetriever

    tools = build_tools()
    train, heldout = build_queries(tools, args.train_per_tool, args.heldout_per_tool)
    print(f"{len(tools)} tools, {len(train)} training queries, {len(heldout)} held-out queries")
    bm25 = BM25Retriever()
    bm25.index(tools)
    bm25_r = {k: recall(bm25, heldout, k) for k in (1, 8)}
    print(f"bm25:      recall@1={bm25_r[1]:.3f} recall@8={bm25_r[8]:.3f}")

    model = EmbeddingRetriever.from_base(args.base)
    model.index(tools)
    print(f"untrained: recall@1={recall(model, heldout, 1):.3f} recall@8={recall(model, heldout, 8):.3f}")
    pairs = [(r["query"], r["answer"]["calls"][0]["name"]) for r in train]
    report = model.train(pairs, tools, epochs=args.epochs, full=args.full, log=print)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:  # score the saved folder: what the agent loads
        root = args.out or Path(tmp)
        folder = root / "retriever"
        model.save(folder)
        trained = EmbeddingRetriever.load(folder)
        trained.index(tools)
        r = {k: recall(trained, heldout, k) for k in (1, 8)}
        print(f"trained:   recall@1={r[1]:.3f} recall@8={r[8]:.3f} (training {report['seconds']:.0f} s, "
              f"scoring {time.monotonic() - started:.0f} s)")
        line = f"recall_at_8={r[8]:.3f} bm25_recall_at_8={bm25_r[8]:.3f}"
        if args.agent:
            from tool_retrieval_agent import compare_agents

            got = compare_agents(root, tools, train, heldout, trained, args.agent_demos, args.agent_val, args.overrides)
            line += f" agent_success_retrieved={got['retrieved']:.3f} agent_success_right_tools={got['right_tools']:.3f}"
    print(line)


if __name__ == "__main__":
    main()
