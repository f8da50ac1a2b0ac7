"""The debug backbone end to end on the tiny model: stages, checkpoints, kill -9 and resume, DPO, export."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ajet.backbone.registry import run_backbone as run
from ajet.config.loader import load_config

ROOT = Path(__file__).resolve().parents[2]
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
FAST = ["model.path=tiny-random", "rollout.max_tokens_per_turn=12", "rollout.max_turns=2",
        "rollout.group_size=2", "rollout.batch_tasks=2", "sft.batch_size=4", "eval.limit=2"]


def adapter(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(run_dir / "checkpoints" / f"step-{step:06d}" / "adapter" / "adapter_model.safetensors")


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_sft_then_grpo_trains_and_checkpoints(tmp_path):
    # a fixed gateway port: validation inside training must not try to bind it a second time
    cfg = load_config(TOOL_YAML, FAST + [f"output_dir={tmp_path}", "sft.epochs=0.1", "trainer.steps=2",
                                         "trainer.save_every=1", "trainer.eval_every=2",
                                         f"gateway.port={_free_port()}"])
    result = run(cfg)
    rows = metrics(tmp_path)
    assert [(r["step"], r["stage"]) for r in rows] == [(1, "sft"), (2, "sft"), (3, "grpo"), (4, "grpo")]
    assert rows[0]["loss"] > 0 and "reward_mean" in rows[2] and "val_success_rate" in rows[3]
    assert result["steps"] == 4
    first, last = adapter(tmp_path, 1), adapter(tmp_path, 4)
    lora_b = [k for k in first if "lora_B" in k]
    assert lora_b and all(first[k].abs().sum() > 0 for k in lora_b)  # B starts at zero: SFT moved it
    assert (tmp_path / "curves.png").stat().st_size > 1000
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert {e["step"] for e in episodes} == {3, 4} and len(episodes) == 8
    assert (tmp_path / "val_episodes.jsonl").is_file() and (tmp_path / "config.yaml").is_file()
    assert any(not torch.equal(first[k], last[k]) for k in first)


def test_refuses_to_overwrite_a_run_without_resume(tmp_path):
    from ajet.errors import CheckpointError

    overrides = FAST + [f"output_dir={tmp_path}", "algorithm=sft", "sft.epochs=0.1"]
    run(load_config(TOOL_YAML, overrides))
    with pytest.raises(CheckpointError, match="--resume"):
        run(load_config(TOOL_YAML, overrides))


def test_sft_neftune_alpha_reaches_the_sft_updates(tmp_path):
    """The same first SFT step with and without NEFTune: same data and seed, so only the noise differs."""
    losses = {}
    for alpha in (0, 500):
        cfg = load_config(TOOL_YAML, FAST + [f"output_dir={tmp_path / str(alpha)}", "algorithm=sft", "sft.epochs=0.1",
                                             f"sft.neftune_alpha={alpha}"])
        run(cfg)
        losses[alpha] = metrics(tmp_path / str(alpha))[0]["loss"]
    assert losses[0] > 0 and losses[500] != pytest.approx(losses[0], rel=1e-4)


def _ajet(args: list[str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ajet.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)


def test_kill_9_then_resume_equals_an_uninterrupted_run(tmp_path):
    steps = ["algorithm=sft", "sft.epochs=2", "sft.batch_size=8", "trainer.save_every=1", "trainer.seed=7"]
    base = ["--conf", str(TOOL_YAML), *FAST, *steps]
    straight = tmp_path / "straight"
    proc = _ajet([*base, f"output_dir={straight}"])
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    total = max(r["step"] for r in metrics(straight))
    assert total >= 8

    killed = tmp_path / "killed"
    proc = _ajet([*base, f"output_dir={killed}"])
    deadline = time.time() + 300
    while not (killed / "checkpoints" / "step-000002").exists() and time.time() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    done = max(int(p.name.split("-")[1]) for p in (killed / "checkpoints").glob("step-*"))
    assert done < total, "the run finished before it could be killed"
    # what a crash mid-save leaves: a temp folder and a folder without its COMPLETE marker
    (killed / "checkpoints" / f".tmp-step-{done + 1:06d}-x").mkdir()
    partial = killed / "checkpoints" / f"step-{done + 1:06d}"
    partial.mkdir()
    (partial / "state.json").write_text("{}")

    proc = _ajet([*base, f"output_dir={killed}", "--resume"])
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert f"resumed from {killed / 'checkpoints' / f'step-{done:06d}'}" in out.replace("\n", "")
    assert [r["step"] for r in metrics(killed)] == list(range(1, total + 1))
    a, b = adapter(straight, total), adapter(killed, total)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6)
    opt_a = torch.load(straight / "checkpoints" / f"step-{total:06d}" / "optimizer.pt", weights_only=True)
    opt_b = torch.load(killed / "checkpoints" / f"step-{total:06d}" / "optimizer.pt", weights_only=True)
    for key, state in opt_a["state"].items():
        assert state["step"] == opt_b["state"][key]["step"]
        torch.testing.assert_close(state["exp_avg"], opt_b["state"][key]["exp_avg"], rtol=0, atol=1e-6)


def test_offline_dpo(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"prompt": f"What is {i}+{i}?", "chosen": f"It is {2 * i}.", "rejected": "I don't know."} for i in range(6)]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = load_config(TOOL_YAML, FAST + [f"output_dir={tmp_path / 'off'}", "algorithm=dpo", f"dpo.data={pairs}",
                                         "dpo.batch_size=3", "dpo.epochs=1", "dpo.lr=1e-3"])
    run(cfg)
    rows_off = metrics(tmp_path / "off")
    assert len(rows_off) == 2 and all("reward_margin" in r for r in rows_off)
    assert rows_off[-1]["reward_margin"] > 0  # after one update the chosen answers are preferred


ONLINE_YAML = """
defaults:
  - workflow: chat
