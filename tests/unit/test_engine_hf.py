"""HFEngine on the tiny random model: batched decoding is exact, logprobs are the raw ones, stops work."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
import torch

from ajet.engine.base import SamplingParams
from ajet.engine.hf import HFEngine, _Request
from ajet.engine.sampling import _top_p_filter
from ajet.errors import EngineError

TEXTS = [
    "Hi",
    "The capital of France is",
    "Write a short poem about the sea and the wind, please.",
    "Count: one two three four five six seven eight nine ten eleven twelve",
]


@pytest.fixture(scope="module")
def engine(tiny_model_path) -> HFEngine:
    return HFEngine.from_pretrained(tiny_model_path, device="cpu", dtype="float32", seed=0)


@pytest.fixture(scope="module")
def prompts(engine) -> list[list[int]]:
    return [engine.tokenizer.encode(t) for t in TEXTS]


def full_forward_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    """Log-softmax of one unpadded forward pass over prompt + completion, at the completion tokens."""
    ids = torch.tensor([prompt + completion])
    with torch.inference_mode():
        logprobs = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    return [logprobs[len(prompt) - 1 + i, token].item() for i, token in enumerate(completion)]


def greedy(max_tokens: int = 12, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0, **kw)


async def test_batched_greedy_equals_solo_and_model_generate(engine, prompts):
    lengths = sorted(len(p) for p in prompts)
    assert lengths[0] <= 2 and lengths[-1] >= 12  # really different lengths: left padding is exercised
    before = engine.stats.batches
    batched = await engine.generate_many(prompts, greedy())
    assert engine.stats.batches == before + 1  # all four decoded together
    for prompt, gen in zip(prompts, batched):
        solo = await engine.generate(prompt, greedy())
        assert gen.token_ids == solo.token_ids
        assert gen.finish_reason == solo.finish_reason == "length"
        x = torch.tensor([prompt])
        with torch.inference_mode():
            out = engine.model.generate(
                x, attention_mask=torch.ones_like(x), max_new_tokens=12, do_sample=False,
                eos_token_id=sorted(engine.eos_ids), pad_token_id=min(engine.eos_ids))
        assert gen.token_ids == out[0, len(prompt):].tolist()


async def test_logprobs_equal_a_full_forward_pass(engine, prompts):
    for sampling in (greedy(10), SamplingParams(max_tokens=10, temperature=1.3, top_p=0.95, seed=11)):
        gens = await engine.generate_many(prompts, sampling)
        for prompt, gen in zip(prompts, gens):
            assert len(gen.logprobs) == len(gen.token_ids) == 10
            expected = full_forward_logprobs(engine.model, prompt, gen.token_ids)
            assert max(abs(a - b) for a, b in zip(gen.logprobs, expected)) < 1e-4
            assert all(lp <= 0 for lp in gen.logprobs)


async def test_sixteen_concurrent_requests_share_one_batch_and_match_solo(engine):
    tok = engine.tokenizer
    prompts = [tok.encode(f"Request number {i}: tell me about item {i * 7}") for i in range(16)]
    sampling = SamplingParams(max_tokens=6, temperature=1.0, seed=3)
    before_batches, before_passes = engine.stats.batches, engine.stats.forward_passes
    results = await asyncio.gather(*(engine.generate(p, sampling) for p in prompts))
    assert engine.stats.batches == before_batches + 1
    assert engine.stats.largest_batch == 16
    assert engine.stats.forward_passes == before_passes + 6  # prefill + 5 decode steps, for all 16
    for prompt, result in zip(prompts, results):
        assert (await engine.generate(prompt, sampling)).token_ids == result.token_ids


async def test_seeded_sampling_is_reproducible(engine, prompts, tiny_model_path):
    sampling = SamplingParams(max_tokens=8, temperature=1.0, seed=42)
    first = await engine.generate(prompts[1], sampling)
    again = await engine.generate(prompts[1], sampling)
    other = await engine.generate(prompts[1], SamplingParams(max_tokens=8, temperature=1.0, seed=43))
    assert first.token_ids == again.token_ids
    assert first.token_ids != other.token_ids
    # Without a per-request seed, the engine's seed decides: two fresh engines with seed 0 agree.
    a = HFEngine(engine.model, engine.tokenizer, seed=0)
    b = HFEngine(engine.model, engine.tokenizer, seed=0)
    c = HFEngine(engine.model, engine.tokenizer, seed=1)
    unseeded = SamplingParams(max_tokens=8, temperature=1.0)
    ra, rb, rc = [await e.generate(prompts[1], unseeded) for e in (a, b, c)]
    assert ra.token_ids == rb.token_ids != rc.token_ids


async def test_stop_token_ids_end_the_completion_and_are_included(engine, prompts):
    free = await engine.generate(prompts[2], SamplingParams(max_tokens=10, temperature=1.0, seed=7))
    stop_id = free.token_ids[4]
    first = free.token_ids.index(stop_id)
    stopped = await engine.generate(
        prompts[2], SamplingParams(max_tokens=10, temperature=1.0, seed=7, stop_token_ids=[stop_id]))
    assert stopped.token_ids == free.token_ids[: first + 1]
    assert stopped.logprobs == pytest.approx(free.logprobs[: first + 1], abs=1e-6)
    assert stopped.finish_reason == "stop"


async def test_eos_ids_come_from_tokenizer_and_generation_config(engine, prompts):
    free = await engine.generate(prompts[0], SamplingParams(max_tokens=10, temperature=1.0, seed=9))
    eos = free.token_ids[3]
    saved = engine.model.generation_config.eos_token_id
    engine.model.generation_config.eos_token_id = [saved, eos]
    try:
        other = HFEngine(engine.model, engine.tokenizer)
    finally:
        engine.model.generation_config.eos_token_id = saved
    assert other.eos_ids == {engine.tokenizer.eos_token_id, eos}
    gen = await other.generate(prompts[0], SamplingParams(max_tokens=10, temperature=1.0, seed=9))
    cut = free.token_ids.index(eos) + 1
    assert gen.token_ids == free.token_ids[:cut] and gen.token_ids[-1] == eos  # EOS kept, with its logprob
    assert len(gen.logprobs) == cut and gen.finish_reason == "stop"


async def test_stop_string_cuts_after_the_token_that_completes_it(engine, prompts):
    tok = engine.tokenizer
    free = await engine.generate(prompts[3], SamplingParams(max_tokens=12, temperature=1.0, seed=21))
    text_upto = [tok.decode(free.token_ids[: i + 1]) for i in range(12)]
    # A stop string made of the end of token 5's text and the start of token 6's text.
    piece5 = text_upto[4][len(text_upto[3]):]
    piece6 = text_upto[5][len(text_upto[4]):]
    stop = piece5[-2:] + piece6[:2]
    assert stop and stop not in text_upto[4]
    expected_end = next(i for i, text in enumerate(text_upto) if stop in text) + 1
    gen = await engine.generate(prompts[3], SamplingParams(max_tokens=12, temperature=1.0, seed=21, stop=[stop]))
    assert gen.token_ids == free.token_ids[:expected_end]
    assert gen.finish_reason == "stop"
    assert stop in tok.decode(gen.token_ids) and stop not in tok.decode(gen.token_ids[:-1])


async def test_max_tokens_gives_length_and_zero_gives_nothing(engine, prompts):
    gen = await engine.generate(prompts[1], greedy(5))
    assert len(gen.token_ids) == 5 and gen.finish_reason == "length"
    empty = await engine.generate(prompts[1], greedy(0))
    assert empty.token_ids == [] and empty.finish_reason == "length"


async def test_bad_prompts_raise_engine_error(engine):
    with pytest.raises(EngineError, match="prompt is empty"):
        await engine.generate([], greedy())
    with pytest.raises(EngineError, match=r"outside the vocabulary \[0, 49152\): \[49152\]"):
        await engine.generate([1, 49152], greedy())
    with pytest.raises(EngineError, match="model takes at most 8192"):
        await engine.generate([5] * 8192, greedy())
    # The engine still works after refusing.
    assert len((await engine.generate([5, 6], greedy(2))).token_ids) == 2


async def test_context_limit_cuts_max_tokens(engine):
    gen = await engine.generate([5] * 8190, greedy(10))
    assert len(gen.token_ids) == 2 and gen.finish_reason == "length"


async def test_event_loop_stays_responsive_and_cancelled_callers_are_skipped(engine, prompts):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    await engine.generate(prompts[3], greedy(150))
    task.cancel()
    assert ticks >= 3  # the loop ran other tasks while torch worked in the engine thread
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(engine.generate(prompts[3], greedy(400)), timeout=0.05)
    assert (await engine.generate(prompts[0], greedy(3))).finish_reason == "length"


async def test_training_mode_is_restored_after_generation(engine, prompts):
    engine.model.train()
    try:
        await engine.generate(prompts[0], greedy(2))
        assert engine.model.training
    finally:
        engine.model.eval()
    assert engine.weights_version == 0 and hasattr(engine.lock, "acquire")


def test_batches_group_by_length_and_respect_max_batch_size(engine):
    def req(n: int) -> _Request:
        return _Request([1] * n, greedy(), None, 0)  # type: ignore[arg-type]

    backlog = [req(100), req(5), req(104), req(98), req(300)]
    batch = engine._take_batch(backlog)
    # Oldest first, then the closest lengths: with 5 the batch holds 109 pads in 416 slots (26%); 300 makes it 60%.
    assert [len(r.prompt_ids) for r in batch] == [100, 98, 104, 5]
    assert [len(r.prompt_ids) for r in backlog] == [300]
    small = HFEngine(engine.model, engine.tokenizer, max_batch_size=2)
    backlog = [req(10), req(11), req(12)]
    assert len(small._take_batch(backlog)) == 2 and len(backlog) == 1
    # 3 and 30 tokens: 27 pads in 60 slots = 45% <= 50%, together; 3, 3, 60: 114 pads in 180 = 63%, apart.
    assert engine._padding_ok([3, 30]) and not engine._padding_ok([3, 3, 60])


def test_top_p_filter_keeps_the_smallest_head_reaching_p():
    probs = torch.tensor([[0.05, 0.5, 0.15, 0.3], [0.05, 0.5, 0.15, 0.3], [0.05, 0.5, 0.15, 0.3]])
    out = _top_p_filter(probs, torch.tensor([0.7, 0.81, 0.1]))
    assert out[0].tolist() == pytest.approx([0.0, 0.5, 0.0, 0.3])  # 0.5 + 0.3 reaches 0.7
    assert out[1].tolist() == pytest.approx([0.0, 0.5, 0.15, 0.3])  # 0.8 < 0.81 needs the 0.15 too
    assert out[2].tolist() == pytest.approx([0.0, 0.5, 0.0, 0.0])  # the top token always stays


def test_sampled_tokens_follow_the_temperature_and_top_p_distribution():
    """20,000 rows, each with its own seeded generator, over a 4-token vocabulary: the frequencies of the
    picks match softmax(logits / T) (after the top-p cut) within 4 standard errors."""
    from types import SimpleNamespace

    from ajet.engine.sampling import pick_tokens

    logits = torch.log(torch.tensor([0.1, 0.2, 0.3, 0.4]))
    n = 20_000
    for temperature, top_p, expected in ((1.0, 1.0, [0.1, 0.2, 0.3, 0.4]),
                                         (0.5, 1.0, [1 / 30, 4 / 30, 9 / 30, 16 / 30]),  # p^2, renormalised
                                         (1.0, 0.65, [0.0, 0.0, 3 / 7, 4 / 7])):  # 0.4 + 0.3 reaches 0.65
        rows = [SimpleNamespace(request=SimpleNamespace(sampling=SamplingParams(temperature=temperature, top_p=top_p)),
                                generator=torch.Generator().manual_seed(i), matcher=None) for i in range(n)]
        tokens, logprobs, errors = pick_tokens(logits.expand(n, -1).clone(), rows)
        assert not errors
        counts = torch.bincount(torch.tensor(tokens), minlength=4).double() / n
        for got, want in zip(counts.tolist(), expected):
            assert abs(got - want) <= 4 * (want * (1 - want) / n) ** 0.5 + 1e-12, (temperature, top_p, counts)
        assert logprobs == pytest.approx([float(logits[t]) for t in tokens], abs=1e-6)  # raw, not tempered


async def test_build_engine_gives_an_hf_engine_on_the_configured_model(tiny_model_path, prompts):
    from ajet.config.schema import AjetConfig
    from ajet.engine.factory import build_engine

    cfg = AjetConfig(workflow="wf.py:W", model={"path": tiny_model_path, "device": "cpu"},
                     engine={"type": "hf", "max_batch_size": 3, "seed": 4})
    built = build_engine(cfg)
    assert isinstance(built, HFEngine) and built.max_batch_size == 3 and built.seed == 4
    assert built.device.type == "cpu" and next(built.model.parameters()).dtype == torch.float32
    gen = await built.generate(prompts[0], greedy(3))
    assert len(gen.token_ids) == 3


async def test_close_fails_running_and_waiting_requests_then_the_engine_restarts(engine, prompts):
    own = HFEngine(engine.model, engine.tokenizer)
    running = asyncio.create_task(own.generate(prompts[3], greedy(300)))
    await asyncio.sleep(0.05)  # the worker has taken it into a batch
    await own.close()
    with pytest.raises(EngineError, match="engine was closed"):
        await running
    assert len((await own.generate(prompts[0], greedy(2))).token_ids) == 2
    await own.close()


@pytest.mark.slow
async def test_real_smollm2_answers_and_batches_exactly(smollm2_path):
    real = HFEngine.from_pretrained(smollm2_path, device="cpu", autocast="off")  # float32: exact comparisons
    tok = real.tokenizer
    questions = ["What is the capital of France?", "Name three colors."]
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True)
               for q in questions]
    prompts = [p if isinstance(p, list) else p["input_ids"] for p in prompts]
    batched = await real.generate_many(prompts, greedy(24))
    assert tok.decode(batched[0].token_ids) == "The capital of France is Paris.<|im_end|>"
    assert batched[0].finish_reason == "stop" and batched[0].token_ids[-1] == tok.eos_token_id
    for prompt, gen in zip(prompts, batched):
        assert (await real.generate(prompt, greedy(24))).token_ids == gen.token_ids
        expected = full_forward_logprobs(real.model, prompt, gen.token_ids)
        assert max(abs(a - b) for a, b in zip(gen.logprobs, expected)) < 1e-3
    await real.close()


# ---------------------------------------------------------------------- the prefix KV cache
SYSTEM = ("You are an energy analyst. Tools: get_gas_price(city), get_storage_level(region), "
          "get_pipeline_flow(pipeline), convert_units(value, from_unit, to_unit). ") * 3


async def tool_agent_episodes(engine, sampling_of, tasks: int = 2, group: int = 4, turns: int = 3):
    """tasks x group concurrent episodes in the shape of a tool agent's: one system prompt for all, identical
    first prompts within a group, each turn's prompt = the previous prompt + its completion + a tool result."""
    tok = engine.tokenizer

    async def episode(task: int, member: int):
        prompt = tok.encode(SYSTEM + f"User: question {task} about city {task * 3}?")
        calls = []
        for turn in range(turns):
            gen = await engine.generate(prompt, sampling_of(task * group + member))
            calls.append((list(prompt), gen))
            prompt = prompt + gen.token_ids + tok.encode(f" Tool result {turn}: {task * 7 + turn}.")
        return calls

    return await asyncio.gather(*(episode(t, m) for t in range(tasks) for m in range(group)))


