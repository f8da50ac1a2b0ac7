"""The `hf` engine: a transformers causal LM in this process, with concurrent requests batched.

`await engine.generate(prompt_ids, sampling)` puts the request on an asyncio queue. One worker task
takes what is waiting (up to `max_batch_size`, grouping prompts whose lengths keep padding bounded),
left-pads it and runs ONE prefill + decode loop for the whole batch with the KV cache, in a
dedicated thread so the event loop stays responsive. Requests arriving meanwhile wait for the next
batch. Rows that finish are dropped from the cache, so a long completion does not make short ones
pay for its steps.

Per request: greedy when `temperature == 0`, else temperature + top-p sampling with its own
`torch.Generator` (seeded from `sampling.seed`, or drawn from the engine's `seed`). `logprobs[i]` is
the log-softmax of the RAW logits (temperature 1, no top-p) at the chosen token, what the trainer
recomputes. A completion stops after an EOS id or a `stop_token_ids` id (the id is included), when a
`stop` string completes (tokens are cut after the token that completes it; the text cut is the
caller's), or at `max_tokens` (finish 'length').

The trainer shares `engine.model` and updates it in place: hold `engine.lock` while doing so, and
bump `engine.weights_version` after.
"""

from __future__ import annotations

import asyncio
import copy
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ajet.engine.base import Engine, FinishReason, Generation, SamplingParams
from ajet.errors import EngineError, ModelError


@dataclass
class EngineStats:
    """Counters of an HFEngine, for tests, benchmarks and reports."""

    requests: int = 0
    batches: int = 0
    forward_passes: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    largest_batch: int = 0


@dataclass
class _Request:
    prompt_ids: list[int]
    sampling: SamplingParams
    future: asyncio.Future
    seed: int


@dataclass
class _Row:
    """Decoding state of one request inside a batch."""

    request: _Request
    max_tokens: int
    stop_ids: frozenset[int]
    generator: Any = None  # torch.Generator when sampling
    window: int = 0  # tokens decoded to look for stop strings
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: FinishReason | None = None


