"""`POST /v1/completions` of `ajet serve`, as vLLM's OpenAI server answers it.

Token-id prompts (`"prompt": [1, 2, 3]`) or text prompts; the answer has `choices[i].text`,
`token_ids` and `prompt_token_ids` (vLLM's `return_token_ids`, on by default here), `logprobs.tokens`
as `"token_id:N"` strings (vLLM's `--return-tokens-as-token-ids`, on by default here) with
`token_logprobs`, `finish_reason`, `stop_reason` and `usage`. So the `remote` engine works against it
exactly as against vLLM. Options the engines cannot honour are refused at their non-neutral values
(400 naming them), never silently ignored; a request whose `model` names a loaded LoRA adapter runs
with it (`LoraAdapters.adapter_for`), an unknown name gets 404.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.errors import AjetError, GatewayError
from ajet.gateway.request import (
    ClientGone, check_context_length, check_sampling, failure_response, read_json, refuse_unsupported,
    stop_list, until_disconnected, validate,
)
from ajet.gateway.request import bad_request as _bad
from ajet.models import eos_token_ids
from ajet.serving.lora import LoraAdapters

MAX_CHOICES = 128  # prompts x n in one request


class CompletionRequest(BaseModel):
    """The fields of vLLM's CompletionRequest that ajet serve honours; other fields are ignored."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    model: str | None = None
    prompt: str | list[StrictInt] | list[str] | list[list[StrictInt]]
    max_tokens: int | None = Field(16, ge=0)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    n: int = Field(1, ge=1, le=MAX_CHOICES)
    stop: str | list[str] | None = None
    stop_token_ids: list[StrictInt] | None = None
    seed: int | None = None
    logprobs: int | None = Field(None, ge=0, le=20)
    return_token_ids: bool | None = None
    return_tokens_as_token_ids: bool | None = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    add_special_tokens: bool = True
    # Options ajet's engines cannot honour: accepted only at their neutral value (see _UNSUPPORTED).
    stream: bool | None = False
    echo: bool | None = False
    best_of: int | None = None
    use_beam_search: bool = False
    suffix: str | None = None
    logit_bias: dict[str, float] | None = None
    presence_penalty: float | None = 0.0
    frequency_penalty: float | None = 0.0
    repetition_penalty: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    min_tokens: int = 0
    ignore_eos: bool = False


_UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "stream": (False, None), "echo": (False, None), "best_of": (None, 1), "use_beam_search": (False,),
    "suffix": (None, ""), "logit_bias": (None, {}), "presence_penalty": (None, 0.0),
    "frequency_penalty": (None, 0.0), "repetition_penalty": (None, 1.0), "top_k": (None, 0, -1),
    "min_p": (None, 0.0), "min_tokens": (0,), "ignore_eos": (False,),
}


