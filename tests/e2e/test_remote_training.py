"""GRPO on the debug backbone with rollouts on `ajet serve` in a subprocess (engine.type=remote).

The trainer keeps the policy in this process; after each update it saves the LoRA adapter, has the
server load it under a new name (vLLM's /v1/load_lora_adapter), unloads the previous one, and the
next rollouts name the new adapter. Checked over real HTTP on 127.0.0.1: the server's own log of
loads and unloads, its /v1/models, that step 2's completions carry the logprobs of the step-1 adapter
(recomputed here with peft), that the adapter the server loaded is the trainer's checkpointed weights,
and that a server without runtime LoRA fails the run with a clear error.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import httpx
import pytest
import torch
from safetensors.torch import load_file

from ajet.backbone.registry import run_backbone as run
from ajet.config.loader import load_config
from ajet.errors import EngineError
from tests.e2e.serve_process import ajet_serve

ROOT = Path(__file__).resolve().parents[2]
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"
HELPERS = Path(__file__).resolve().parent / "swift_workflow.py"
# Tiny sizes; a judge whose rewards differ between episodes, so every GRPO step updates the weights;
# a large lr, so the step-1 adapter visibly moves logprobs away from the base model's.
FAST = ["model.path=tiny-random", "algorithm=grpo", "trainer.steps=2", "trainer.lr=0.05", "trainer.save_every=1",
        "rollout.max_tokens_per_turn=8", "rollout.max_turns=1", "rollout.group_size=3", "rollout.batch_tasks=2",
        "rollout.retries=0", f"judge.type={HELPERS}:VariedJudge", "~judge.args"]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _logprobs(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1:-1].float()  # (T, V): the positions predicting the completion
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0]


def test_grpo_on_ajet_serve_publishes_one_adapter_per_step(tmp_path, tiny_model_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    run_dir = tmp_path / "run"
    with ajet_serve("tiny-random", tmp_path / "serve.log", "--enable-lora") as url:
        cfg = load_config(TOOL_YAML, FAST + [f"output_dir={run_dir}", "engine.type=remote", f"engine.base_url={url}"])
        run(cfg)
        models = httpx.get(f"{url}/models").json()["data"]
    log = (tmp_path / "serve.log").read_text()

    # The server loaded a new name per step and unloaded the one before: it now serves base + step 2.
    assert "Loaded new LoRA adapter: name 'ajet-step-1'" in log and "Loaded new LoRA adapter: name 'ajet-step-2'" in log
    assert "Removed LoRA adapter: name 'ajet-step-1'" in log and "Removed LoRA adapter: name 'ajet-step-2'" not in log
    newest = run_dir.resolve() / "adapters" / "step-000002"
    assert [(m["id"], m.get("parent"), m.get("root")) for m in models[1:]] == [("ajet-step-2", "tiny", str(newest))]
    assert models[0]["id"] == "tiny"

    # What the server loaded is what the trainer checkpointed after step 2.
    served = load_file(newest / "adapter_model.safetensors")
    trained = load_file(run_dir / "checkpoints" / "step-000002" / "adapter" / "adapter_model.safetensors")
    assert served.keys() == trained.keys() and all(torch.equal(served[k], trained[k]) for k in served)

    # Step 1 sampled from the base model, step 2 from the step-1 adapter: the logprobs the server
    # returned are those models' logprobs of the tokens, and not the other's.
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path, torch_dtype=torch.float32).eval()
    calls = {1: [], 2: []}
    for episode in _lines(run_dir / "episodes.jsonl"):
        calls[episode["step"]] += [c for c in episode["llm_calls"] if c["completion_ids"]]
    assert calls[1] and calls[2]
    base_gap = {s: max(float((_logprobs(base, c["prompt_ids"], c["completion_ids"]) - torch.tensor(c["logprobs"]))
                             .abs().max()) for c in cs) for s, cs in calls.items()}
    adapted = PeftModel.from_pretrained(base, run_dir / "adapters" / "step-000001").eval()
    step1_gap = max(float((_logprobs(adapted, c["prompt_ids"], c["completion_ids"]) - torch.tensor(c["logprobs"]))
                          .abs().max()) for c in calls[2])
    assert base_gap[1] < 1e-3 and step1_gap < 1e-3, (base_gap, step1_gap)
    assert base_gap[2] > 0.05, base_gap  # the step-1 adapter moved them: step 2 was not sampled from the base

    # Off-policy-ness is logged each step: trainer vs engine logprobs on trained tokens, here ~0.
    rows = _lines(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    assert all(math.isfinite(r["logprob_gap"]) and r["logprob_gap"] < 1e-3 for r in rows), rows
    assert rows[1]["adapter_publish_seconds"] > 0 and "adapter_publish_seconds" not in rows[0]


def test_a_server_without_runtime_lora_fails_the_run_clearly(tmp_path):
    with ajet_serve("tiny-random", tmp_path / "serve.log") as url:  # no --enable-lora
        cfg = load_config(TOOL_YAML, FAST + [f"output_dir={tmp_path / 'run'}", "engine.type=remote",
                                             f"engine.base_url={url}"])
        started = time.monotonic()
        with pytest.raises(EngineError) as failure:
            run(cfg)
    message = str(failure.value)
    assert "refused to load LoRA adapter 'ajet-step-1'" in message and "HTTP 404" in message
    assert str((tmp_path / "run" / "adapters" / "step-000001").resolve()) in message
    assert "--enable-lora" in message and "same filesystem" in message
    assert time.monotonic() - started < 60
