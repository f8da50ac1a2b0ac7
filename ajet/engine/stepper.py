"""The torch side of the hf engine: one scheduling step, run on the engine's worker thread.

A step (1) drops rows whose callers went away, (2) decodes one token for every running row and
(3) prefills the requests admitted this step, which then join the running batch. Prefill reuses
the prefix KV cache (`kv_cache.PrefixCache`): each prompt starts from its longest cached prefix
and only the rest runs through the model. Within one admission group, a prefix all prompts share
is computed once first, and identical prompts (a GRPO group) are computed once and copied.

Prompts of a group start from cached prefixes of different lengths, so the group's forward pass is
laid out as [pad | cached prefix | pad | new tokens] per row, positions given explicitly; the
result is then compacted to right-aligned rows before joining the batch.

What is cached: every prompt after its prefill, and every finished completion (prompt + generated
tokens whose KV exists), so the next turn of an episode prefills only its new messages. A row
computed under older weights is never cached; the whole cache is dropped when the weights change
(`engine.weights_version` is bumped, or any parameter is modified in place: torch's version counters).
"""

from __future__ import annotations

import copy
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ajet.engine.base import Generation
from ajet.engine.batch import BatchCache, LayerKV, Row, RunningBatch
from ajet.engine.kv_cache import PrefixMatch
from ajet.engine.sampling import pick_tokens
from ajet.errors import EngineError

if TYPE_CHECKING:
    from ajet.engine.hf import HFEngine

# A prefix shared by the prompts of one admission group gets its own forward pass only when it is
# at least this long: below that, recomputing it per prompt costs less than one more pass.
MIN_SHARED_PREFIX = 32


@dataclass
class StepOutcome:
    done: list[tuple[Any, Generation]] = field(default_factory=list)  # (request, its completion)
    failed: list[tuple[Any, Exception]] = field(default_factory=list)
    running: list[tuple[Any, int]] = field(default_factory=list)  # (request, tokens so far) still decoding


