"""Multi-LoRA serving in HFEngine: requests name an adapter, batches never mix them, the model as is stays
reachable, and a trainer's peft model keeps its active adapter and trainable flags."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from ajet.engine.base import SamplingParams
from ajet.engine.hf import HFEngine
from ajet.errors import EngineError


def load(path: str):
    return AutoModelForCausalLM.from_pretrained(path).eval()


@pytest.fixture(scope="module")
def adapters(tiny_model_path, tmp_path_factory) -> dict[str, Path]:
    """Two LoRA adapters of tiny-random with different random (non-zero) weights, saved with peft."""
    saved = {}
    for name, seed in (("alpha", 1), ("beta", 2)):
        torch.manual_seed(seed)
        peft_model = get_peft_model(load(tiny_model_path), LoraConfig(r=4, lora_alpha=16, target_modules="all-linear",
                                                                      init_lora_weights=False))
        saved[name] = tmp_path_factory.mktemp(name)
        peft_model.save_pretrained(saved[name])
    return saved


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


async def reference(model, tokenizer, prompt: list[int], sampling: SamplingParams):
    return await HFEngine(model, tokenizer, prefix_cache_mb=0).generate(prompt, sampling)


def close(a: list[float], b: list[float]) -> bool:
    return max(abs(x - y) for x, y in zip(a, b)) < 1e-5


SAMPLINGS = [SamplingParams(max_tokens=8, temperature=0.0), SamplingParams(max_tokens=8, temperature=1.0, seed=4)]


async def test_plain_model_serves_each_adapter_and_itself_without_mixing(tiny_model_path, adapters, tokenizer):
    engine = HFEngine(load(tiny_model_path), tokenizer)
    model_before = engine.model
    engine.load_adapter("alpha", adapters["alpha"])
    engine.load_adapter("beta", adapters["beta"])
    assert engine.model is model_before  # adapters are injected in place
    prompt = tokenizer.encode("The capital of France is")
    names = [None, "alpha", "beta", "alpha", None, "beta"]
    for sampling in SAMPLINGS:
        before = engine.stats.batches
        jobs = [engine.generate(prompt, SamplingParams(**{**sampling.__dict__, "adapter": n})) for n in names]
        results = await asyncio.gather(*jobs)
        assert engine.stats.batches - before == 3  # one admission group per adapter: batches never mix them
        expected = {  # computed by separate models: the base alone, and the base with one adapter
            None: await reference(load(tiny_model_path), tokenizer, prompt, sampling),
            "alpha": await reference(PeftModel.from_pretrained(load(tiny_model_path), adapters["alpha"]), tokenizer,
                                     prompt, sampling),
            "beta": await reference(PeftModel.from_pretrained(load(tiny_model_path), adapters["beta"]), tokenizer,
                                    prompt, sampling),
        }
        for name, got in zip(names, results):
            assert got.token_ids == expected[name].token_ids and close(got.logprobs, expected[name].logprobs)
        assert not close(expected["alpha"].logprobs, expected["beta"].logprobs)  # the adapters really differ
        assert not close(expected[None].logprobs, expected["alpha"].logprobs)
    engine.unload_adapter("beta")
    with pytest.raises(EngineError, match=r"adapter 'beta' is not loaded; loaded: \['alpha'\]"):
        await engine.generate(prompt, SamplingParams(adapter="beta"))
    for name in (None, "alpha"):  # what is left serves as before
        got = await engine.generate(prompt, SamplingParams(**{**sampling.__dict__, "adapter": name}))
        assert got.token_ids == expected[name].token_ids and close(got.logprobs, expected[name].logprobs)


async def test_a_trainers_peft_model_keeps_its_adapter_and_trainable_flags(tiny_model_path, adapters, tokenizer):
    torch.manual_seed(7)
    lora = LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False)
    policy = get_peft_model(load(tiny_model_path), lora).train()
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    engine = HFEngine(policy, tokenizer)
    engine.load_adapter("alpha", adapters["alpha"])
    assert policy.training  # peft's own load_adapter would switch the trainer's model to eval (dropout off)
    prompt = tokenizer.encode("Write a poem")
    sampling = SamplingParams(max_tokens=6, temperature=0.0)
    own, served = await asyncio.gather(engine.generate(prompt, sampling),
                                       engine.generate(prompt, SamplingParams(max_tokens=6, temperature=0.0,
                                                                              adapter="alpha")))
    assert policy.active_adapter == "default"
    assert {n for n, p in policy.named_parameters() if p.requires_grad} == trainable  # nothing leaked to the optimizer
    assert close(own.logprobs, (await reference(policy, tokenizer, prompt, sampling)).logprobs)
    alone = PeftModel.from_pretrained(load(tiny_model_path), adapters["alpha"])
    alpha = await reference(alone, tokenizer, prompt, sampling)
    assert served.token_ids == alpha.token_ids and close(served.logprobs, alpha.logprobs)
    with pytest.raises(EngineError, match="'default' is one of the model's own adapters"):
        engine.load_adapter("default", adapters["beta"])


def test_bad_adapter_folders_are_refused(tiny_model_path, tokenizer, tmp_path):
    engine = HFEngine(load(tiny_model_path), tokenizer)
    with pytest.raises(EngineError, match=r"is not a saved LoRA adapter \(no adapter_config.json there\)"):
        engine.load_adapter("x", tmp_path)
    with pytest.raises(EngineError, match="an adapter name must be a non-empty string"):
        engine.load_adapter(" ", tmp_path)
    with pytest.raises(EngineError, match=r"no adapter 'x' is loaded; loaded: none"):
        engine.unload_adapter("x")
