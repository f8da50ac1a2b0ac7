"""The hf engine runs a LoRA policy's own adapter folded into copies of its base weights
(`engine.precision.StepWeights`): the same tokens and logprobs as peft's two extra matmuls, the copies
follow every weight update, served adapters and LoRA variants stay unfolded, and the trainer's model is
left exactly as it was."""

from __future__ import annotations

import asyncio

import pytest
import torch
from peft import LoraConfig, get_peft_model
from peft.tuners.lora.layer import Linear as LoraLinear
from transformers import AutoModelForCausalLM, AutoTokenizer

import ajet.engine.model_runner as model_runner
from ajet.engine.base import SamplingParams
from ajet.engine.hf import HFEngine

SAMPLINGS = [SamplingParams(max_tokens=10, temperature=0.0)] + [
    SamplingParams(max_tokens=10, temperature=1.0, seed=s) for s in range(4)]


@pytest.fixture
def policy(tiny_model_path):
    """A trainer's peft model with non-zero adapters (a fresh LoRA's B is zero and would fold to nothing)."""
    torch.manual_seed(3)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


async def generate_all(engine: HFEngine, prompt: list[int]):
    return await asyncio.gather(*(engine.generate(prompt, s) for s in SAMPLINGS))


def assert_same(a, b, tol: float = 1e-5) -> None:
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids
        assert max(abs(p - q) for p, q in zip(x.logprobs, y.logprobs)) < tol


def lora_modules(model) -> list:
    return [m for m in model.modules() if isinstance(m, LoraLinear)]


async def test_folded_lora_gives_the_tokens_and_logprobs_of_peft(policy, tokenizer):
    prompt = tokenizer.encode("The capital of France is")
    layers = lora_modules(policy)
    folded = HFEngine(policy, tokenizer, fold_lora=True, prefix_cache_mb=0)
    plain = HFEngine(policy, tokenizer, fold_lora=False, prefix_cache_mb=0)
    got, expected = await generate_all(folded, prompt), await generate_all(plain, prompt)
    assert_same(got, expected)
    steps = folded.runner.step_weights
    assert len(steps._folds) == len(layers) == 14 and all(f.linear is not None for f in steps._folds)
    assert lora_modules(policy) == layers  # every peft layer is back in its place after the steps
    with policy.disable_adapter():  # the adapters do change the result: folding them in is not a no-op
        base = await generate_all(HFEngine(policy, tokenizer, fold_lora=False, prefix_cache_mb=0), prompt)
    assert any(abs(x.logprobs[0] - y.logprobs[0]) > 1e-3 for x, y in zip(base, expected))


async def test_the_folded_copies_follow_each_update_of_the_adapters(policy, tokenizer):
    prompt = tokenizer.encode("Count: one two three")
    folded = HFEngine(policy, tokenizer, fold_lora=True)
    plain = HFEngine(policy, tokenizer, fold_lora=False)
    before = await generate_all(folded, prompt)
    with torch.no_grad():  # what an optimizer step does: the adapters change in place
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.mul_(-2.0)
    after, expected = await generate_all(folded, prompt), await generate_all(plain, prompt)
    assert_same(after, expected)
    assert max(abs(x.logprobs[0] - y.logprobs[0]) for x, y in zip(after, before)) > 1e-3  # really refolded


async def test_a_served_adapter_runs_unfolded_beside_the_folded_policy(policy, tokenizer, tmp_path):
    torch.manual_seed(11)
    other = get_peft_model(AutoModelForCausalLM.from_pretrained(policy.peft_config["default"].base_model_name_or_path),
                           LoraConfig(r=2, target_modules="all-linear", init_lora_weights=False))
    other.save_pretrained(tmp_path)
    prompt = tokenizer.encode("Write a poem")
    folded, plain = HFEngine(policy, tokenizer, fold_lora=True), HFEngine(policy, tokenizer, fold_lora=False)
    for engine in (folded, plain):
        engine.load_adapter("served", tmp_path)
    sampling = [SamplingParams(max_tokens=6, temperature=0.0, adapter=a) for a in (None, "served")]
    got = await asyncio.gather(*(folded.generate(prompt, s) for s in sampling))
    expected = await asyncio.gather(*(plain.generate(prompt, s) for s in sampling))
    assert_same(got, expected)
    assert abs(got[0].logprobs[0] - got[1].logprobs[0]) > 1e-4  # the served adapter answered, not the policy
    assert policy.active_adapter == "default"


async def test_auto_folds_only_what_fits_and_variants_stay_unfolded(policy, tokenizer, monkeypatch, tiny_model_path):
    assert HFEngine(policy, tokenizer).runner.step_weights.fold_lora  # tiny: its copies are a few kB
    # bf16 passes would round the LoRA delta into the folded weight: auto leaves them unfolded
    assert not HFEngine(policy, tokenizer, autocast_dtype="bfloat16").runner.step_weights.fold_lora
    assert HFEngine(policy, tokenizer, autocast_dtype="bfloat16", fold_lora=True).runner.step_weights.fold_lora
    monkeypatch.setattr(model_runner, "FOLD_AUTO_BYTES", 1024)
    assert not HFEngine(policy, tokenizer).runner.step_weights.fold_lora
    torch.manual_seed(5)
    dora = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_path).eval(),
                          LoraConfig(r=4, target_modules="all-linear", use_dora=True, init_lora_weights=False))
    prompt = tokenizer.encode("Hi there")
    folded = HFEngine(dora, tokenizer, fold_lora=True)
    assert_same(await generate_all(folded, prompt), await generate_all(HFEngine(dora, tokenizer, fold_lora=False), prompt))
    assert all(f.linear is None for f in folded.runner.step_weights._folds)  # DoRA's magnitude is not a plain delta