ajet:
  model: {path: tiny-random}
  task_reader: {type: jsonl, train: train.jsonl}
  judge: {type: judge.py:LengthJudge}
  algorithm: dpo
  rollout: {group_size: 4, batch_tasks: 2, max_tokens_per_turn: 8}
  trainer: {steps: 1}
  dpo: {lr: 1.0e-3}
"""
LENGTH_JUDGE = """
from ajet import Judge


class LengthJudge(Judge):
    async def score(self, task, output):
        return len(output.answer or "") / 10  # the tiny model's random replies differ in length
"""


def test_online_dpo_pairs_the_rollouts_and_updates_the_weights(tmp_path):
    (tmp_path / "run.yaml").write_text(ONLINE_YAML)
    (tmp_path / "judge.py").write_text(LENGTH_JUDGE)
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"query": f"Tell me about {w}."}) + "\n"
                                                  for w in ("gas", "wind")))
    run(load_config(tmp_path / "run.yaml", [f"output_dir={tmp_path / 'on'}"]))
    [row] = metrics(tmp_path / "on")
    assert row["pairs"] == 2 and row["updates"] == 1 and "skipped_update" not in row  # one pair per group
    assert row["reward_std"] > 0 and "reward_margin" in row
    lora_b = {k: v for k, v in adapter(tmp_path / "on", 1).items() if "lora_B" in k}
    assert lora_b and all(v.abs().sum() > 0 for v in lora_b.values())  # B starts at zero: the update moved it


def test_export_merge_loads_with_transformers_and_ajet_serves_it(tmp_path):
    from transformers import AutoModelForCausalLM

    cfg = load_config(TOOL_YAML, FAST + [f"output_dir={tmp_path / 'run'}", "algorithm=sft", "sft.epochs=0.1"])
    run(cfg)
    ckpt = next((tmp_path / "run" / "checkpoints").glob("step-*"))
    for merge in (False, True):
        out = tmp_path / f"export-{merge}"
        proc = _ajet(["export", "--checkpoint", str(ckpt), "--out", str(out), *(["--merge"] if merge else [])])
        log, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, log
    assert (tmp_path / "export-False" / "adapter_config.json").is_file()
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "export-True")
    assert model.config.num_hidden_layers == 2
    assert (tmp_path / "export-True" / "tokenizer.json").is_file()


def _default_signals() -> None:
    """In the child: SIGINT and SIGTERM at their defaults, whatever the test runner inherited (a
    background job's shell starts it with SIGINT ignored, and Python keeps that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture()
def cpu_load():
    """A busy loop on every core, as in a full test run on a loaded machine."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    yield
    for burner in burners:
        burner.kill()
        burner.wait()


def _reached(out: Path, pid: int, moment: str) -> bool:
    if moment == "loading":  # the run holds its folder: handlers are installed, the model is loading
        lock = out / ".ajet.lock"
        return lock.is_file() and f'"pid": {pid}' in lock.read_text()
    if moment == "rollout":
        return (out / "episodes.jsonl").is_file()
    return (out / "metrics.jsonl").is_file()  # training: a step is done, the next ones train and save


def test_sigterm_and_sigint_stop_a_training_run(tmp_path, cpu_load):
    """A stopped run never reports success: SIGINT exits 130, SIGTERM 143, whether the signal lands while
    the model loads, during a rollout or while steps train and checkpoint, on a machine whose every
    core is busy (the runs themselves, side by side, and a busy loop per core). The in-process gateway
    must not swallow the signals either."""
    runs = {}
    for moment in ("loading", "rollout", "training"):
        for sig in (signal.SIGTERM, signal.SIGINT):
            out = tmp_path / f"{moment}-{sig.name}"
            proc = _ajet(["--conf", str(TOOL_YAML), *FAST, "algorithm=grpo", "trainer.steps=200",
                          "trainer.save_every=1", f"output_dir={out}"], preexec_fn=_default_signals)
            runs[(moment, sig)] = (proc, out)
    waiting = dict(runs)
    deadline = time.time() + 480
    while waiting:  # each run gets its signal the moment it reaches its stage: no fixed sleeps
        for (moment, sig), (proc, out) in list(waiting.items()):
            assert proc.poll() is None, (moment, sig.name, proc.communicate()[0][-3000:])
            if _reached(out, proc.pid, moment):
                os.kill(proc.pid, sig)
                del waiting[(moment, sig)]
        assert time.time() < deadline, f"runs did not reach their stage in time: {list(waiting)}"
        time.sleep(0.02)
    for (moment, sig), (proc, out) in runs.items():
        try:
            log, _ = proc.communicate(timeout=max(deadline + 120 - time.time(), 30))
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"{sig.name} during {moment} did not stop the run")
        assert proc.returncode == 128 + sig, (moment, sig.name, proc.returncode, log[-3000:])
        assert f"stopped by {sig.name}" in log, (moment, sig.name, log[-3000:])
        assert "Traceback" not in log, log[-3000:]
        steps = [r["step"] for r in metrics(out)] if (out / "metrics.jsonl").is_file() else []
        assert steps == list(range(1, len(steps) + 1)) and len(steps) < 200


def _two_turn_config(tmp_path: Path, *overrides: str):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"task_id": f"t{i}", "query": f"Say something about {i}."}) + "\n"
                             for i in range(4)))
    conf = tmp_path / "two_turn.yaml"
    conf.write_text(f"""ajet:
  model: {{path: tiny-random}}
  workflow: {Path(__file__).parent / 'two_turn_workflow.py'}:TwoTurnChat
  task_reader: {{type: jsonl, train: {tasks}, val: {tasks}}}
  rollout: {{group_size: 2, batch_tasks: 2, max_turns: 2, max_tokens_per_turn: 6}}
  trainer: {{steps: 2, save_every: 1, lr: 1.0e-3}}
""")
    return load_config(conf, [f"output_dir={tmp_path / 'run'}", *overrides])


def test_ppo_trains_the_policy_and_its_value_head(tmp_path):
    run(_two_turn_config(tmp_path, "algorithm=ppo", "grpo.turn_reward_weight=0.5", "ppo.value_lr=0.01"))
    run_dir = tmp_path / "run"
    rows = metrics(run_dir)
    assert [(r["step"], r["stage"]) for r in rows] == [(1, "ppo"), (2, "ppo")]
    # 4 episodes of one two-turn sample each: every sample trains, every turn is valued
    assert all(r["trained_samples"] == 4 and r["turns_trained"] == 8.0 and r["value_loss"] > 0 for r in rows)
    assert rows[0]["value_mean"] == 0.0 and rows[1]["value_mean"] != 0.0  # the critic starts at zero and learns
    heads = [load_file(run_dir / "checkpoints" / f"step-{s:06d}" / "value_head.safetensors") for s in (1, 2)]
    assert heads[0]["linear.weight"].abs().sum() > 0
    assert not torch.equal(heads[0]["linear.weight"], heads[1]["linear.weight"])
    first, last = adapter(run_dir, 1), adapter(run_dir, 2)
    assert any(not torch.equal(first[k], last[k]) for k in first if "lora_B" in k)


def test_grpo_turn_credit_trains_groups_whose_episodes_tied(tmp_path):
    # the first rollout's two groups score 0.5 in every episode (one of two turns right): no signal by outcome,
    # but the turns differ, so turn-level credit trains all four samples (LOO baseline and entropy bonus on)
    run(_two_turn_config(tmp_path, "algorithm=grpo", "grpo.turn_reward_weight=1.0", "grpo.baseline=leave_one_out",
                         "grpo.entropy_coef=0.01", "trainer.steps=1"))
    row = metrics(tmp_path / "run")[0]
    assert row["groups/informative_groups"] == 0 and row["groups/zero_variance_groups"] == 2
    assert row["turn_credit_samples"] == 4 and row["trained_samples"] == 4 and row["entropy"] > 0


def test_dynamic_sampling_rolls_out_more_tasks_until_groups_have_a_signal(tmp_path):
    run(_two_turn_config(tmp_path, "algorithm=grpo", "grpo.dynamic_sampling_rounds=2", "trainer.steps=1"))
    row = metrics(tmp_path / "run")[0]
    # round 0: both groups tie (see above) -> a second rollout of 2 new tasks, whose groups differ
    assert row["dynamic_sampling_rounds"] == 1 and row["episodes"] == 8
    assert row["groups/informative_groups"] == 2 and row["trained_samples"] == 4
    logged = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert sorted(r["group_id"].endswith("~1") for r in logged if r["trained"]) == [True] * 4