class Stepper:
    """Runs steps for one engine: reads its model, cache, settings and counters."""

    def __init__(self, engine: HFEngine):
        self.engine = engine

    def step(self, batch: RunningBatch, admit: list[Any], drop: list[Any]) -> StepOutcome:
        import torch

        engine, out = self.engine, StepOutcome()
        with engine.lock, torch.inference_mode():
            engine._sync_cache_version()
            if drop:
                self._drop(batch, drop)
            if not batch.rows and not admit:
                return out  # nothing to compute: leave the model's mode alone (a trainer may be using it)
            adapter = batch.adapter if batch.rows else (admit[0].sampling.adapter if admit else None)
            with ExitStack() as stack:
                try:
                    stack.enter_context(engine._running_mode(adapter))
                except EngineError as exc:  # e.g. the adapter was unloaded meanwhile
                    for row in batch.rows:
                        out.failed.append((row.request, exc))
                    out.failed += [(r, exc) for r in admit]
                    batch.keep([])
                    return out
                if batch.rows:
                    self._decode(batch, out)
                if admit:
                    batch.adapter = adapter
                    self._admit(batch, admit, out)
        engine.stats.largest_batch = max(engine.stats.largest_batch, len(batch))
        out.running = [(row.request, len(row.prompt_ids) + len(row.token_ids)) for row in batch.rows]
        return out

    # ------------------------------------------------------------------ decode
    def _drop(self, batch: RunningBatch, drop: list[Any]) -> None:
        gone = {id(r) for r in drop}
        keep = [i for i, row in enumerate(batch.rows) if id(row.request) not in gone]
        self.engine.stats.cancelled += len(batch.rows) - len(keep)
        if len(keep) < len(batch.rows):
            batch.keep(keep)

    def _decode(self, batch: RunningBatch, out: StepOutcome) -> None:
        engine = self.engine
        ids, mask, positions = batch.step_inputs(engine.device)  # (B, 1), (B, T), (B, 1)
        try:
            logits = engine._forward(ids, mask, positions, batch.cache)  # (B, V) float32
        except Exception as exc:  # noqa: BLE001 - a failed forward pass fails the rows it was for
            error = EngineError(f"generation failed: {exc!r}")
            out.failed += [(row.request, error) for row in batch.rows]
            batch.keep([])
            return
        keep = self._choose(batch.rows, logits, out, kv_of_row=batch.row_kv)
        if len(keep) < len(batch.rows):
            batch.keep(keep)

    def _choose(self, rows: list[Row], logits: Any, out: StepOutcome, kv_of_row: Any) -> list[int]:
        """Pick and append one token per row; report finished and failed rows; the indices still running."""
        tokens, logprobs, errors = pick_tokens(logits, rows)
        keep = []
        for j, row in enumerate(rows):
            error = errors.get(j)
            if error is None:
                try:
                    finished = self._append(row, tokens[j], logprobs[j])
                except Exception as exc:  # noqa: BLE001 - a matcher (or stop check) bug fails this request only
                    error = exc if isinstance(exc, EngineError) else EngineError(f"generation failed: {exc!r}")
            if error is not None:
                out.failed.append((row.request, error))
                self.engine.stats.failed += 1
            elif finished:
                self._cache_finished(row, lambda s, e, j=j: kv_of_row(j, s, e))
                out.done.append((row.request, Generation(row.token_ids, row.logprobs, row.finish or "length")))
                self.engine.stats.generated_tokens += len(row.token_ids)
            else:
                keep.append(j)
        return keep

    def _cache_finished(self, row: Row, kv_of: Any) -> None:
        engine = self.engine
        if engine.prefix_cache.enabled and row.version == engine._weights_epoch:
            engine.prefix_cache.insert(_namespace(row), row.computed_ids(), kv_of)

    # ------------------------------------------------------------------ prefill
    def _admit(self, batch: RunningBatch, requests: list[Any], out: StepOutcome) -> None:
        rows = []
        for request in requests:
            try:
                rows.append(self._new_row(request))
            except Exception as exc:  # noqa: BLE001 - a request the engine cannot start fails alone
                out.failed.append((request, exc if isinstance(exc, EngineError) else EngineError(repr(exc))))
                self.engine.stats.failed += 1
        if rows:
            self.engine.stats.batches += 1
            self.engine.stats.requests += len(rows)
            self._prefill_group(batch, rows, out)

    def _prefill_group(self, batch: RunningBatch, rows: list[Row], out: StepOutcome) -> None:
        try:
            kv, mask, logits = self._prefill(rows)  # per layer (b, H, T, D), (b, T), (b, V)
        except Exception as exc:  # noqa: BLE001
            if len(rows) > 1:  # find the request that fails: the others must not fail with it
                for row in rows:
                    self._prefill_group(batch, [row], out)
                return
            out.failed.append((rows[0].request, EngineError(f"prefill failed: {exc!r}")))
            self.engine.stats.failed += 1
            return

        def kv_of_row(j: int, start: int, end: int) -> LayerKV:
            offset = mask.shape[1] - len(rows[j].prompt_ids)
            return [(k[j, :, offset + start:offset + end], v[j, :, offset + start:offset + end]) for k, v in kv]

        keep = self._choose(rows, logits, out, kv_of_row)
        if keep:
            import torch

            index = torch.tensor(keep, dtype=torch.long, device=mask.device)
            batch.add([rows[j] for j in keep], [(k[index], v[index]) for k, v in kv], mask[index])

    def _prefill(self, rows: list[Row]) -> tuple[LayerKV, Any, Any]:
        """Prefill each row's prompt from its longest cached prefix. Returns the right-aligned KV per layer
        (b, H, T, D), mask (b, T) and the last position's logits (b, V)."""
        import torch

        engine, cache = self.engine, self.engine.prefix_cache
        prompts = [row.prompt_ids for row in rows]
        namespace = _namespace(rows[0])
        if cache.enabled:
            distinct: dict[tuple[int, ...], int] = {}
            copy_of = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]  # row -> distinct prompt
            unique = [list(p) for p in distinct]
            if len(unique) > 1:
                self._prefill_shared_prefix(namespace, unique)
            matches = [cache.match(namespace, p[:-1]) for p in unique]  # >= 1 token left to compute
        else:
            copy_of, unique = list(range(len(prompts))), prompts
            matches = [PrefixMatch() for _ in prompts]
        kv, mask, logits = self._forward_from(unique, matches, [cache.gather(m) if m.length else None for m in matches])
        if cache.enabled:
            for j, prompt in enumerate(unique):
                offset = mask.shape[1] - len(prompt)
                cache.insert(namespace, prompt, lambda s, e, j=j, o=offset: [(k[j, :, o + s:o + e], v[j, :, o + s:o + e])
                                                                            for k, v in kv])
        computed = sum(len(p) - m.length for p, m in zip(unique, matches))
        engine.stats.prompt_tokens += sum(len(p) for p in prompts)
        engine.stats.prefilled_tokens += computed
        if len(unique) < len(prompts):
            index = torch.tensor(copy_of, dtype=torch.long, device=mask.device)
            kv = [(k[index], v[index]) for k, v in kv]
            mask, logits = mask[index], logits[index]
        return kv, mask, logits

    def _prefill_shared_prefix(self, namespace: str, prompts: list[list[int]]) -> None:
        """Compute (and cache) the prefix all `prompts` share, once, when it is long enough to pay."""
        engine, cache = self.engine, self.engine.prefix_cache
        shared = min(len(p) for p in prompts) - 1  # every prompt keeps a token of its own to compute
        first = prompts[0]
        for other in prompts[1:]:
            shared = next((i for i in range(shared) if other[i] != first[i]), shared)
        found = cache.match(namespace, first[:shared])
        if shared - found.length < MIN_SHARED_PREFIX:
            return
        kv, mask, _ = self._forward_from([first[:shared]], [found], [cache.gather(found) if found.length else None])
        cache.insert(namespace, first[:shared], lambda s, e: [(k[0, :, s:e], v[0, :, s:e]) for k, v in kv])
        engine.stats.prefilled_tokens += shared - found.length

    def _forward_from(self, prompts: list[list[int]], matches: list[PrefixMatch],
                      pasts: list[LayerKV | None]) -> tuple[LayerKV, Any, Any]:
        """One forward pass over the uncached part of each prompt, after its cached prefix.

        Layout per row r with p_r cached and n_r new tokens, P = max p, N = max n:
        columns [0, P) hold its prefix right-aligned, [P, P + N) its new tokens right-aligned.
        Returns the KV compacted to right-aligned rows (b, H, L, D) with L = max len, mask (b, L), logits (b, V).
        """
        import torch

        engine, device = self.engine, self.engine.device
        rows = len(prompts)
        cached = [m.length for m in matches]
        new = [len(p) - c for p, c in zip(prompts, cached)]
        width_past, width_new = max(cached), max(new)
        ids = torch.full((rows, width_new), engine._pad_id, dtype=torch.long)  # (b, N)
        mask = torch.zeros((rows, width_past + width_new), dtype=torch.long)  # (b, P + N)
        positions = torch.zeros((rows, width_new), dtype=torch.long)  # (b, N)
        for r, (prompt, c, n) in enumerate(zip(prompts, cached, new)):
            ids[r, width_new - n:] = torch.tensor(prompt[c:], dtype=torch.long)
            mask[r, width_past - c:width_past] = 1
            mask[r, width_past + width_new - n:] = 1
            positions[r, width_new - n:] = torch.arange(c, c + n)
        past_cache = BatchCache(_stack_pasts(pasts, cached, width_past, spare=width_new), length=width_past) if width_past \
            else BatchCache()
        logits = engine._forward(ids.to(device), mask.to(device), positions.to(device), past_cache)
        # Compact: row r's tokens are columns [P - c, P) and [P + N - n, P + N); move them to the right end.
        length = max(len(p) for p in prompts)
        source = torch.zeros((rows, length), dtype=torch.long)  # (b, L): the column each compacted column comes from
        out_mask = torch.zeros((rows, length), dtype=torch.long)
        for r, (c, n) in enumerate(zip(cached, new)):
            cols = list(range(width_past - c, width_past)) + list(range(width_past + width_new - n, width_past + width_new))
            source[r, length - c - n:] = torch.tensor(cols, dtype=torch.long)
            out_mask[r, length - c - n:] = 1
        source = source.to(device)
        kv = [(_take_columns(k, source), _take_columns(v, source)) for k, v in past_cache.tensors()]
        return kv, out_mask.to(device), logits


    # ------------------------------------------------------------------ rows
    def _new_row(self, request: Any) -> Row:
        import torch

        engine, sampling = self.engine, request.sampling
        room = sampling.max_tokens
        if engine.max_positions is not None:
            room = min(room, engine.max_positions - len(request.prompt_ids))
        row = Row(request, max_tokens=room, stop_ids=frozenset(engine.eos_ids) | frozenset(sampling.stop_token_ids),
                  version=engine._weights_epoch)
        if sampling.temperature > 0:
            try:
                row.generator = torch.Generator(device=engine.device).manual_seed(request.seed)
            except (RuntimeError, OverflowError, TypeError, ValueError) as exc:
                raise EngineError(f"seed {request.seed!r} cannot seed a torch.Generator ({exc}); "
                                  "use an integer in [0, 2**64)") from exc
        if sampling.stop:
            # A stop string of n characters spans at most ~4n byte-level tokens (multi-byte characters).
            row.window = 4 * max(len(s) for s in sampling.stop) + 4
        if sampling.guided is not None:
            row.matcher = self._matcher(sampling)
        return row

    def _matcher(self, sampling: Any) -> Any:
        build = self.engine._build_matcher
        if build is None:
            try:
                from ajet.engine.guided import build_matcher as build
            except ImportError as exc:
                raise EngineError(f"guided decoding needs ajet.engine.guided, which cannot be imported: {exc}") from exc
        try:
            return build(sampling.guided, self._tokenizer(), self.engine.vocab_size)
        except EngineError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bad schema or grammar fails its own request
            kind = getattr(sampling.guided, "kind", "?")
            raise EngineError(f"cannot build the {kind} constraint for guided decoding: {exc}") from exc

    def _append(self, row: Row, token: int, logprob: float) -> bool:
        """Add one token to a row; True when the row is finished."""
        row.token_ids.append(token)
        row.logprobs.append(logprob)
        if row.matcher is not None:
            row.matcher.accept(token)
        if token in row.stop_ids:
            row.finish = "stop"
        elif row.matcher is not None and row.matcher.done:
            row.finish = "stop"
        elif row.window and self._stop_string_completed(row):
            row.finish = "stop"
        elif len(row.token_ids) >= row.max_tokens:
            row.finish = "length"
        return row.finish is not None

    def _tokenizer(self) -> Any:
        engine = self.engine
        if engine._decoder is None:
            # A private copy: a fast tokenizer used from two threads at once can fail ("Already
            # borrowed") when the other thread changes its padding or truncation settings.
            engine._decoder = copy.deepcopy(engine.tokenizer)
        return engine._decoder

    def _stop_string_completed(self, row: Row) -> bool:
        # Earlier occurrences would have stopped an earlier step, so any match in the tail ends here.
        tail = self._tokenizer().decode(row.token_ids[-row.window:], skip_special_tokens=False)
        return any(s and s in tail for s in row.request.sampling.stop)


