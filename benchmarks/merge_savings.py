"""How much the context tracker's merging saves on tool-agent episodes.

By default it records episodes of the tutorial's EnergyAgent on every train and val task, with the
replay engine playing each task's expected tool calls and a final answer (so every episode makes
2-3 LLM calls through the real gateway and the real MCP server), then merges the recorded calls with
`tracker.merge=off` and `token`. With `--episodes runs/.../episodes.jsonl` it re-merges the calls of
a real run instead.

    python benchmarks/merge_savings.py [--episodes PATH]
Last line: `merge_token_ratio=<tokens with merging / tokens without>`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from ajet.config.loader import load_config
from ajet.engine.factory import build_engine
from ajet.rollout.stack import RolloutStack, load_tokenizer, settings_for
from ajet.task_reader import read_tasks
from ajet.tracker.merge import MergeStats, merge_calls
from ajet.tracker.timeline import LLMCall, Segment

TUTORIAL = Path(__file__).resolve().parents[1] / "tutorial" / "example_tool_agent"


async def record_episodes() -> list[list[LLMCall]]:
    rows = [json.loads(line) for name in ("train.jsonl", "val.jsonl")
            for line in (TUTORIAL / name).read_text().splitlines()]
    script = []
    for row in rows:
        for call in row["answer"]["calls"]:
            script.append({"text": f"<tool_call>\n{json.dumps({'name': call['name'], 'arguments': call['arguments']})}"
                                   "\n</tool_call>"})
        script.append({"text": f"The answer is {row['answer']['final']}."})
    with tempfile.TemporaryDirectory() as tmp:
        tasks_file, script_file = Path(tmp) / "tasks.jsonl", Path(tmp) / "script.json"
        tasks_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
        script_file.write_text(json.dumps(script))
        cfg = load_config(TUTORIAL / "tool_agent.yaml", [
            "model.path=tiny-random", "engine.type=replay", f"engine.replay_file={script_file}",
            f"task_reader.val={tasks_file}", "rollout.concurrency=1", f"output_dir={tmp}"])
        tokenizer = load_tokenizer(cfg)
        tasks = read_tasks(cfg.task_reader, "val", cfg.base_dir).tasks
        async with RolloutStack(cfg, build_engine(cfg, tokenizer), tokenizer, None) as stack:
            batch = await stack.runner.run(tasks, settings_for(cfg, "val"), show_progress=False)
    failed = [e.error for e in batch.episodes if e.error]
    assert not failed, failed[:3]
    return [e.calls for e in batch.episodes]


def load_episodes(path: Path) -> list[list[LLMCall]]:
    """Calls of a recorded run (prompt ids as one prompt segment: enough for token merging)."""
    episodes = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        episodes.append([LLMCall(index=c["index"], agent=c["agent"], trained=c["trained"],
                                 prompt_segments=[Segment("prompt", c["prompt_ids"])],
                                 completion_ids=c["completion_ids"], completion_logprobs=c["logprobs"],
                                 finish_reason=c["finish_reason"], tools_key="") for c in row["llm_calls"]])
    return episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=Path, help="episodes.jsonl of a real run")
    args = parser.parse_args()
    episodes = load_episodes(args.episodes) if args.episodes else asyncio.run(record_episodes())
    totals = {}
    for mode in ("off", "token"):
        stats = MergeStats()
        for calls in episodes:
            stats.add(merge_calls(calls, mode)[1])
        totals[mode] = stats
        print(f"merge={mode:<5} episodes {len(episodes)} · LLM calls {stats.llm_calls} · samples {stats.samples} · "
              f"tokens {stats.tokens_after} · trained tokens {stats.trained_tokens} · forks {dict(stats.forks)}")
    off, on = totals["off"], totals["token"]
    print(f"samples per episode: {off.samples / len(episodes):.2f} → {on.samples / len(episodes):.2f}; "
          f"trained tokens kept: {on.trained_tokens} of {off.trained_tokens}")
    print(f"merge_token_ratio={on.tokens_after / off.tokens_after:.4f}")


if __name__ == "__main__":
    main()
