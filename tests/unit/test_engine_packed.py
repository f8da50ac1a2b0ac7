"""On a CPU the hf engine runs each Linear from a weight laid out once for oneDNN (`engine.packed`): the
products equal F.linear's, the engine samples the same tokens with the same logprobs, the stand-ins follow
every weight update, and the trainer's modules are back in place after each step."""

from __future__ import annotations

import asyncio

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

import ajet.engine.model_runner as model_runner
from ajet.engine.base import SamplingParams
from ajet.engine.hf import HFEngine
from ajet.engine.packed import PackedLinear, packing_works

pytestmark = pytest.mark.skipif(not packing_works(torch.float32),
                                reason="this torch build has no oneDNN linear (torch.ops.mkldnn)")

SAMPLINGS = [SamplingParams(max_tokens=12, temperature=0.0)] + [
    SamplingParams(max_tokens=12, temperature=1.0, seed=s) for s in range(4)]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture
def model(tiny_model_path):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()


async def generate_all(engine: HFEngine, prompts: list[list[int]]):
    return await asyncio.gather(*(engine.generate(p, s) for p in prompts for s in SAMPLINGS))


def assert_same(a, b, tol: float = 1e-4) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.token_ids == y.token_ids
        assert max(abs(p - q) for p, q in zip(x.logprobs, y.logprobs)) < tol


def test_a_packed_linear_gives_f_linear_in_float32_and_bfloat16():
    torch.manual_seed(1)
    weight, bias = torch.randn(48, 40), torch.randn(48)
    x = torch.randn(2, 7, 80)[..., ::2]  # a strided view, as a slice of a wider activation is
    packed = PackedLinear(weight, bias, torch.float32)
    torch.testing.assert_close(packed(x), torch.nn.functional.linear(x, weight, bias), rtol=1e-5, atol=1e-5)
    assert packed.weight is weight and packed.bias is bias and not list(packed.parameters())
    if packing_works(torch.bfloat16):
        half = PackedLinear(weight, None, torch.bfloat16)
        out = half(x)  # a float32 input is cast, as autocast casts it for F.linear
        assert out.dtype == torch.bfloat16
        expected = torch.nn.functional.linear(x.bfloat16(), weight.bfloat16())
        torch.testing.assert_close(out.float(), expected.float(), rtol=2e-2, atol=2e-2)


async def test_the_engine_steps_run_packed_linears_and_give_the_same_tokens_and_logprobs(model, tokenizer):
    prompts = [tokenizer.encode("The capital of France is"), tokenizer.encode("Once upon a time, a")]
    seen: list[type] = []
    q_proj = model.model.layers[0].self_attn.q_proj
    hook = model.model.layers[0].register_forward_pre_hook(
        lambda layer, args: seen.append(type(layer.self_attn.q_proj)))
    try:
        packed = HFEngine(model, tokenizer, pack_weights=True, prefix_cache_mb=0)
        got = await generate_all(packed, prompts)
        ran_packed, seen[:] = set(seen), []
        expected = await generate_all(HFEngine(model, tokenizer, pack_weights=False, prefix_cache_mb=0), prompts)
    finally:
        hook.remove()
    assert ran_packed == {PackedLinear} and set(seen) == {torch.nn.Linear}
    assert_same(got, expected)
    assert model.model.layers[0].self_attn.q_proj is q_proj  # the model's own modules are back after each step
    assert all(type(m) is not PackedLinear for m in model.modules())
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    assert len(packed.runner.step_weights._packs) == len(linears)  # the output head too


async def test_packed_weights_follow_in_place_updates(model, tokenizer):
    prompt = [tokenizer.encode("The capital of France is")]
    packed = HFEngine(model, tokenizer, pack_weights=True)
    before = await generate_all(packed, prompt)
    with torch.no_grad():  # what an optimizer step does: in place, version counters bump
        for layer in model.model.layers:
            layer.mlp.down_proj.weight.mul_(-3.0)
        model.lm_head.weight.add_(0.5 * torch.randn_like(model.lm_head.weight))
    after = await generate_all(packed, prompt)
    expected = await generate_all(HFEngine(model, tokenizer, pack_weights=False), prompt)
    assert_same(after, expected)
    assert any(a.logprobs != b.logprobs for a, b in zip(before, after))  # the update reached the packed copies


async def test_a_lora_policy_runs_folded_and_packed_and_follows_adapter_updates(model, tokenizer):
    torch.manual_seed(3)
    policy = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                              init_lora_weights=False))
    prompt = [tokenizer.encode("Hello, my name is")]
    packed = HFEngine(policy, tokenizer, pack_weights=True)
    plain = HFEngine(policy, tokenizer, pack_weights=False)
    assert packed.runner.step_weights.fold_lora and packed.runner.step_weights.pack
    assert_same(await generate_all(packed, prompt), await generate_all(plain, prompt))
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.mul_(4.0)
    assert_same(await generate_all(packed, prompt), await generate_all(plain, prompt))
    folds = packed.runner.step_weights._folds
    assert folds and all(isinstance(f.linear, PackedLinear) for f in folds)  # laid out from the folded sums
    assert all(f.linear.weight is f.layer.get_base_layer().weight for f in folds)  # no folded copy is kept


def test_auto_packs_on_a_cpu_when_the_copies_fit(model, tokenizer, monkeypatch):
    assert HFEngine(model, tokenizer).runner.step_weights.pack
    assert not HFEngine(model, tokenizer, pack_weights=False).runner.step_weights.pack
    monkeypatch.setattr(model_runner, "PACK_AUTO_BYTES", 1024)
    assert not HFEngine(model, tokenizer).runner.step_weights.pack