class HFEngine(Engine):
    """Batched in-process generation with a transformers model (CPU or CUDA, device of the model).

    `max_padding` bounds the padding a batch may hold: prompts are grouped while the pad tokens stay
    under this fraction of the padded prompt block (prompts within 16 tokens of each other always go
    together).
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
    ):
        if max_batch_size < 1:
            raise EngineError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name or _name_of(model)
        self.max_batch_size = max_batch_size
        self.max_padding = max_padding
        self.seed = seed
        self.weights_version = 0  # the trainer bumps it after updating weights in place
        self.lock = threading.RLock()  # held while the model runs; take it to update weights
        self.stats = EngineStats()
        self.eos_ids = _eos_ids(model, tokenizer)
        self.vocab_size = int(model.get_input_embeddings().num_embeddings)
        self.max_positions = _max_positions(model)
        self._pad_id = _pad_id(tokenizer, self.eos_ids)
        self._seeds = random.Random(seed)
        self._executor: ThreadPoolExecutor | None = None
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        self._worker_loop: asyncio.AbstractEventLoop | None = None
        self._logits_to_keep = True  # cleared if the model's forward does not take it
        self._decoder: Any = None  # the worker thread's own tokenizer copy, for stop strings

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
        **model_kwargs: Any,
    ) -> HFEngine:
        """Load a model folder (or 'tiny-random' / 'smollm2-135m-instruct' / a hub id) onto a device.

        device: 'auto' (CUDA when available), 'cpu', 'cuda' or 'cuda:N'. dtype: 'auto' (bfloat16 on
        CUDA when supported, float32 on CPU), 'float32', 'bfloat16' or 'float16'.
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from ajet.models import resolve_model_path

        local = resolve_model_path(path)
        torch_device = _resolve_device(device)
        torch_dtype = _resolve_dtype(dtype, torch_device)
        try:
            tokenizer = AutoTokenizer.from_pretrained(local)
            model = AutoModelForCausalLM.from_pretrained(local, dtype=torch_dtype, **model_kwargs)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load model {path!r} (from {local!r}): {exc}") from exc
        model.to(torch_device).eval()
        return cls(model, tokenizer, max_batch_size=max_batch_size, seed=seed, model_name=model_name or path)

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

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
        backlog: list[_Request] = []
        batch: list[_Request] = []
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not backlog:
                    backlog.append(await queue.get())
                while not queue.empty():
                    backlog.append(queue.get_nowait())
                backlog = [r for r in backlog if not r.future.done()]  # callers that gave up (timeouts)
                if not backlog:
                    continue
                batch = self._take_batch(backlog)
                try:
                    results = await loop.run_in_executor(self._executor, self._run_batch, batch)
                except Exception as exc:  # noqa: BLE001 - every request of the failed batch gets the error
                    error = exc if isinstance(exc, EngineError) else EngineError(f"generation failed: {exc!r}")
                    _fail(batch, error)
                    continue
                for request, result in zip(batch, results):
                    if not request.future.done():
                        request.future.set_result(result)
        except asyncio.CancelledError:  # close(): nobody may wait forever on a request taken off the queue
            _fail(batch + backlog, EngineError("the engine was closed before this request finished"))
            raise

    def _take_batch(self, backlog: list[_Request]) -> list[_Request]:
        """The oldest request plus the waiting ones closest to its length that keep padding bounded."""
        anchor = backlog[0]
        size = len(anchor.prompt_ids)
        others = sorted(backlog[1:], key=lambda r: abs(len(r.prompt_ids) - size))
        batch, lengths = [anchor], [size]
        for request in others:
            if len(batch) >= self.max_batch_size:
                break
            if self._padding_ok(lengths + [len(request.prompt_ids)]):
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
        if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
            raise EngineError(
                f"temperature must be >= 0 and top_p in (0, 1]; got {sampling.temperature}, {sampling.top_p}")

    # ------------------------------------------------------------------ torch side (worker thread)
    def _run_batch(self, batch: list[_Request]) -> list[Generation]:
        import torch

        with self.lock, torch.inference_mode():
            was_training = self.model.training
            self.model.eval()  # dropout off while generating; the trainer's mode is restored after
            try:
                rows = [self._new_row(r) for r in batch]
                self._decode(rows)
            finally:
                if was_training:
                    self.model.train()
        stats = self.stats
        stats.batches += 1
        stats.requests += len(batch)
        stats.largest_batch = max(stats.largest_batch, len(batch))
        stats.prompt_tokens += sum(len(r.prompt_ids) for r in batch)
        stats.generated_tokens += sum(len(row.token_ids) for row in rows)
        return [Generation(row.token_ids, row.logprobs, row.finish or "length") for row in rows]

    def _new_row(self, request: _Request) -> _Row:
        import torch

        sampling = request.sampling
        room = sampling.max_tokens
        if self.max_positions is not None:
            room = min(room, self.max_positions - len(request.prompt_ids))
        row = _Row(request, max_tokens=room, stop_ids=frozenset(self.eos_ids) | frozenset(sampling.stop_token_ids))
        if sampling.temperature > 0:
            row.generator = torch.Generator(device=self.device).manual_seed(request.seed)
        if sampling.stop:
            # A stop string of n characters spans at most ~4n byte-level tokens (multi-byte characters).
            row.window = 4 * max(len(s) for s in sampling.stop) + 4
        return row

    def _decode(self, rows: list[_Row]) -> None:
        """Prefill the left-padded prompts, then one decode step per token for the rows still running."""
        import torch
        from transformers import DynamicCache

        device = self.device
        longest = max(len(row.request.prompt_ids) for row in rows)
        input_ids = torch.full((len(rows), longest), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for i, row in enumerate(rows):
            ids = row.request.prompt_ids
            input_ids[i, longest - len(ids):] = torch.tensor(ids, dtype=torch.long)
            mask[i, longest - len(ids):] = 1
        input_ids, mask = input_ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, L): pads at 0, real tokens 0..n-1
        cache = DynamicCache(config=self.model.config)
        active = list(range(len(rows)))  # indices into `rows` of the cache's batch rows
        while True:
            logits = self._forward(input_ids, mask, positions, cache)  # (b, V) float32
            tokens, logprobs = self._pick(logits, [rows[i] for i in active])
            keep = [j for j, i in enumerate(active) if not self._append(rows[i], tokens[j], logprobs[j])]
            if not keep:
                return
            if len(keep) < len(active):
                index = torch.tensor(keep, dtype=torch.long, device=device)
                cache.batch_select_indices(index)
                mask, positions = mask[index], positions[index]
                active = [active[j] for j in keep]
            input_ids = torch.tensor([[tokens[j]] for j in keep], dtype=torch.long, device=device)
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            positions = positions[:, -1:] + 1

    def _forward(self, input_ids: Any, mask: Any, positions: Any, cache: Any) -> Any:
        kwargs = dict(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                      past_key_values=cache, use_cache=True)
        self.stats.forward_passes += 1
        if self._logits_to_keep:
            try:
                # Only the last position's logits: a (B, L, V) prefill tensor can be gigabytes.
                return self.model(**kwargs, logits_to_keep=1).logits[:, -1, :].float()
            except TypeError:
                self._logits_to_keep = False
        return self.model(**kwargs).logits[:, -1, :].float()

    def _pick(self, logits: Any, rows: list[_Row]) -> tuple[list[int], list[float]]:
        """Choose one token per row (greedy or sampled) and its raw logprob."""
        import torch

        log_norm = torch.logsumexp(logits, dim=-1)  # (b,): logits - log_norm is the temperature-1 log-softmax
        sampled = [j for j, row in enumerate(rows) if row.generator is not None]
        if len(sampled) < len(rows):
            tokens = logits.argmax(dim=-1)  # (b,) greedy rows
        else:
            tokens = torch.zeros(len(rows), dtype=torch.long, device=logits.device)
        if sampled:
            index = torch.tensor(sampled, device=logits.device)
            temps = [rows[j].request.sampling.temperature for j in sampled]
            scaled = logits[index]  # (s, V)
            if any(t != 1.0 for t in temps):
                scaled = scaled / torch.tensor(temps, device=logits.device, dtype=logits.dtype)[:, None]
            probs = torch.softmax(scaled, dim=-1)  # (s, V)
            top_p = [rows[j].request.sampling.top_p for j in sampled]
            if min(top_p) < 1.0:
                probs = _top_p_filter(probs, torch.tensor(top_p, device=logits.device, dtype=probs.dtype))
            tokens[index] = _sample_rows(probs, [rows[j].generator for j in sampled])
        chosen = logits.gather(1, tokens[:, None])[:, 0] - log_norm  # (b,)
        return tokens.tolist(), chosen.tolist()

    def _append(self, row: _Row, token: int, logprob: float) -> bool:
        """Add one token to a row; True when the row is finished."""
        row.token_ids.append(token)
        row.logprobs.append(logprob)
        if token in row.stop_ids:
            row.finish = "stop"
        elif row.window and self._stop_string_completed(row):
            row.finish = "stop"
        elif len(row.token_ids) >= row.max_tokens:
            row.finish = "length"
        return row.finish is not None

    def _stop_string_completed(self, row: _Row) -> bool:
        if self._decoder is None:
            # A private copy: a fast tokenizer used from two threads at once can fail ("Already
            # borrowed") when the other thread changes its padding or truncation settings.
            self._decoder = copy.deepcopy(self.tokenizer)
        # Earlier occurrences would have stopped an earlier step, so any match in the tail ends here.
        tail = self._decoder.decode(row.token_ids[-row.window:], skip_special_tokens=False)
        return any(s and s in tail for s in row.request.sampling.stop)