async def test_under_autocast_the_folded_copy_replaces_the_cast_one(policy, tokenizer):
    prompt = tokenizer.encode("The capital of France is")
    folded = HFEngine(policy, tokenizer, fold_lora=True, autocast_dtype="bfloat16", pack_weights=False)
    plain = HFEngine(policy, tokenizer, fold_lora=False, autocast_dtype="bfloat16", pack_weights=False)
    got, expected = await generate_all(folded, prompt), await generate_all(plain, prompt)
    for x, y in zip(got, expected):  # bf16 matmuls on both sides, summed in another order: bf16 rounding
        n = next((i for i, (a, b) in enumerate(zip(x.token_ids, y.token_ids)) if a != b), len(x.token_ids))
        assert n >= 3 and max(abs(p - q) for p, q in zip(x.logprobs[:n], y.logprobs[:n])) < 5e-2
    steps = folded.runner.step_weights
    casts, folds, _ = steps._entries
    assert {f.linear.weight.dtype for f in folds} == {torch.bfloat16}
    bases = {id(f.layer.get_base_layer()) for f in folds}
    assert casts and not any(id(module) in bases for module, _, _ in casts)  # only the head is cast separately
    assert all(p.dtype == torch.float32 for p in policy.parameters())  # the trainer's weights are untouched


async def test_folding_leaves_bf16_adapters_trainable(tokenizer, tiny_model_path):
    """peft's own get_delta_weight swaps a bf16 adapter's .data for tensors made inside the engine step's
    inference mode (swift's GRPO trainer then failed: 'Inference tensors do not track version counter');
    the engine's fold reads the adapters and writes nothing to them."""
    torch.manual_seed(9)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.bfloat16).eval()
    policy = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False),
                            autocast_adapter_dtype=False)
    assert {p.dtype for n, p in policy.named_parameters() if "lora_" in n} == {torch.bfloat16}
    before = {n: (p, p.data_ptr()) for n, p in policy.named_parameters()}
    await generate_all(HFEngine(policy, tokenizer, fold_lora=True), tokenizer.encode("Hi there"))
    after = dict(policy.named_parameters())
    # the same Parameter objects over the same storage: peft's fold had swapped their .data
    assert all(after[n] is p and after[n].data_ptr() == ptr for n, (p, ptr) in before.items())
    assert not any(p.is_inference() for p in policy.parameters())
    policy.train()
    loss = policy(input_ids=torch.tensor([tokenizer.encode("Hi there")])).logits.float().mean()
    loss.backward()  # the trainer's next step
    assert all(p.grad is not None for n, p in policy.named_parameters() if p.requires_grad)


async def test_release_caches_frees_the_stale_copies_and_the_next_step_rebuilds_them(policy, tokenizer):
    prompt = tokenizer.encode("The capital of France is")
    engine = HFEngine(policy, tokenizer, fold_lora=True, pack_weights=True)
    before = await generate_all(engine, prompt)
    steps = engine.runner.step_weights
    assert engine.prefix_cache.nbytes > 0 and all(f.linear is not None for f in steps._folds)
    assert steps._packs
    engine.release_caches()  # what the debug loop does before each update
    assert engine.prefix_cache.nbytes == 0 and all(f.linear is None for f in steps._folds) and not steps._packs
    assert_same(await generate_all(engine, prompt), before)  # rebuilt: the same tokens and logprobs
    assert all(f.linear is not None for f in steps._folds) and lora_modules(policy) != []


async def test_unfolded_under_bf16_auto_splits_lora_and_gives_peft_bit_for_bit(policy, tokenizer):
    """Where folding would round the LoRA delta (bf16 passes), auto runs each plain LoRA layer as a split
    stand-in: peft's products from laid-out weights, the same tokens and logprobs exactly, following every
    update of the adapters, and peft's layers back in place after each step."""
    from ajet.engine.packed import packing_works

    if not packing_works(torch.bfloat16):  # an AVX2-only CPU: the engine keeps peft's layers, nothing to split
        pytest.skip("oneDNN cannot lay out bf16 weights on this CPU (no AVX-512 BF16 or AMX)")
    prompt = tokenizer.encode("The capital of France is")
    layers = lora_modules(policy)
    split = HFEngine(policy, tokenizer, autocast_dtype="bfloat16", pack_weights=True, prefix_cache_mb=0)
    plain = HFEngine(policy, tokenizer, autocast_dtype="bfloat16", pack_weights=True, fold_lora=False,
                     prefix_cache_mb=0)
    steps = split.runner.step_weights
    assert steps.split_lora and not steps.fold_lora and not plain.runner.step_weights.split_lora
    assert_same(await generate_all(split, prompt), await generate_all(plain, prompt), tol=1e-9)
    assert len(steps._folds) == len(layers) == 14
    assert {type(f.linear).__name__ for f in steps._folds} == {"_SplitLora"}
    assert lora_modules(policy) == layers
    bases = [f.linear.base for f in steps._folds]
    with torch.no_grad():  # an optimizer step: the adapters change in place, the frozen base does not
        for name, param in policy.named_parameters():
            if "lora_A" in name:
                param.mul_(-3.0)
    after = await generate_all(split, prompt)
    assert_same(after, await generate_all(plain, prompt), tol=1e-9)
    assert [f.linear.base for f in steps._folds] == bases  # the base laid out once, A and B again
    # without packed weights (a GPU) there is nothing to split into: peft's layers run
    assert not HFEngine(policy, tokenizer, autocast_dtype="bfloat16", pack_weights=False).runner.step_weights.split_lora
