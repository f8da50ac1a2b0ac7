"""`--with-ray` against in-process, on the tool-agent tutorial with the tiny model: the same episodes
(tasks, seeds, every call's tokens, rewards, errors) and the same merged samples, for an eval and for
2 GRPO steps. Each `--with-ray` run starts its own private Ray (2 CPUs, no dashboard, a small object
store) and stops it when done."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ajet import Judge, Reward

ROOT = Path(__file__).resolve().parents[2]
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
SMALL = ["model=tiny-random", "rollout.max_tokens_per_turn=16", "ray.num_workers=2"]
VOLATILE = {"episode_id", "seconds", "counters"}  # a fresh id per run; wall times
LOGPROB_TOL = 1e-4  # the engine batches episodes' calls differently: float sums differ in the last bits


class AnswerLengthJudge(Judge):
    """Rewards that differ within a group (the tutorial's judge gives the untrained tiny model 0 everywhere),
    so step 1 really updates the weights and step 2 samples from the updated model."""

    async def score(self, task, output) -> Reward:
        return Reward(total=len(str(output.answer or "")) % 10 / 10)


def _ajet(args: list[str], out: Path, with_ray: bool) -> None:
    flag = ["--with-ray"] if with_ray else []
    proc = subprocess.run([sys.executable, "-m", "ajet.cli", *args[:1], *flag, "--conf", str(TOOL_YAML), *args[1:],
                           *SMALL, f"output_dir={out}"], capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def _episodes(path: Path, tolerant: bool = False) -> dict[tuple, dict]:
    rows = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        for call in row["llm_calls"]:
            call.pop("seconds")
            if tolerant:
                call["logprobs"] = pytest.approx(call["logprobs"], abs=LOGPROB_TOL)
        rows[(row.get("step"), row["task"]["task_id"], row["repeat"])] = {
            k: v for k, v in row.items() if k not in VOLATILE}
    return rows


def _same_episodes(a: Path, b: Path) -> int:
    here, there = _episodes(a, tolerant=True), _episodes(b)
    assert here.keys() == there.keys()
    for key in here:
        assert there[key] == here[key], key
    return sum(len(r["llm_calls"]) for r in here.values())


def test_eval_with_ray_reads_the_same_as_in_process(tmp_path: Path) -> None:
    args = ["eval", "eval.limit=4", "eval.group_size=2", "rollout.val_temperature=1.0"]
    _ajet(args, tmp_path / "here", with_ray=False)
    _ajet(args, tmp_path / "ray", with_ray=True)
    assert _same_episodes(tmp_path / "here" / "eval_episodes.jsonl", tmp_path / "ray" / "eval_episodes.jsonl") >= 8
    here, there = (json.loads((tmp_path / d / "eval.json").read_text()) for d in ("here", "ray"))
    for key in ("episodes", "failed", "reward_mean", "success_rate", "generated_tokens", "merge", "pass@2"):
        assert there[key] == here[key], key


def test_two_grpo_steps_with_ray_read_the_same_as_in_process(tmp_path: Path) -> None:
    args = ["train", "algorithm=grpo", "trainer.steps=2", "rollout.batch_tasks=2", "rollout.group_size=2",
            "trainer.save_every=0", "trainer.eval_every=0", "trainer.lr=1e-2",
            f"judge.type={Path(__file__).resolve()}:AnswerLengthJudge", "judge.args={}"]
    _ajet(args, tmp_path / "here", with_ray=False)
    _ajet(args, tmp_path / "ray", with_ray=True)
    assert _same_episodes(tmp_path / "here" / "episodes.jsonl", tmp_path / "ray" / "episodes.jsonl") >= 8
    here, there = ([json.loads(line) for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
                   for d in ("here", "ray"))
    assert [r["step"] for r in there] == [1, 2]
    assert not here[0].get("skipped_update") and here[0]["reward_std"] > 0  # step 1 trained: step 2 differs
    for a, b in zip(here, there):  # the same samples trained on: the same rewards, losses, gradients
        for key in ("episodes", "failed", "reward_mean", "reward_std", "loss", "grad_norm"):
            if key in a:
                assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key
