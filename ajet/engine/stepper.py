"""One scheduling step of the hf engine, run on its worker thread against its `model_runner.ModelRunner`.

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
(`weights_version` is bumped, or any parameter is modified in place: torch's version counters).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from ajet.engine.base import Generation
from ajet.engine.batch import BatchCache, LayerKV, Row, RunningBatch
from ajet.engine.kv_cache import PrefixMatch
from ajet.engine.model_runner import ModelRunner
from ajet.engine.sampling import pick_tokens
from ajet.errors import EngineError

# A prefix shared by the prompts of one admission group gets its own forward pass only when it is
# at least this long: below that, recomputing it per prompt costs less than one more pass.
MIN_SHARED_PREFIX = 32


@dataclass
class StepOutcome:
    done: list[tuple[Any, Generation]] = field(default_factory=list)  # (request, its completion)
    failed: list[tuple[Any, Exception]] = field(default_factory=list)
    running: list[tuple[Any, int]] = field(default_factory=list)  # (request, tokens so far) still decoding


@dataclass
class _Prefilled:
    """A prefill pass: its KV as computed (rows with holes), where each prompt's tokens sit, its logits."""

    raw: LayerKV  # per layer (m, H, P + N, D)
    columns: Any  # (m, L) long: the raw column of each token of prompt d, right-aligned (pad slots: 0)
    lengths: list[int]  # tokens of each prompt
    logits: Any  # (m, V) at each prompt's last token

    def kv_of(self, d: int, start: int, end: int) -> LayerKV:
        """Per layer (H, end - start, D): tokens start..end-1 of prompt d."""
        offset = self.columns.shape[1] - self.lengths[d]
        cols = self.columns[d, offset + start:offset + end]
        return [(k[d].index_select(1, cols), v[d].index_select(1, cols)) for k, v in self.raw]

    def compact(self, sources: list[int]) -> tuple[LayerKV, Any]:
        """The prompts `sources` (with repeats) as right-aligned rows: KV per layer (b, H, L, D), mask (b, L)."""
        import torch

        index = torch.tensor(sources, dtype=torch.long, device=self.columns.device)
        cols = self.columns[index]  # (b, L)
        rows = index[:, None].expand_as(cols)  # (b, L)
        kv = [(k[rows, :, cols].permute(0, 2, 1, 3), v[rows, :, cols].permute(0, 2, 1, 3)) for k, v in self.raw]
        width = cols.shape[1]
        starts = torch.tensor([width - self.lengths[d] for d in sources], device=cols.device)
        mask = (torch.arange(width, device=cols.device)[None, :] >= starts[:, None]).long()  # (b, L)
        return kv, mask