@pytest.mark.parametrize("sampling_of", [
    lambda i: SamplingParams(max_tokens=10, temperature=0.0),
    lambda i: SamplingParams(max_tokens=10, temperature=1.0, top_p=0.9, seed=100 + i),
], ids=["greedy", "seeded"])
async def test_prefix_cache_gives_the_same_tokens_and_logprobs_as_no_cache(engine, sampling_of):
    cached = HFEngine(engine.model, engine.tokenizer, prefix_cache_mb=64)
    plain = HFEngine(engine.model, engine.tokenizer, prefix_cache_mb=0)
    with_cache = await tool_agent_episodes(cached, sampling_of)
    without = await tool_agent_episodes(plain, sampling_of)
    worst = 0.0
    for episode_a, episode_b in zip(with_cache, without):
        for (prompt_a, a), (prompt_b, b) in zip(episode_a, episode_b):
            assert prompt_a == prompt_b and a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
            worst = max(worst, max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)))
    # Float32 throughout. The cache changes only how attention sums are split (prefix computed in another
    # pass, other padding), the same kind of change batching already makes: a padded batch differs from a
    # lone forward pass by ~1e-6 here. 1e-5 leaves room for that and would catch any real difference
    # (a wrong position or a stale KV moves logprobs by 1e-2 or more on this model).
    assert worst < 1e-5
    assert cached.stats.prompt_tokens == plain.stats.prompt_tokens == plain.stats.prefilled_tokens
    # Computed once: the system prompt, each task's question, each turn's new tail. The rest came from the cache.
    assert cached.stats.prefilled_tokens < 0.2 * plain.stats.prefilled_tokens
    assert cached.prefix_cache.stats.hit_tokens > 0 and cached.prefix_cache.nbytes <= 64 * 2**20


