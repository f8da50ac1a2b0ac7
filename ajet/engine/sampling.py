"""Choosing the next token of each row: greedy or temperature + top-p, optionally constrained.

`logprobs` are always those of the RAW logits (temperature 1, no top-p, no grammar mask): what the
trainer recomputes. A row whose logits or sampling distribution is not finite, or whose grammar
matcher fails, gets an error of its own; the other rows of the step are chosen as usual.
"""

from __future__ import annotations

from typing import Any

from ajet.errors import EngineError


def pick_tokens(logits: Any, rows: list[Any]) -> tuple[list[int], list[float], dict[int, EngineError]]:
    """One token per row of `logits` (b, V) float32, its raw logprob, and the rows that failed (by index).

    rows: objects with `.request.sampling`, `.generator` (None: greedy) and `.matcher` (None: free).
    """
    import torch

    log_norm = torch.logsumexp(logits, dim=-1)  # (b,): logits - log_norm is the temperature-1 log-softmax
    errors: dict[int, EngineError] = {}
    for j, ok in enumerate(torch.isfinite(log_norm).tolist()):
        if not ok:
            errors[j] = EngineError(
                "the model gave non-finite logits (NaN or inf) for this request: its weights or inputs hold "
                "NaN/inf; check the last training update (a NaN loss or gradient) or the model files")
    work = _masked(logits, rows, errors)  # (b, V): what the choice is made from
    tokens = work.argmax(dim=-1)  # (b,): right for greedy rows; sampled rows are overwritten below
    sampled = [j for j, row in enumerate(rows) if row.generator is not None and j not in errors]
    if sampled:
        _sample_into(tokens, work, rows, sampled, errors)
    chosen = logits.gather(1, tokens[:, None])[:, 0] - log_norm  # (b,)
    return tokens.tolist(), chosen.tolist(), errors


def _masked(logits: Any, rows: list[Any], errors: dict[int, EngineError]) -> Any:
    """The logits with each constrained row's disallowed tokens at -inf (a copy when any row is constrained)."""
    import torch

    guided = [j for j, row in enumerate(rows) if row.matcher is not None and j not in errors]
    if not guided:
        return logits
    work = logits.clone()
    for j in guided:
        try:
            rows[j].matcher.mask_logits(work[j])  # in place on the (V,) row view
        except Exception as exc:  # noqa: BLE001 - a matcher bug fails its own request only
            errors[j] = EngineError(f"constrained decoding failed while masking: {exc!r}")
            continue
        if not bool(torch.isfinite(work[j]).any()):
            errors[j] = EngineError(
                "constrained decoding left no allowed token: the grammar cannot continue this completion "
                "(check the schema or grammar given in `guided`)")
    return work


def _sample_into(tokens: Any, work: Any, rows: list[Any], sampled: list[int], errors: dict[int, EngineError]) -> None:
    """Sample the `sampled` rows of `work` (b, V) with temperature and top-p; write their tokens into `tokens`."""
    import torch

    index = torch.tensor(sampled, device=work.device)
    temps = [rows[j].request.sampling.temperature for j in sampled]
    scaled = work[index]  # (s, V)
    if any(t != 1.0 for t in temps):
        scaled = scaled / torch.tensor(temps, device=work.device, dtype=work.dtype)[:, None]
    probs = torch.softmax(scaled, dim=-1)  # (s, V)
    top_p = [rows[j].request.sampling.top_p for j in sampled]
    if min(top_p) < 1.0:
        probs = _top_p_filter(probs, torch.tensor(top_p, device=work.device, dtype=probs.dtype))
    if all(t == 1.0 for t in temps) and min(top_p) == 1.0:
        valid = [True] * len(sampled)  # the softmax of finite logits (checked by the caller) is a distribution
    else:
        valid = (torch.isfinite(probs).all(dim=-1) & (probs.sum(dim=-1) > 0)).tolist()  # (s,)
    good = [i for i, ok in enumerate(valid) if ok]
    for i, ok in enumerate(valid):
        if not ok:
            errors[sampled[i]] = EngineError(
                f"temperature {temps[i]!r} gives no valid distribution (logits / temperature overflow float32): "
                "use temperature 0 for greedy decoding, or a temperature of at least 1e-6")
    if good:
        picks = _sample_rows(probs[good], [rows[sampled[i]].generator for i in good])
        tokens[index[good]] = picks


def _sample_rows(probs: Any, generators: list[Any]) -> Any:
    """One token per row of `probs` (s, V) by an exponential race: argmax_i p_i / E_i with E_i ~ Exp(1),
    which picks i with probability p_i (vLLM samples the same way). Each row draws its V uniforms from
    its own generator, so a seeded request samples the same alone or in any batch.

    Why not inverse-CDF sampling (one uniform per row): its choice moves when the uniform falls within
    rounding noise of ANY of the V cumulative-sum boundaries, and float32 noise of ~1e-6 (another
    batch layout, a prefix computed in another pass) flipped ~1 token in 250 on a 49k vocabulary. The
    race only moves when the two best ratios are that close: about one draw in a million.
    """
    import torch

    logu = torch.empty_like(probs)  # (s, V)
    for row, generator in zip(logu, generators):
        row.uniform_(generator=generator)  # the draws of torch.rand(V, generator=...), written in place
    logu.log_()  # -E with E ~ Exp(1), strictly negative (a uniform is < 1); a uniform of 0 gives -inf
    # argmax p / E == argmin p / (-E), computed in place (no second (s, V) buffer). A zero-probability token,
    # or one whose uniform was 0, scores -0 and never wins.
    return probs.div_(logu).argmin(dim=-1)  # (s,)


def _top_p_filter(probs: Any, top_p: Any) -> Any:
    """Zero the tail of each row's distribution beyond cumulative mass top_p (the top token always stays)."""
    import torch

    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (s, V)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p[:, None], 0.0)
    return torch.zeros_like(probs).scatter_(1, order, sorted_probs)