class Stepper:
    """Runs steps for one engine's model (its `ModelRunner`): reads its model, cache, settings and counters."""

    def __init__(self, runner: ModelRunner):
        self.runner = runner

    def step(self, batch: RunningBatch, admit: list[Any], drop: list[Any]) -> StepOutcome:
        import torch

        runner, out = self.runner, StepOutcome()
        with runner.lock, torch.inference_mode():
            runner.sync_weights()
            if drop:
                self._drop(batch, drop)
            if not batch.rows and not admit:
                return out  # nothing to compute: leave the model's mode alone (a trainer may be using it)
            adapter = batch.adapter if batch.rows else (admit[0].sampling.adapter if admit else None)
            with ExitStack() as stack:
                try:
                    stack.enter_context(runner.running_mode(adapter))
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
        runner.stats.largest_batch = max(runner.stats.largest_batch, len(batch))
        out.running = [(row.request, len(row.prompt_ids) + len(row.token_ids)) for row in batch.rows]
        return out

    # ------------------------------------------------------------------ decode
    def _drop(self, batch: RunningBatch, drop: list[Any]) -> None:
        gone = {id(r) for r in drop}
        keep = [i for i, row in enumerate(batch.rows) if id(row.request) not in gone]
        self.runner.stats.cancelled += len(batch.rows) - len(keep)
        if len(keep) < len(batch.rows):
            batch.keep(keep)

    def _decode(self, batch: RunningBatch, out: StepOutcome) -> None:
        runner = self.runner
        ids, mask, positions = batch.step_inputs(runner.device)  # (B, 1), (B, T), (B, 1)
        try:
            logits = runner.forward(ids, mask, positions, batch.cache)  # (B, V) float32
        except Exception as exc:  # noqa: BLE001 - a failed forward pass fails the rows it was for
            error = EngineError(f"generation failed: {exc!r}")
            out.failed += [(row.request, error) for row in batch.rows]
            runner.stats.failed += len(batch.rows)
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
                self.runner.stats.failed += 1
            elif finished:
                self._cache_finished(row, lambda s, e, j=j: kv_of_row(j, s, e))
                out.done.append((row.request, Generation(row.token_ids, row.logprobs, row.finish or "length")))
                self.runner.stats.generated_tokens += len(row.token_ids)
            else:
                keep.append(j)
        return keep

    def _cache_finished(self, row: Row, kv_of: Any) -> None:
        runner = self.runner
        if runner.prefix_cache.enabled and row.version == runner.weights_epoch:
            runner.prefix_cache.insert(_namespace(row), row.computed_ids(), kv_of)

    # ------------------------------------------------------------------ prefill
    def _admit(self, batch: RunningBatch, requests: list[Any], out: StepOutcome) -> None:
        rows = []
        for request in requests:
            try:
                rows.append(self._new_row(request))
            except Exception as exc:  # noqa: BLE001 - a request the engine cannot start fails alone
                out.failed.append((request, exc if isinstance(exc, EngineError) else EngineError(repr(exc))))
                self.runner.stats.failed += 1
        if rows:
            self.runner.stats.batches += 1
            self.runner.stats.requests += len(rows)
            self._prefill_group(batch, rows, out)

    def _prefill_group(self, batch: RunningBatch, rows: list[Row], out: StepOutcome) -> None:
        try:
            done, copy_of = self._prefill(rows)
        except Exception as exc:  # noqa: BLE001
            if len(rows) > 1:  # find the request that fails: the others must not fail with it
                for row in rows:
                    self._prefill_group(batch, [row], out)
                return
            out.failed.append((rows[0].request, EngineError(f"prefill failed: {exc!r}")))
            self.runner.stats.failed += 1
            return
        logits = done.logits[copy_of] if len(done.lengths) < len(rows) else done.logits  # (b, V)
        keep = self._choose(rows, logits, out, lambda j, s, e: done.kv_of(copy_of[j], s, e))
        if keep:
            kv, mask = done.compact([copy_of[j] for j in keep])
            batch.add([rows[j] for j in keep], kv, mask)

    def _prefill(self, rows: list[Row]) -> tuple[_Prefilled, list[int]]:
        """Prefill each row's prompt from its longest cached prefix; identical prompts once. Returns the
        pass and, per row, the index of its prompt among the distinct ones."""
        runner, cache = self.runner, self.runner.prefix_cache
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
        done = self._forward_from(unique, matches)
        for j, prompt in enumerate(unique):
            cache.insert(namespace, prompt, lambda s, e, j=j: done.kv_of(j, s, e))
        runner.stats.prompt_tokens += sum(len(p) for p in prompts)
        runner.stats.prefilled_tokens += sum(len(p) - m.length for p, m in zip(unique, matches))
        return done, copy_of

    def _prefill_shared_prefix(self, namespace: str, prompts: list[list[int]]) -> None:
        """Compute (and cache) the prefix all `prompts` share, once, when it is long enough to pay."""
        runner, cache = self.runner, self.runner.prefix_cache
        shared = min(len(p) for p in prompts) - 1  # every prompt keeps a token of its own to compute
        first = prompts[0]
        for other in prompts[1:]:
            shared = next((i for i in range(shared) if other[i] != first[i]), shared)
        found = cache.match(namespace, first[:shared])
        if shared - found.length < MIN_SHARED_PREFIX:
            return
        done = self._forward_from([first[:shared]], [found])
        cache.insert(namespace, first[:shared], lambda s, e: done.kv_of(0, s, e))
        runner.stats.prefilled_tokens += shared - found.length

    def _forward_from(self, prompts: list[list[int]], matches: list[PrefixMatch]) -> _Prefilled:
        """One forward pass over the uncached part of each prompt, after its cached prefix.

        Layout per row r with c_r cached and n_r new tokens, P = max c, N = max n: columns [0, P) hold
        its prefix right-aligned, [P, P + N) its new tokens right-aligned, pads (masked) elsewhere.
        """
        import torch

        runner, device = self.runner, self.runner.device
        rows = len(prompts)
        cached = [m.length for m in matches]
        new = [len(p) - c for p, c in zip(prompts, cached)]
        width_past, width_new = max(cached), max(new)
        ids = torch.full((rows, width_new), runner.pad_id, dtype=torch.long)  # (b, N)
        mask = torch.zeros((rows, width_past + width_new), dtype=torch.long)  # (b, P + N)
        positions = torch.zeros((rows, width_new), dtype=torch.long)  # (b, N)
        length = max(len(p) for p in prompts)
        columns = torch.zeros((rows, length), dtype=torch.long)  # (b, L): where each prompt's tokens sit
        for r, (prompt, c, n) in enumerate(zip(prompts, cached, new)):
            ids[r, width_new - n:] = torch.tensor(prompt[c:], dtype=torch.long)
            mask[r, width_past - c:width_past] = 1
            mask[r, width_past + width_new - n:] = 1
            positions[r, width_new - n:] = torch.arange(c, c + n)
            columns[r, length - c - n:] = torch.cat([torch.arange(width_past - c, width_past),
                                                     torch.arange(width_past + width_new - n, width_past + width_new)])
        if width_past:
            past = runner.prefix_cache.stacked(matches, width_past, spare=width_new)  # (b, H, P + N, D) buffers
            cache = BatchCache(past, length=width_past)
        else:
            cache = BatchCache()
        logits = runner.forward(ids.to(device), mask.to(device), positions.to(device), cache)
        return _Prefilled(cache.tensors(), columns.to(device), [len(p) for p in prompts], logits)

    # ------------------------------------------------------------------ rows
    def _new_row(self, request: Any) -> Row:
        import torch

        runner, sampling = self.runner, request.sampling
        room = sampling.max_tokens
        if runner.max_positions is not None:
            room = min(room, runner.max_positions - len(request.prompt_ids))
        row = Row(request, max_tokens=room, stop_ids=frozenset(runner.eos_ids) | frozenset(sampling.stop_token_ids),
                  version=runner.weights_epoch)
        if sampling.temperature > 0:
            try:
                row.generator = torch.Generator(device=runner.device).manual_seed(request.seed)
            except (RuntimeError, OverflowError, TypeError, ValueError) as exc:
                raise EngineError(f"seed {request.seed!r} cannot seed a torch.Generator ({exc}); "
                                  "use an integer in [-2**63, 2**64)") from exc
        if sampling.stop:
            # A stop string of n characters spans at most ~4n byte-level tokens (multi-byte characters).
            row.window = 4 * max(len(s) for s in sampling.stop) + 4
        if sampling.guided is not None:
            row.matcher = self._matcher(sampling)
        return row

    def _matcher(self, sampling: Any) -> Any:
        build = self.runner.build_matcher
        if build is None:
            try:
                from ajet.engine.guided import build_matcher as build
            except ImportError as exc:
                raise EngineError(f"guided decoding needs ajet.engine.guided, which cannot be imported: {exc}") from exc
        try:
            return build(sampling.guided, self._tokenizer(), self.runner.vocab_size)
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
        return self.runner.decoder()  # the worker thread's own copy

    def _stop_string_completed(self, row: Row) -> bool:
        # Earlier occurrences would have stopped an earlier step, so any match in the tail ends here.
        tail = self._tokenizer().decode(row.token_ids[-row.window:], skip_special_tokens=False)
        return any(s and s in tail for s in row.request.sampling.stop)


def _namespace(row: Row) -> str:
    """The prefix-cache namespace of a row: its adapter (KV under another adapter differs)."""
    return row.request.sampling.adapter or ""