async def test_the_cache_is_dropped_when_the_weights_change(tiny_model_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()  # its own copy: weights change here
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    cached = HFEngine(model, tok, prefix_cache_mb=64)
    prompt = tok.encode(SYSTEM + "User: what is the price in Boston?")

    async def reference():
        return await HFEngine(model, tok, prefix_cache_mb=0).generate(prompt, greedy(8))

    before = await cached.generate(prompt, greedy(8))
    assert cached.prefix_cache.tokens >= len(prompt)
    values = [layer.self_attn.v_proj.weight for layer in model.model.layers]
    with cached.lock, torch.no_grad():  # the trainer's way: update under the lock, then bump the version
        for weight in values:
            weight.mul_(3)
    cached.weights_version += 1
    after, expected = await cached.generate(prompt, greedy(8)), await reference()
    assert after.token_ids == expected.token_ids
    assert max(abs(x - y) for x, y in zip(after.logprobs, expected.logprobs)) < 1e-5
    assert max(abs(x - y) for x, y in zip(after.logprobs, before.logprobs)) > 1e-2  # stale KV would show
    # An in-place update nobody announced (no version bump) is caught by torch's version counters.
    with torch.no_grad():
        values[0].mul_(0.5)
    again, expected = await cached.generate(prompt, greedy(8)), await reference()
    assert max(abs(x - y) for x, y in zip(again.logprobs, expected.logprobs)) < 1e-5
    assert max(abs(x - y) for x, y in zip(again.logprobs, after.logprobs)) > 1e-2
    assert cached.prefix_cache.stats.clears == 2


async def test_autocast_runs_the_model_in_bfloat16_with_float32_logprobs(engine, prompts):
    from ajet.trainer.logprobs import token_logprobs

    dtypes, weights = [], []
    head = engine.model.lm_head
    weight = head.weight

    def record(module, args, out):
        dtypes.append(out.dtype)
        weights.append(module.weight.dtype)

    hook = head.register_forward_hook(record)
    try:
        mixed = HFEngine(engine.model, engine.tokenizer, autocast_dtype="bfloat16", pack_weights=False)
        sampling = SamplingParams(max_tokens=8, temperature=1.0, seed=5)
        gen = await mixed.generate(prompts[2], sampling)
    finally:
        hook.remove()
    assert mixed.autocast_dtype == torch.bfloat16 and set(dtypes) == {torch.bfloat16}
    # The engine ran with bf16 copies of the Linear weights (no cast per step); the model's own are as they were.
    assert set(weights) == {torch.bfloat16} and head.weight is weight and weight.dtype == torch.float32
    assert engine.model.model.embed_tokens.weight is weight  # the tied embedding kept its float32 table
    recast = HFEngine(engine.model, engine.tokenizer, autocast_dtype="bfloat16", pack_weights=False)
    recast.runner.step_weights.swapped = lambda **_: contextlib.nullcontext()  # autocast casting the float32 weights each call
    same = await recast.generate(prompts[2], sampling)
    assert same.token_ids == gen.token_ids and same.logprobs == gen.logprobs  # the very same numbers
    full = await HFEngine(engine.model, engine.tokenizer).generate(prompts[2], SamplingParams(max_tokens=8, seed=5))
    ids = torch.tensor([prompts[2] + gen.token_ids])
    loss_mask = torch.zeros_like(ids)
    loss_mask[0, len(prompts[2]):] = 1
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):  # what the trainer recomputes
        trainer = token_logprobs(engine.model, ids, torch.ones_like(ids), loss_mask)[0, len(prompts[2]):].tolist()
    assert max(abs(a - b) for a, b in zip(gen.logprobs, trainer)) < 5e-3  # bf16 matmuls, float32 log-softmax
    assert gen.logprobs != full.logprobs  # really computed at another precision


def test_build_engine_follows_model_autocast_and_prefix_cache_mb(tiny_model_path):
    from ajet.config.schema import AjetConfig
    from ajet.engine.factory import build_engine

    cfg = AjetConfig(workflow="wf.py:W", model={"path": tiny_model_path, "device": "cpu", "autocast": "bfloat16"},
                     engine={"type": "hf", "prefix_cache_mb": 8})
    built = build_engine(cfg)
    assert built.autocast_dtype == torch.bfloat16 and built.prefix_cache.max_bytes == 8 * 2**20
    cfg.model.autocast = "off"
    assert build_engine(cfg).autocast_dtype is None


def test_cudnn_attention_is_turned_off_for_a_model_on_a_gpu_only(tiny_model_path):
    """cuDNN attention plans each new sequence length anew (every decode step): ajet runs without it on a GPU."""
    from ajet.models import avoid_cudnn_attention

    was = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        HFEngine.from_pretrained(tiny_model_path, device="cpu")
        assert torch.backends.cuda.cudnn_sdp_enabled()  # a CPU model leaves the process's GPU settings alone
        avoid_cudnn_attention(torch.device("cuda"))
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)
