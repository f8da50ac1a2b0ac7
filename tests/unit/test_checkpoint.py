"""Atomic checkpoints: layout, exact round trip, crash leftovers never loaded, keep-last, resume."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from ajet.config.schema import GrpoConfig, LoraConfig, ModelConfig, TrainerConfig
from ajet.errors import CheckpointError
from ajet.samples import Sample
from ajet.trainer.checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    resolve_checkpoint,
    save_checkpoint,
)
from ajet.trainer.logprobs import token_logprobs
from ajet.trainer.optim import build_optimizer, build_scheduler
from ajet.trainer.policy import Policy, load_policy
from ajet.trainer.step import train_step

CFG = TrainerConfig(lr=1e-2, steps=3, lr_schedule="cosine", warmup_steps=1, weight_decay=0.01)


def make(lora: bool = True, seed: int = 0):
    torch.manual_seed(seed)  # a different seed gives different fresh LoRA A matrices
    policy = load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(enabled=lora)))
    opt = build_optimizer(policy.model.parameters(), CFG)
    return policy, opt, build_scheduler(opt, CFG)


def fixed_samples(policy: Policy) -> tuple[list[Sample], list[float]]:
    tok = policy.tokenizer
    out = []
    for completion in (" Paris.", " It is Lyon, I think."):
        p, c = tok("Capital of France?")["input_ids"], tok(completion)["input_ids"]
        ids, mask = p + c, [0] * len(p) + [1] * len(c)
        t = torch.tensor([ids])
        with torch.no_grad():
            old = token_logprobs(policy.model, t, torch.ones_like(t), torch.tensor([mask]))[0].tolist()
        out.append(Sample(ids, mask, old, 0.0, "g", "a"))
    return out, [1.0, -1.0]


def trainable_state(policy: Policy) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in policy.model.named_parameters() if v.requires_grad}


def assert_optimizer_equal(a: torch.optim.Optimizer, b: torch.optim.Optimizer) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert sa["state"].keys() == sb["state"].keys() and sa["state"]
    for k in sa["state"]:
        for name, value in sa["state"][k].items():
            assert torch.equal(value, sb["state"][k][name]), (k, name)


def draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_layout_and_exact_round_trip(tmp_path):
    policy, opt, sched = make()
    samples, adv = fixed_samples(policy)
    train_step(policy, opt, sched, samples, adv, CFG)
    policy.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    path = save_checkpoint(tmp_path, 1, policy, opt, sched, {"data_position": 7, "stage": "grpo"})
    expected_draws = draws()

    assert path == tmp_path / "checkpoints" / "step-000001"
    for rel in ["adapter/adapter_config.json", "adapter/adapter_model.safetensors", "tokenizer/tokenizer.json",
                "tokenizer/chat_template.jinja", "optimizer.pt", "scheduler.pt", "rng.pt", "state.json", "COMPLETE"]:
        assert (path / rel).is_file(), rel
    assert (path / "tokenizer/chat_template.jinja").read_text() == policy.chat_template
    manifest = json.loads((path / "COMPLETE").read_text())["files"]
    assert manifest["optimizer.pt"] == (path / "optimizer.pt").stat().st_size
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-000001"]  # no temp left

    fresh, fresh_opt, fresh_sched = make(seed=123)
    assert any(not torch.equal(v, trainable_state(fresh)[k]) for k, v in trainable_state(policy).items())
    state = load_checkpoint(path, fresh, fresh_opt, fresh_sched)
    assert state["step"] == 1 and state["extra"] == {"data_position": 7, "stage": "grpo"}
    assert state["model_path"] == policy.model_path and state["lora"] is True
    assert state["model"]["lora"]["rank"] == 16
    for k, v in trainable_state(policy).items():
        assert torch.equal(v, trainable_state(fresh)[k]), k
    assert_optimizer_equal(opt, fresh_opt)
    assert fresh_sched.state_dict() == sched.state_dict()
    assert fresh_opt.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    assert draws() == expected_draws  # RNG streams continue where the save left them


def test_resume_matches_uninterrupted_run(tmp_path):
    # uninterrupted: 3 steps
    policy, opt, sched = make()
    samples, adv = fixed_samples(policy)
    for _ in range(3):
        train_step(policy, opt, sched, samples, adv, CFG, grpo=GrpoConfig(beta=0.05))
    # interrupted: 1 step, save, fresh objects (as a new process would build them), load, 2 steps
    p1, o1, s1 = make()
    train_step(p1, o1, s1, samples, adv, CFG, grpo=GrpoConfig(beta=0.05))
    ckpt = save_checkpoint(tmp_path, 1, p1, o1, s1, {"data_position": 2})
    del p1, o1, s1
    p2, o2, s2 = make(seed=99)
    state = load_checkpoint(resolve_checkpoint(tmp_path), p2, o2, s2)
    assert resolve_checkpoint(tmp_path) == ckpt
    for _ in range(state["step"], 3):
        train_step(p2, o2, s2, samples, adv, CFG, grpo=GrpoConfig(beta=0.05))
    for k, v in trainable_state(policy).items():
        assert torch.equal(v, trainable_state(p2)[k]), k
    assert_optimizer_equal(opt, o2)
    assert s2.state_dict() == sched.state_dict()


def test_partial_and_temp_folders_are_never_picked(tmp_path):
    policy, opt, sched = make()
    good = save_checkpoint(tmp_path, 2, policy, opt, sched)
    root = tmp_path / "checkpoints"
    # a crashed save: a complete-looking temp folder, a later step without COMPLETE, one with a cut file
    shutil.copytree(good, root / ".tmp-step-000009-abcd")
    no_marker = shutil.copytree(good, root / "step-000010")
    (no_marker / "COMPLETE").unlink()
    cut = shutil.copytree(good, root / "step-000011")
    with open(cut / "optimizer.pt", "r+b") as fh:
        fh.truncate(10)
    (root / "step-000012").mkdir()  # empty folder
    (root / "notes.txt").write_text("not a checkpoint")

    assert latest_checkpoint(tmp_path) == good
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2]
    with pytest.raises(CheckpointError, match="no COMPLETE marker"):
        load_checkpoint(no_marker, policy)
    with pytest.raises(CheckpointError, match=r"optimizer.pt has 10 bytes"):
        load_checkpoint(cut, policy, opt)
    with pytest.raises(CheckpointError, match="partial or corrupt"):
        resolve_checkpoint(root / "step-000012")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(root / "step-000099", policy)
    assert latest_checkpoint(tmp_path / "elsewhere") is None
    with pytest.raises(CheckpointError, match="nothing to resume"):
        resolve_checkpoint(tmp_path / "elsewhere")
    # the next save removes the crashed temp folder
    save_checkpoint(tmp_path, 3, policy, opt, sched)
    assert not (root / ".tmp-step-000009-abcd").exists()
    assert latest_checkpoint(tmp_path) == root / "step-000003"


def test_killed_during_save_leaves_no_checkpoint(tmp_path, tiny_model_path):
    # A real process is SIGKILLed in the middle of writing a checkpoint (after the weights, before the
    # RNG file): only a .tmp-* folder may remain, and nothing is ever loaded from it.
    script = textwrap.dedent(f"""
        import os, signal, torch
        import ajet.trainer.checkpoint as ck
        from ajet.config.schema import ModelConfig, TrainerConfig
        from ajet.trainer.optim import build_optimizer, build_scheduler
        from ajet.trainer.policy import load_policy
        policy = load_policy(ModelConfig(path={tiny_model_path!r}))
        opt = build_optimizer(policy.model.parameters(), TrainerConfig())
        ck.save_checkpoint({str(tmp_path)!r}, 1, policy, opt, None)
        ck._rng_state = lambda: os.kill(os.getpid(), signal.SIGKILL)
        ck.save_checkpoint({str(tmp_path)!r}, 2, policy, opt, None)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names[0].startswith(".tmp-step-000002-") and names[1:] == ["step-000001"]
    assert latest_checkpoint(tmp_path).name == "step-000001"


