"""HFEngine scheduling on the tiny model: requests join a running batch, cancelled ones leave it, a request
that fails inside the engine fails alone, and the constrained-decoding hook masks what is sampled."""

from __future__ import annotations

import asyncio

import pytest
import torch

from ajet.engine.base import GuidedDecoding, SamplingParams
from ajet.engine.hf import HFEngine
from ajet.errors import EngineError


@pytest.fixture(scope="module")
def engine(tiny_model_path) -> HFEngine:
    return HFEngine.from_pretrained(tiny_model_path, device="cpu", dtype="float32", seed=0)


def encode(engine: HFEngine, text: str) -> list[int]:
    return engine.tokenizer.encode(text)


def greedy(max_tokens: int) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0)


def fresh(engine: HFEngine, **kw) -> HFEngine:
    """An engine on the same model with its own queue, cache and counters."""
    return HFEngine(engine.model, engine.tokenizer, **kw)


async def wait_for_passes(engine: HFEngine, passes: int) -> None:
    while engine.stats.forward_passes < passes:
        await asyncio.sleep(0.001)


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and max((abs(x - y) for x, y in zip(a, b)), default=0.0) < 1e-5


async def test_requests_join_a_running_batch_and_finish_first(engine):
    long_prompt = encode(engine, "A long story about a cat that")
    short_prompt = encode(engine, "Hi")
    longer_prompt = encode(engine, "word " * 60)  # longer than the running row: the batch is padded on the left
    solo = fresh(engine, prefix_cache_mb=0)
    jobs = ((long_prompt, 80), (short_prompt, 5), (longer_prompt, 10))
    expected = [await solo.generate(p, greedy(n)) for p, n in jobs]

    live = fresh(engine, prefix_cache_mb=0)
    running = asyncio.create_task(live.generate(long_prompt, greedy(80)))
    await wait_for_passes(live, 10)  # the long request is decoding
    short = await live.generate(short_prompt, greedy(5))
    assert not running.done()  # joined between decode steps and finished while the long one ran
    longer = await live.generate(longer_prompt, greedy(10))
    assert not running.done()
    result = await running
    assert live.stats.largest_batch == 2 and live.stats.batches == 3
    assert live.stats.forward_passes < 80 + 5 + 10  # joined, not queued: they shared the long one's steps
    for got, want in zip((result, short, longer), expected):
        assert got.token_ids == want.token_ids and close(got.logprobs, want.logprobs)


async def test_a_cancelled_caller_frees_its_row_at_the_next_step(engine):
    live = fresh(engine)
    other_prompt = encode(engine, "Count: one two three")
    expected = await fresh(engine, prefix_cache_mb=0).generate(other_prompt, greedy(30))
    abandoned = asyncio.create_task(live.generate(encode(engine, "Tell me everything"), greedy(2000)))
    other = asyncio.create_task(live.generate(other_prompt, greedy(30)))
    await wait_for_passes(live, 5)
    abandoned.cancel()  # what `ajet serve` does when the client disconnects, or an episode timeout
    with pytest.raises(asyncio.CancelledError):
        await abandoned
    result = await other
    assert result.token_ids == expected.token_ids
    assert live.stats.cancelled == 1
    passes = live.stats.forward_passes
    await asyncio.sleep(0.2)
    assert live.stats.forward_passes == passes < 40  # nothing decodes the abandoned 2000 tokens
    # wait_for's timeout cancels the same way.
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(live.generate(encode(engine, "More"), greedy(2000)), timeout=0.05)
    await asyncio.sleep(0.1)
    assert live.stats.cancelled == 2
    assert len((await live.generate(other_prompt, greedy(3))).token_ids) == 3


async def test_a_request_failing_inside_the_engine_fails_alone(engine):
    live = fresh(engine)
    texts = ["The capital of France is", "Write a poem", "Count: one two", "Hello there, how are"]
    prompts = [encode(engine, t) for t in texts]
    good = [SamplingParams(max_tokens=8, temperature=1.0, seed=i) for i in range(4)]
    expected = [await fresh(engine, prefix_cache_mb=0).generate(p, s) for p, s in zip(prompts, good)]
    bad_seed = SamplingParams(max_tokens=8, temperature=1.0, seed=2**64)  # torch.Generator refuses it
    tiny_temperature = SamplingParams(max_tokens=8, temperature=1e-300)  # logits / T overflow float32
    before = live.stats.batches
    results = await asyncio.gather(
        live.generate(prompts[0], good[0]), live.generate(prompts[1], bad_seed), live.generate(prompts[1], good[1]),
        live.generate(prompts[2], tiny_temperature), live.generate(prompts[2], good[2]),
        live.generate(prompts[3], good[3]), return_exceptions=True)
    assert live.stats.batches == before + 1  # all of them were admitted together
    assert isinstance(results[1], EngineError)
    assert str(results[1]).startswith("seed 18446744073709551616 cannot seed a torch.Generator")
    assert isinstance(results[3], EngineError)
    assert str(results[3]).startswith("temperature 1e-300 gives no valid distribution")
    for got, want in zip([results[0], results[2], results[4], results[5]], expected):
        assert got.token_ids == want.token_ids and close(got.logprobs, want.logprobs)
    assert live.stats.failed == 2