def _fail(requests: list[_Request], error: Exception) -> None:
    for request in requests:
        if not request.future.done():
            request.future.set_exception(error)


def _sample_rows(probs: Any, generators: list[Any]) -> Any:
    """One token per row of `probs` (s, V) by inverse-CDF sampling, one uniform draw from each row's generator.

    torch.multinomial's one-sample path is an exponential race that draws V random numbers per row:
    ~1 ms per row for a 49k vocabulary on a CPU, 30-100 ms per 32-row decode step (far more when the
    cores are contended) against ~1-3 ms here. A zero-probability token adds nothing to the cumulative
    sum, so it is never picked.
    """
    import torch

    cdf = probs.cumsum(dim=-1, dtype=torch.float64)  # (s, V): float64 keeps rounding far below any token's mass
    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64, device=probs.device) for g in generators])  # (s,)
    total = cdf[:, -1]
    point = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))  # strictly below the total
    return torch.searchsorted(cdf, point[:, None], right=True)[:, 0]  # first index whose cdf exceeds the point


def _top_p_filter(probs: Any, top_p: Any) -> Any:
    """Zero the tail of each row's distribution beyond cumulative mass top_p (the top token always stays)."""
    import torch

    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (s, V)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p[:, None], 0.0)
    return torch.zeros_like(probs).scatter_(1, order, sorted_probs)


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every EOS id the tokenizer, the generation config and the model config name."""
    found: set[int] = set()
    sources = [getattr(tokenizer, "eos_token_id", None),
               getattr(getattr(model, "generation_config", None), "eos_token_id", None),
               getattr(getattr(model, "config", None), "eos_token_id", None)]
    for value in sources:
        if isinstance(value, int):
            found.add(value)
        elif isinstance(value, (list, tuple)):
            found.update(v for v in value if isinstance(v, int))
    return found


def _pad_id(tokenizer: Any, eos_ids: set[int]) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    if isinstance(pad, int):
        return pad
    return min(eos_ids) if eos_ids else 0  # any id works: padded positions are masked out


def _max_positions(model: Any) -> int | None:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def _name_of(model: Any) -> str:
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or "ajet-policy"
    return str(name)


def _resolve_device(device: str) -> Any:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {device!r} was requested but CUDA is not available; use device: cpu or auto")
    return torch.device(device)


def _resolve_dtype(dtype: str, device: Any) -> Any:
    import torch

    if dtype == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in table:
        raise ModelError(f"dtype {dtype!r} is not one of auto, {', '.join(table)}")
    return table[dtype]