def test_keep_last_and_resave_same_step(tmp_path):
    policy, opt, sched = make()
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, policy, opt, sched, {"n": step}, keep_last=2)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 3]
    save_checkpoint(tmp_path, 3, policy, opt, sched, {"n": "again"})
    assert load_checkpoint(latest_checkpoint(tmp_path), policy)["extra"] == {"n": "again"}
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-000002", "step-000003"]


def test_full_finetune_round_trip_and_mismatch(tmp_path):
    policy, opt, sched = make(lora=False)
    samples, adv = fixed_samples(policy)
    train_step(policy, opt, sched, samples, adv, CFG)
    path = save_checkpoint(tmp_path, 1, policy, opt, sched)
    assert (path / "model" / "config.json").is_file() and not (path / "adapter").exists()
    fresh, fresh_opt, fresh_sched = make(lora=False)
    load_checkpoint(path, fresh, fresh_opt, fresh_sched)
    for k, v in policy.model.state_dict().items():
        assert torch.equal(v, fresh.model.state_dict()[k]), k
    lm = fresh.causal_lm()
    assert lm.lm_head.weight.data_ptr() == lm.model.embed_tokens.weight.data_ptr()  # still tied
    assert_optimizer_equal(opt, fresh_opt)
    lora_policy, _, _ = make(lora=True)
    with pytest.raises(CheckpointError, match="lora.enabled=False"):
        load_checkpoint(path, lora_policy)
    os.remove(path / "optimizer.pt")
    with pytest.raises(CheckpointError):
        load_checkpoint(path, fresh, fresh_opt)
