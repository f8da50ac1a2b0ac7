"""The `hf` engine: a transformers causal LM in this process, with concurrent requests batched.

`await engine.generate(prompt_ids, sampling)` puts the request on an asyncio queue. One worker task
runs the engine step by step on a dedicated thread (`stepper.Stepper`, working on the model's
`model_runner.ModelRunner`), so the event loop stays responsive: each step decodes one token for
every running row, and requests that arrived since the last step join the running batch (continuous
batching) after a prefill that starts from the longest prefix whose KV is already cached
(`kv_cache.PrefixCache`). Rows leave the batch when they finish, fail, or their caller stops waiting
(a cancelled `generate` frees its row at the next step).

Per request: greedy when `temperature == 0`, else temperature + top-p sampling with its own
`torch.Generator` (seeded from `sampling.seed`, or drawn from the engine's `seed`). `logprobs[i]` is
the log-softmax of the RAW logits (temperature 1, no top-p, no grammar mask) at the chosen token,
in float32: what the trainer recomputes. A completion stops after an EOS id or a `stop_token_ids`
id (the id is included), when a `stop` string completes (tokens are cut after the token that
completes it; the text cut is the caller's), when a `guided` grammar is complete, or at
`max_tokens` (finish 'length'). A request that fails inside the engine fails alone.

The trainer shares `engine.model` and updates it in place: hold `engine.lock` while doing so (a
step holds it while it runs), and bump `engine.weights_version` after (the prefix cache is dropped
then). Rows that are mid-completion during an update finish with the new weights.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.engine.batch import RunningBatch
from ajet.engine.model_runner import ModelRunner
from ajet.engine.stepper import Stepper
from ajet.errors import EngineError


@dataclass
class _Request:
    prompt_ids: list[int]
    sampling: SamplingParams
    future: asyncio.Future
    seed: int


class HFEngine(Engine):
    """Batched in-process generation with a transformers model (CPU or CUDA, device of the model).

    max_padding: bounds the padding a batch may hold: requests join while the pad tokens stay under
        this fraction of the padded block (lengths within 16 tokens of each other always go together).
    autocast_dtype: run forward passes under torch.autocast to this dtype (torch dtype or its name;
        None: the weights' own). The trainer's rule, `model.autocast`; logprobs stay float32.
    prefix_cache_mb: most memory the prefix KV cache keeps (MiB); 0 turns the cache off.
    build_matcher: `(guided, tokenizer, vocab_size) -> matcher` for `SamplingParams.guided`
        (default: `ajet.engine.guided.build_matcher`).
    fold_lora: run a LoRA model's own adapter folded into copies of its base weights, one matmul per
        layer instead of three (`precision.StepWeights`); True, False or 'auto' (float32 passes, copies up
        to 1 GiB: where folding gives peft's numbers).
    pack_weights: on a CPU, run the Linear layers from weights laid out once for oneDNN instead of
        MKL repacking them at every call (`packed.PackedLinear`); True, False or 'auto' (on a CPU, copies
        up to 2 GiB).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 16,
        seed: int = 0,
        max_padding: float = 0.5,
        model_name: str | None = None,
        autocast_dtype: Any = None,
        prefix_cache_mb: float = 1024,
        build_matcher: Callable[..., Any] | None = None,
        fold_lora: bool | str = "auto",
        pack_weights: bool | str = "auto",
    ):
        if max_batch_size < 1:
            raise EngineError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if not prefix_cache_mb >= 0:
            raise EngineError(f"prefix_cache_mb must be >= 0 (0 turns the cache off), got {prefix_cache_mb}")
        self.runner = ModelRunner(model, tokenizer, autocast_dtype=autocast_dtype, prefix_cache_mb=prefix_cache_mb,
                                  build_matcher=build_matcher, fold_lora=fold_lora, pack_weights=pack_weights)
        self.model_name = model_name or _name_of(model)
        self.max_batch_size = max_batch_size
        self.max_padding = max_padding
        self.seed = seed
        self._seeds = random.Random(seed)
        self._executor: ThreadPoolExecutor | None = None
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        self._worker_loop: asyncio.AbstractEventLoop | None = None

    # The model and what its passes share live on `self.runner` (model_runner.py), read there by the
    # worker thread's steps; the engine shows them under the names its users know.
    model = property(lambda self: self.runner.model)
    tokenizer = property(lambda self: self.runner.tokenizer)
    lock = property(lambda self: self.runner.lock, doc="held while a step runs; take it to update weights")
    stats = property(lambda self: self.runner.stats, doc="counters (model_runner.EngineStats)")
    eos_ids = property(lambda self: self.runner.eos_ids)
    vocab_size = property(lambda self: self.runner.vocab_size)
    max_positions = property(lambda self: self.runner.max_positions)
    prefix_cache = property(lambda self: self.runner.prefix_cache)
    adapters = property(lambda self: self.runner.adapters)
    device = property(lambda self: self.runner.device)

    @property
    def weights_version(self) -> int:
        """The trainer bumps it after updating weights in place (the prefix cache is dropped then)."""
        return self.runner.weights_version

    @weights_version.setter
    def weights_version(self, value: int) -> None:
        self.runner.weights_version = value

    @classmethod
    def from_pretrained(
        cls,
        path: str,
        device: str = "auto",
        dtype: str = "auto",
        *,
        max_batch_size: int = 16,
        seed: int = 0,
        model_name: str | None = None,
        prefix_cache_mb: float = 1024,
        autocast: str = "auto",
        pack_weights: bool | str = "auto",
        **model_kwargs: Any,
    ) -> HFEngine:
        """Load a model folder (or 'tiny-random' / 'smollm2-135m-instruct' / a hub id) onto a device.

        device: 'auto' (CUDA when available), 'cpu', 'cuda' or 'cuda:N'. dtype: 'auto' (bfloat16 on
        CUDA when supported, float32 on CPU), 'float32', 'bfloat16' or 'float16'. autocast: 'auto',
        'off' or 'bfloat16', resolved by the rule training uses (`model.autocast`).
        """
        from ajet.models import load_causal_lm, resolve_autocast

        model, tokenizer = load_causal_lm(path, device, dtype, **model_kwargs)
        weights = next(model.parameters())
        size = sum(p.numel() for p in model.parameters())
        precision = resolve_autocast(autocast, weights.device, weights.dtype, size)
        return cls(model, tokenizer, max_batch_size=max_batch_size, seed=seed, model_name=model_name or path,
                   prefix_cache_mb=prefix_cache_mb, autocast_dtype=precision, pack_weights=pack_weights)

    @property
    def autocast_dtype(self) -> Any:
        return self.runner.autocast_dtype

    @autocast_dtype.setter
    def autocast_dtype(self, value: Any) -> None:
        self.runner.autocast_dtype = value

    def release_caches(self) -> None:
        self.runner.release_caches()

    # ------------------------------------------------------------------ adapters
    def load_adapter(self, name: str, path: str | Path) -> None:
        """Serve the peft LoRA adapter saved in `path` to requests with `SamplingParams.adapter == name`.

        Loading under a name already loaded replaces it. Blocks until no step runs (call it through
        `asyncio.to_thread` from async code)."""
        with self.lock:
            self.adapters.load(name, path)
            self.runner.modules_changed()
            self.prefix_cache.clear(name)

    def unload_adapter(self, name: str) -> None:
        """Stop serving adapter `name`; requests still naming it fail with EngineError."""
        with self.lock:
            self.adapters.unload(name)
            self.runner.modules_changed()
            self.prefix_cache.clear(name)

    # ------------------------------------------------------------------ async side
    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        self._check(prompt_ids, sampling)
        if sampling.max_tokens <= 0:
            return Generation(token_ids=[], logprobs=[], finish_reason="length")
        self._ensure_worker()
        loop = asyncio.get_running_loop()
        seed = sampling.seed if sampling.seed is not None else self._seeds.getrandbits(62)
        request = _Request(list(prompt_ids), sampling, loop.create_future(), seed)
        self._queue.put_nowait(request)  # type: ignore[union-attr]
        # Cancelling the caller cancels this future too: the worker drops the row at its next step.
        return await request.future

    async def start(self) -> None:
        self._ensure_worker()

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done():
            worker.cancel()
            try:
                await worker
            except (asyncio.CancelledError, Exception):  # the worker's end is not the caller's error
                pass
        if self._queue is not None:
            while not self._queue.empty():
                request = self._queue.get_nowait()
                if not request.future.done():
                    request.future.set_exception(EngineError("the engine was closed before this request ran"))
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    def _ensure_worker(self) -> None:
        loop = asyncio.get_running_loop()
        # A new event loop (e.g. one per test, or asyncio.run called twice) needs its own queue and worker.
        if self._worker is None or self._worker.done() or self._worker_loop is not loop:
            self._queue = asyncio.Queue()
            self._worker_loop = loop
            self._worker = loop.create_task(self._work(self._queue), name="ajet-hf-engine")
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ajet-hf-engine")

    async def _work(self, queue: asyncio.Queue) -> None:
        """Step the engine while anything runs or waits; between steps, admit arrivals and drop the abandoned."""
        loop = asyncio.get_running_loop()
        batch, stepper = RunningBatch(), Stepper(self.runner)
        waiting: list[_Request] = []
        running: list[tuple[_Request, int]] = []  # rows decoding, with their lengths, as of the last step
        admit: list[_Request] = []
        try:
            while True:
                if not waiting and not running:
                    waiting.append(await queue.get())
                while not queue.empty():
                    waiting.append(queue.get_nowait())
                waiting = [r for r in waiting if not r.future.done()]  # callers that gave up while waiting
                drop = [r for r, _ in running if r.future.done()]  # ... or while decoding
                admit = self._take_batch(waiting, running)
                if not admit and not running:
                    continue
                try:
                    outcome = await loop.run_in_executor(self._executor, stepper.step, batch, admit, drop)
                except Exception as exc:  # noqa: BLE001 - a bug in a step: fail its requests, keep serving
                    error = EngineError(f"generation failed: {exc!r}")
                    _fail(admit + [r for r, _ in running], error)
                    batch, running, admit = RunningBatch(), [], []
                    continue
                running, admit = outcome.running, []
                for request, generation in outcome.done:
                    if not request.future.done():
                        request.future.set_result(generation)
                _fail([r for r, _ in outcome.failed], None, errors=[e for _, e in outcome.failed])
        except asyncio.CancelledError:  # close(): nobody may wait forever on a request taken off the queue
            closed = EngineError("the engine was closed before this request finished")
            _fail(waiting + admit + [r for r, _ in running], closed)
            raise

    def _take_batch(self, backlog: list[_Request], running: list[tuple[_Request, int]] | tuple = ()) -> list[_Request]:
        """The requests of `backlog` to start now: the oldest, plus the waiting ones closest to its length,
        while the batch has room, shares one adapter and padding stays bounded (running rows included).
        When the oldest does not fit the running batch, nothing starts until that batch drains."""
        room = self.max_batch_size - len(running)
        if room <= 0 or not backlog:
            return []
        anchor = backlog[0]
        lengths = [n for _, n in running]
        adapter = running[0][0].sampling.adapter if running else anchor.sampling.adapter
        if running and (anchor.sampling.adapter != adapter or not self._padding_ok(lengths + [len(anchor.prompt_ids)])):
            return []
        size = len(anchor.prompt_ids)
        batch = [anchor]
        lengths.append(size)
        for request in sorted(backlog[1:], key=lambda r: abs(len(r.prompt_ids) - size)):
            if len(batch) >= room:
                break
            if request.sampling.adapter == adapter and self._padding_ok(lengths + [len(request.prompt_ids)]):
                batch.append(request)
                lengths.append(len(request.prompt_ids))
        taken = {id(r) for r in batch}
        backlog[:] = [r for r in backlog if id(r) not in taken]
        return batch

    def _padding_ok(self, lengths: list[int]) -> bool:
        longest = max(lengths)
        if longest - min(lengths) <= 16:
            return True
        pad = sum(longest - n for n in lengths)
        return pad <= self.max_padding * longest * len(lengths)

    def _check(self, prompt_ids: list[int], sampling: SamplingParams) -> None:
        if not prompt_ids:
            raise EngineError("the prompt is empty; send at least one token id")
        if min(prompt_ids) < 0 or max(prompt_ids) >= self.vocab_size:
            bad = [t for t in prompt_ids if not 0 <= t < self.vocab_size]
            raise EngineError(f"prompt has token ids outside the vocabulary [0, {self.vocab_size}): {bad[:5]}")
        if self.max_positions is not None and len(prompt_ids) >= self.max_positions:
            raise EngineError(
                f"prompt is {len(prompt_ids)} tokens; the model takes at most {self.max_positions} "
                "(prompt + completion): shorten the prompt")
        if not (sampling.temperature >= 0 and 0 < sampling.top_p <= 1):  # `not >=` also refuses NaN
            raise EngineError(
                f"temperature must be >= 0 and top_p in (0, 1]; got {sampling.temperature}, {sampling.top_p}")
        if sampling.adapter is not None and sampling.adapter not in self.adapters.loaded:
            raise EngineError(f"adapter {sampling.adapter!r} is not loaded; loaded: "
                              f"{sorted(self.adapters.loaded) or 'none'} (engine.load_adapter(name, path) first)")


def _fail(requests: list[_Request], error: Exception | None, errors: list[Exception] | None = None) -> None:
    """Fail each request (not already done) with `error`, or with its own of `errors`."""
    for i, request in enumerate(requests):
        if not request.future.done():
            request.future.set_exception(error if errors is None else errors[i])


def _name_of(model: Any) -> str:
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or "ajet-policy"
    return str(name)
