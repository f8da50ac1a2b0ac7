"""samples.jsonl: the token-level record of what an RL step trained on, for `ajet view`.

episodes.jsonl keeps each LLM call's ids and logprobs, but not the merged samples the trainer saw
(a multi-turn sample masks earlier generations in too) nor their advantages. One line per sample:

    {"step", "episode_id", "group_id", "task_id", "agent", "index" (nth sample of its episode),
     "fork_reason", "calls", "reward", "advantage", "trained" (false: its group had no signal),
     "input_ids", "loss_mask", "old_logprobs" (null where the engine gave none)}

Appended once per step, after the advantages and before the update, so it matches episodes.jsonl.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from ajet.samples import Sample

SAMPLES_FILE = "samples.jsonl"


def _finite(value: float) -> float | None:
    # text-mode merges leave NaN logprobs; NaN is not JSON, a browser cannot read it
    return value if math.isfinite(value) else None


def write_samples(run_dir: Path, step: int, samples: Sequence[Sample], advantages: Sequence[float],
                  trained: Sequence[int]) -> None:
    """Append one line per sample; `trained` are the indices the update used."""
    used = set(trained)
    seen: dict[str, int] = {}
    lines = []
    for i, (sample, advantage) in enumerate(zip(samples, advantages)):
        index = seen.get(sample.episode_id, 0)
        seen[sample.episode_id] = index + 1
        row = {
            "step": step, "episode_id": sample.episode_id, "group_id": sample.group_id, "task_id": sample.task_id,
            "agent": sample.agent, "index": index, "fork_reason": sample.fork_reason,
            "calls": sample.meta.get("calls"), "reward": sample.reward, "advantage": _finite(float(advantage)),
            "trained": i in used, "input_ids": list(sample.input_ids), "loss_mask": list(sample.loss_mask),
            "old_logprobs": [_finite(float(lp)) for lp in sample.old_logprobs],
        }
        lines.append(json.dumps(row, ensure_ascii=True) + "\n")
    path = run_dir / SAMPLES_FILE
    with path.open("a+b") as handle:
        handle.seek(0, 2)
        if handle.tell():
            handle.seek(-1, 2)
            if handle.read(1) != b"\n":  # a kill cut the last line short: keep ours off it
                lines.insert(0, "\n")
        handle.write("".join(lines).encode("utf-8"))
