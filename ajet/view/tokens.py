"""The token view of one episode: each sample's tokens as the trainer saw them (samples.jsonl: ids,
loss mask, logprob at sampling, advantage), or, for a folder without samples.jsonl (an eval folder,
an older run), each LLM call's prompt and completion from episodes.jsonl.

Each token's text comes from the run's own tokenizer (the model its config.yaml names), loaded
offline; when it cannot be loaded the view shows ids only and says why."""

from __future__ import annotations

import threading
from typing import Any

_tokenizers: dict[str, tuple[Any, str | None]] = {}
_lock = threading.Lock()


def load_tokenizer(model: str | None) -> tuple[Any, str | None]:
    """(tokenizer, None) or (None, why not). Never reaches the network; cached per model."""
    if not model:
        return None, "the run's config.yaml names no model: token ids only"
    with _lock:
        if model not in _tokenizers:
            _tokenizers[model] = _load(model)
        return _tokenizers[model]


def _load(model: str) -> tuple[Any, str | None]:
    try:
        from transformers import AutoTokenizer

        from ajet.models import resolve_model_path

        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(model), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure means: show ids only, and say why
        return None, f"the tokenizer of {model!r} could not be loaded offline ({type(exc).__name__}): token ids only"
    return TokenText(tokenizer), None


class TokenText:
    """Text of single token ids, cached (a vocabulary is decoded once, not once per episode)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.special = set(getattr(tokenizer, "all_special_ids", []) or [])
        self._text: dict[int, str] = {}
        self._lock = threading.Lock()

    def texts(self, ids: list[int]) -> list[str]:
        with self._lock:
            out = []
            for token in ids:
                if token not in self._text:
                    try:
                        self._text[token] = self.tokenizer.decode([token], skip_special_tokens=False,
                                                                  clean_up_tokenization_spaces=False)
                    except Exception:  # noqa: BLE001 - an id outside the vocabulary
                        self._text[token] = ""
                out.append(self._text[token])
            return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(values: Any, what: str) -> list[int]:
    """A list of integers (token ids, a loss mask); ValueError naming `what` for anything else (a row
    from a damaged or hand-made file: `["x"]`, `[Infinity]`, `5`)."""
    if values is None:
        return []
    if not isinstance(values, list) or not all(_is_int(v) for v in values):
        raise ValueError(f"{what} is not a list of integers")
    return values


def _floats(values: Any, n: int) -> list[float | None]:
    values = values if isinstance(values, list) else []
    out = [v if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in values[:n]]
    return out + [None] * (n - len(out))


def summarize_sample(row: dict[str, Any]) -> dict[str, Any]:
    """What the index keeps of a samples.jsonl line; ValueError (the line shows as corrupt, and no
    episode view reads it) when a field has the wrong type."""
    if not isinstance(row.get("episode_id"), str):
        raise ValueError("episode_id is not a string")
    for key in ("index", "step"):
        if row.get(key) is not None and not _is_int(row[key]):
            raise ValueError(f"{key} is not an integer")
    _ints(row.get("input_ids"), "input_ids")
    _ints(row.get("loss_mask"), "loss_mask")
    for key in ("old_logprobs", "calls"):
        if row.get(key) is not None and not isinstance(row[key], list):
            raise ValueError(f"{key} is not a list")
    return {"episode_id": row["episode_id"], "index": row.get("index"), "step": row.get("step")}


def _from_samples(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        ids = _ints(row.get("input_ids"), "input_ids")
        mask = _ints(row.get("loss_mask"), "loss_mask")[:len(ids)]
        out.append({
            "title": f"sample {row.get('index')}", "index": row.get("index"), "agent": row.get("agent"),
            "step": row.get("step"), "fork_reason": row.get("fork_reason"), "calls": row.get("calls"),
            "reward": row.get("reward"), "advantage": row.get("advantage"), "trained": row.get("trained"),
            "ids": ids, "mask": mask + [0] * (len(ids) - len(mask)),
            "logprobs": _floats(row.get("old_logprobs"), len(ids)),
        })
    return out


def _from_calls(episode: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    calls = episode.get("llm_calls") or []
    if not isinstance(calls, list):
        raise ValueError("llm_calls is not a list")
    for call in calls:
        if not isinstance(call, dict):
            continue
        prompt = _ints(call.get("prompt_ids"), f"llm_calls[{call.get('index')}].prompt_ids")
        completion = _ints(call.get("completion_ids"), f"llm_calls[{call.get('index')}].completion_ids")
        out.append({
            "title": f"LLM call {call.get('index')}", "index": call.get("index"), "agent": call.get("agent"),
            "step": episode.get("step"), "fork_reason": None, "calls": [call.get("index")], "reward": episode.get("reward"),
            "advantage": None, "trained": call.get("trained"), "ids": prompt + completion,
            "mask": [0] * len(prompt) + [1] * len(completion),
            "logprobs": [None] * len(prompt) + _floats(call.get("logprobs"), len(completion)),
        })
    return out


def token_view(episode: dict[str, Any], sample_rows: list[dict[str, Any]], model: str | None) -> dict[str, Any]:
    """Every sample of the episode with per-token id, text, mask, logprob, special flag."""
    if sample_rows:
        source, note, samples = "samples", None, _from_samples(sample_rows)
    else:
        source, samples = "llm_calls", _from_calls(episode)
        note = ("no samples.jsonl lines for this episode (an eval or validation episode, or a run written before "
                "samples.jsonl existed): each LLM call is shown, prompt tokens unmasked, no advantage")
    text, why = load_tokenizer(model)
    for sample in samples:
        sample["text"] = text.texts(sample["ids"]) if text else None
        sample["special"] = [1 if t in text.special else 0 for t in sample["ids"]] if text else [0] * len(sample["ids"])
    return {"source": source, "note": note, "model": model, "tokenizer": text is not None, "tokenizer_note": why,
            "samples": samples}