class OnlyThese:
    """A matcher allowing a fixed set of token ids, complete after `k` tokens (the engine's hook interface)."""

    def __init__(self, allowed: list[int], k: int, fail_at: int | None = None):
        self.allowed, self.k, self.fail_at, self.accepted = allowed, k, fail_at, []

    def mask_logits(self, logits_row: torch.Tensor) -> None:
        keep = logits_row[self.allowed].clone()
        logits_row.fill_(float("-inf"))
        logits_row[self.allowed] = keep

    def accept(self, token_id: int) -> None:
        if len(self.accepted) == self.fail_at:
            raise ValueError("matcher broke")
        assert token_id in self.allowed
        self.accepted.append(token_id)

    @property
    def done(self) -> bool:
        return len(self.accepted) >= self.k


def build_only_these(spec: GuidedDecoding, tokenizer, vocab_size: int) -> OnlyThese:
    assert vocab_size == 49152 and tokenizer is not None
    return OnlyThese(**spec.value)


async def test_guided_rows_sample_only_allowed_tokens_and_keep_raw_logprobs(engine):
    live = fresh(engine, build_matcher=build_only_these)
    prompt = encode(engine, "The capital of France is")
    allowed = [1000, 2000, 3000, 4000, 5000]
    free_expected = await fresh(engine, prefix_cache_mb=0).generate(prompt, greedy(6))
    spec = GuidedDecoding(kind="regex", value={"allowed": allowed, "k": 4})
    guided_greedy, guided_sampled, free = await asyncio.gather(
        live.generate(prompt, SamplingParams(max_tokens=10, temperature=0.0, guided=spec)),
        live.generate(prompt, SamplingParams(max_tokens=10, temperature=1.0, seed=1, guided=spec)),
        live.generate(prompt, greedy(6)))
    assert free.token_ids == free_expected.token_ids  # its batch neighbours' constraints did not touch it
    for gen in (guided_greedy, guided_sampled):
        assert len(gen.token_ids) == 4 and set(gen.token_ids) <= set(allowed) and gen.finish_reason == "stop"
        # The recorded logprobs are the raw model's, over the whole vocabulary, not the masked distribution's.
        ids = torch.tensor([prompt + gen.token_ids])
        with torch.inference_mode():
            raw = torch.log_softmax(engine.model(ids).logits[0].float(), dim=-1)
        expected = [raw[len(prompt) - 1 + i, t].item() for i, t in enumerate(gen.token_ids)]
        assert close(gen.logprobs, expected) and max(gen.logprobs) < -5  # far below a masked distribution's
    # Greedy under the mask takes the allowed token the model ranks highest.
    with torch.inference_mode():
        logits = engine.model(torch.tensor([prompt + guided_greedy.token_ids])).logits[0]
    best = [allowed[int(logits[len(prompt) - 1 + i, allowed].argmax())] for i in range(4)]
    assert guided_greedy.token_ids == best


async def test_a_broken_or_impossible_constraint_fails_only_its_request(engine):
    live = fresh(engine, build_matcher=build_only_these)
    prompt = encode(engine, "Hello")
    broken = GuidedDecoding(kind="regex", value={"allowed": [10, 11], "k": 5, "fail_at": 2})
    impossible = GuidedDecoding(kind="regex", value={"allowed": [], "k": 1})
    results = await asyncio.gather(
        live.generate(prompt, SamplingParams(max_tokens=8, temperature=0.0, guided=broken)),
        live.generate(prompt, SamplingParams(max_tokens=8, temperature=0.0, guided=impossible)),
        live.generate(prompt, greedy(8)), return_exceptions=True)
    assert isinstance(results[0], EngineError) and "ValueError('matcher broke')" in str(results[0])
    assert isinstance(results[1], EngineError)
    assert str(results[1]).startswith("constrained decoding left no allowed token")
    assert len(results[2].token_ids) == 8
    unbuildable = fresh(engine, build_matcher=lambda spec, tok, v: OnlyThese(**spec.value))
    with pytest.raises(EngineError, match=r"cannot build the regex constraint for guided decoding: .*unexpected"):
        await unbuildable.generate(prompt, SamplingParams(guided=GuidedDecoding(kind="regex", value={"nope": 1})))