def _namespace(row: Row) -> str:
    """The prefix-cache namespace of a row: its adapter (KV under another adapter differs)."""
    return row.request.sampling.adapter or ""


def _stack_pasts(pasts: list[LayerKV | None], cached: list[int], width: int, spare: int) -> LayerKV:
    """Per layer (b, H, width + spare, D): each row's cached prefix (H, c, D) right-aligned in the first
    `width` columns, zeros before it; `spare` free columns after (where the forward pass appends)."""
    import torch

    template = next(p for p in pasts if p is not None)
    out = []
    for layer, (k0, v0) in enumerate(template):
        keys = torch.zeros((len(pasts), k0.shape[0], width + spare, k0.shape[2]), dtype=k0.dtype, device=k0.device)
        values = torch.zeros((len(pasts), v0.shape[0], width + spare, v0.shape[2]), dtype=v0.dtype, device=v0.device)
        for r, (past, c) in enumerate(zip(pasts, cached)):
            if past is not None:
                keys[r, :, width - c:width] = past[layer][0]
                values[r, :, width - c:width] = past[layer][1]
        out.append((keys, values))
    return out


def _take_columns(tensor: Any, source: Any) -> Any:
    """tensor (b, H, T, D) -> (b, H, L, D) with column l of row r taken from column source[r, l]."""
    b, heads, _, dim = tensor.shape
    return tensor.gather(2, source[:, None, :, None].expand(b, heads, source.shape[1], dim))