class Completions:
    """The completions handler of one app: the engine, the tokenizer and the limits."""

    def __init__(self, engine: Engine, tokenizer: Any, model_name: str, lora: LoraAdapters, *,
                 max_request_bytes: int, tokens_as_ids: bool, body_timeout_s: float):
        self.engine = engine
        self.body_timeout_s = body_timeout_s
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.lora = lora
        self.max_request_bytes = max_request_bytes
        self.tokens_as_ids = tokens_as_ids
        self.vocab_size = int(getattr(engine, "vocab_size", None) or len(tokenizer))
        self.max_positions: int | None = getattr(engine, "max_positions", None)
        # The engine's own stop ids, else the tokenizer's: the gateway's rule (ajet.models.eos_token_ids).
        self.eos_ids = set(getattr(engine, "eos_ids", None) or eos_token_ids(None, tokenizer))

    async def handle(self, request: Request) -> Response:
        try:
            body = await read_json(request, max_bytes=self.max_request_bytes, timeout_s=self.body_timeout_s)
            req = _validate(body)
            adapter = self.lora.adapter_for(req.model)
            prompts = self._prompts(req)
            jobs = [(i, j) for i in range(len(prompts)) for j in range(req.n)]
            if len(jobs) > MAX_CHOICES:
                raise GatewayError(f"{len(prompts)} prompts x n={req.n} asks for {len(jobs)} completions; "
                                   f"at most {MAX_CHOICES} per request", code="too_many_choices")
            work = asyncio.gather(*(self.engine.generate(prompts[i], _sampling(req, j, adapter)) for i, j in jobs))
            generations = await until_disconnected(request, work)
        except (AjetError, ClientGone) as exc:
            return failure_response(exc)
        choices = [self._choice(k, prompts[i], gen, req) for k, ((i, _), gen) in enumerate(zip(jobs, generations))]
        completion_tokens = sum(len(g.token_ids) for g in generations)
        prompt_tokens = sum(len(p) for p in prompts)
        return JSONResponse({
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": req.model or self.model_name,
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })

    def _prompts(self, req: CompletionRequest) -> list[list[int]]:
        raw = req.prompt
        items: list[Any] = [raw] if isinstance(raw, str) or (raw and isinstance(raw[0], int)) else list(raw)
        if not items:
            raise _bad("prompt is empty; send a string or a list of token ids", "prompt")
        prompts = []
        for item in items:
            ids = self.tokenizer.encode(item, add_special_tokens=req.add_special_tokens) \
                if isinstance(item, str) else list(item)
            if not ids:
                raise _bad("prompt is empty; send a string or a list of token ids", "prompt")
            bad = [t for t in ids if not 0 <= t < self.vocab_size]
            if bad:
                raise _bad(f"prompt has token ids outside the vocabulary [0, {self.vocab_size}): {bad[:5]}",
                           "prompt")
            check_context_length(len(ids), 16 if req.max_tokens is None else req.max_tokens, self.max_positions)
            prompts.append(ids)
        bad_stops = [t for t in req.stop_token_ids or [] if not 0 <= t < self.vocab_size]
        if bad_stops:
            raise _bad(f"stop_token_ids outside the vocabulary [0, {self.vocab_size}): {bad_stops[:5]}",
                       "stop_token_ids")
        return prompts

    def _choice(self, index: int, prompt: list[int], gen: Generation, req: CompletionRequest) -> dict[str, Any]:
        text, stop_reason = self._text(gen, req)
        choice: dict[str, Any] = {"index": index, "text": text, "logprobs": None,
                                  "finish_reason": gen.finish_reason, "stop_reason": stop_reason}
        if req.return_token_ids is not False:
            choice["token_ids"] = list(gen.token_ids)
            choice["prompt_token_ids"] = list(prompt)
        if req.logprobs is not None:
            choice["logprobs"] = self._logprobs(gen, req)
        return choice

    def _text(self, gen: Generation, req: CompletionRequest) -> tuple[str, str | int | None]:
        """Completion text as vLLM makes it: the stop token and anything from a stop string on are cut."""
        ids, stop_reason = gen.token_ids, None
        stop_ids = set(req.stop_token_ids or [])
        if gen.finish_reason == "stop" and ids and ids[-1] in (self.eos_ids | stop_ids):
            stop_reason = ids[-1] if ids[-1] in stop_ids and ids[-1] not in self.eos_ids else None
            if not req.include_stop_str_in_output:
                ids = ids[:-1]
        text = self.tokenizer.decode(ids, skip_special_tokens=req.skip_special_tokens)
        stops = stop_list(req.stop)
        found = [(text.find(s), s) for s in stops if s and s in text]
        if found:
            at, stop = min(found)
            text = text[: at + len(stop)] if req.include_stop_str_in_output else text[:at]
            stop_reason = stop
        return text, stop_reason

    def _logprobs(self, gen: Generation, req: CompletionRequest) -> dict[str, Any]:
        as_ids = self.tokens_as_ids if req.return_tokens_as_token_ids is None else req.return_tokens_as_token_ids
        pieces = [self.tokenizer.decode([t]) for t in gen.token_ids]
        tokens = [f"token_id:{t}" for t in gen.token_ids] if as_ids else pieces
        offsets, at = [], 0
        for piece in pieces:
            offsets.append(at)
            at += len(piece)
        return {"text_offset": offsets, "token_logprobs": list(gen.logprobs), "tokens": tokens,
                # Only the sampled token: the engines do not compute alternatives.
                "top_logprobs": [{tok: lp} for tok, lp in zip(tokens, gen.logprobs)]}


def _validate(body: Any) -> CompletionRequest:
    req = validate(CompletionRequest, body, unions={
        "prompt": "prompt must be a string, a list of token ids (integers), or a list of strings or of "
                  "token-id lists",
        "stop": "stop must be a string or a list of strings"})
    refuse_unsupported(req, _UNSUPPORTED)
    check_sampling(temperature=req.temperature, top_p=req.top_p, seed=req.seed, stop=req.stop)
    if req.seed is not None and req.seed + req.n - 1 > 2**63 - 1:  # choice j samples with seed + j
        raise _bad(f"seed={req.seed} + n={req.n} leaves the 64-bit range; use a smaller seed", "seed")
    return req


def _sampling(req: CompletionRequest, index: int, adapter: str | None) -> SamplingParams:
    stops = stop_list(req.stop)
    return SamplingParams(
        max_tokens=16 if req.max_tokens is None else req.max_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
        stop_token_ids=list(req.stop_token_ids or []),
        stop=[s for s in stops if s],
        seed=None if req.seed is None else req.seed + index,  # n > 1 samples must differ
        adapter=adapter,
    )
