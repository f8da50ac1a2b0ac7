"""Constrained decoding on CPU: llguidance (ajet's choice, through `ajet.engine.guided`) against
xgrammar and outlines-core, on the tool-call grammar of the energy tutorial's 8 tools
(`tool_choice: "required"`) with SmolLM2's 49,152-token vocabulary.

    python benchmarks/guided_decoding.py [--walks 5]
    # the peers are optional: pip install --no-deps xgrammar apache-tvm-ffi outlines-core

For each library: the one-off tokenizer import, the grammar compile, and the per-token cost of
computing the mask and applying it to a (V,) float32 logits row, measured while walking a valid
two-argument call token by token (median over walks after the first). torch runs on one thread,
as the masking does inside the engine's step. The last line is the ratio against xgrammar.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ajet.engine.guided import build_matcher  # noqa: E402
from ajet.gateway.constraints import guided_decoding  # noqa: E402
from ajet.models import resolve_model_path  # noqa: E402
from ajet.mcp_client import server_tools  # noqa: E402

TARGET = '<tool_call>\n{"name": "convert_price", "arguments": {"price": 3.2, "from_unit": "MMBtu", "to_unit": "Mcf"}}\n</tool_call>'


def walk(step, ids: list[int], vocab: int) -> list[float]:
    """Seconds per token of `step(row, token)` (mask, apply, check, accept) along `ids`."""
    times = []
    logits = torch.randn(vocab)
    for token in ids:
        row = logits.clone()
        started = time.perf_counter()
        step(row, token)
        times.append(time.perf_counter() - started)
    return times


def bench_llguidance(spec, tokenizer, vocab, ids):
    started = time.perf_counter()
    build_matcher(spec, tokenizer, vocab)  # first call: tokenizer import + compile
    first = time.perf_counter() - started
    started = time.perf_counter()
    from ajet.engine.guided import to_grammar
    import llguidance

    llguidance.LLMatcher.validate_grammar(to_grammar(spec), None)
    compile_s = time.perf_counter() - started

    def one():
        matcher = build_matcher(spec, tokenizer, vocab)

        def step(row, token):
            matcher.mask_logits(row)
            assert row[token] > float("-inf")
            matcher.accept(token)
        return walk(step, ids, vocab)
    return first - compile_s, compile_s, one


def bench_xgrammar(spec, tokenizer, vocab, ids):
    import xgrammar as xgr

    started = time.perf_counter()
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab, stop_token_ids=[tokenizer.eos_token_id])
    tokenizer_s = time.perf_counter() - started
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    tags = [{"type": "tag", "begin": t["begin"], "content": {"type": "json_schema", "json_schema": t["schema"]},
             "end": t["end"]} for t in spec.value["tags"]]
    structural = {"type": "structural_tag", "format": {"type": "tags_with_separator", "separator": "\n",
                                                        "at_least_one": True, "tags": tags}}
    started = time.perf_counter()
    compiled = compiler.compile_structural_tag(structural)
    compile_s = time.perf_counter() - started

    def one():
        matcher = xgr.GrammarMatcher(compiled)
        bitmask = xgr.allocate_token_bitmask(1, vocab)

        def step(row, token):
            matcher.fill_next_token_bitmask(bitmask)
            xgr.apply_token_bitmask_inplace(row[None], bitmask)
            assert row[token] > float("-inf")
            matcher.accept_token(token)
        return walk(step, ids, vocab)
    return tokenizer_s, compile_s, one


def bench_outlines(spec, tokenizer, vocab, ids):
    from outlines_core import Index, Vocabulary
    from outlines_core.json_schema import build_regex_from_schema

    started = time.perf_counter()
    byte_of = _byte_decoder()
    tokens: dict[bytes, list[int]] = {}
    for text, i in tokenizer.get_vocab().items():
        if i != tokenizer.eos_token_id:
            tokens.setdefault(bytes(byte_of.get(c, ord("?")) for c in text), []).append(i)
    vocabulary = Vocabulary(tokenizer.eos_token_id, tokens)
    tokenizer_s = time.perf_counter() - started
    call = "(" + "|".join(re.escape(t["begin"]) + "(" + build_regex_from_schema(json.dumps(t["schema"]), r"[ ]?") + ")"
                          + re.escape(t["end"]) for t in spec.value["tags"]) + ")"
    started = time.perf_counter()
    index = Index(call + "(\\n" + call + ")*", vocabulary)
    compile_s = time.perf_counter() - started

    def one():
        state = index.get_initial_state()

        def step(row, token):
            nonlocal state
            allowed = torch.tensor(index.get_allowed_tokens(state))
            mask = torch.full_like(row, float("-inf"))
            mask[allowed] = 0
            row += mask
            assert row[token] > float("-inf")
            if token != tokenizer.eos_token_id:
                state = index.get_next_state(state, token)
        return walk(step, ids, vocab)
    return tokenizer_s, compile_s, one


def _byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level BPE: the printable character standing for each byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walks", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct"))
    vocab = 49152
    tools = asyncio.run(server_tools("tutorial/example_tool_agent/energy_server.py", ROOT))
    spec = guided_decoding(tools, "required")
    ids = tokenizer(TARGET, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    results = {}
    for name, bench in (("llguidance", bench_llguidance), ("xgrammar", bench_xgrammar), ("outlines-core", bench_outlines)):
        try:
            tokenizer_s, compile_s, one = bench(spec, tokenizer, vocab, ids)
        except ImportError:
            print(f"{name:14s} not installed (pip install --no-deps {name.replace('-', '_')}), skipped")
            continue
        walks = [one() for _ in range(args.walks + 1)][1:]
        per_token = [statistics.median(w[i] for w in walks) for i in range(len(ids))]
        results[name] = (compile_s, statistics.mean(per_token))
        print(f"{name:14s} tokenizer {tokenizer_s * 1e3:7.1f} ms  compile {compile_s * 1e3:8.1f} ms  "
              f"mask+apply per token: mean {statistics.mean(per_token) * 1e3:.3f} ms, "
              f"median {statistics.median(per_token) * 1e3:.3f} ms, max {max(per_token) * 1e3:.3f} ms")
    ours = results["llguidance"]
    peer = results.get("xgrammar")
    if peer is None:
        print(f"llguidance: compile {ours[0] * 1e3:.1f} ms, mask {ours[1] * 1e3:.3f} ms/token (no peer installed)")
        return
    print(f"llguidance vs xgrammar: compile {ours[0] * 1e3:.1f} vs {peer[0] * 1e3:.1f} ms ({peer[0] / ours[0]:.1f}x faster), "
          f"mask+apply {ours[1] * 1e3:.3f} vs {peer[1] * 1e3:.3f} ms/token ({peer[1] / ours[1]:.2f}x faster)")


if __name__ == "__main__":
    main()
