"""ajet's `Engine` over ms-swift's inference engines (runs inside swift's process).

ajet's gateway renders every prompt to token ids itself (so later turns splice in the exact ids of
earlier ones), so the engine must take token ids in and give token ids and their logprobs back:

- swift's TransformersEngine (GRPO with `--use_vllm false`, CPU or GPU) wraps the trainer's own model:
  ajet's `HFEngine` generates with that very model object, batching the concurrent episodes' calls.
- swift's vLLM engine in a `swift rollout` server (`--use_vllm true --vllm_mode server`): the prompt
  ids go to vLLM as `prompt_token_ids`, the sampled ids and their logprobs come back from vLLM's
  `RequestOutput` (one request per call, vLLM batches them). Not exercised by ajet's CPU tests.
"""

from __future__ import annotations

import uuid
from typing import Any

from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.engine.hf import HFEngine
from ajet.errors import EngineError


def engine_for(infer_engine: Any, tokenizer: Any, *, max_batch_size: int, seed: int) -> Engine:
    """The ajet engine that generates with `infer_engine` (a swift TransformersEngine or vLLM engine)."""
    kind = type(infer_engine).__name__
    if kind == "TransformersEngine" or (hasattr(infer_engine, "model") and not hasattr(infer_engine, "engine_args")):
        return HFEngine(infer_engine.model, tokenizer, max_batch_size=max_batch_size, seed=seed, model_name="ajet-policy")
    if hasattr(infer_engine, "_add_request"):
        return VllmTokenEngine(infer_engine, tokenizer)
    raise EngineError(f"ajet's GRPO plugin cannot generate with swift's {kind}; use --use_vllm false or a vLLM "
                      "server (vllm_mode server)")


class VllmTokenEngine(Engine):
    """Token ids in, token ids + logprobs out, through swift's async vLLM engine."""

    model_name = "ajet-policy"

    def __init__(self, infer_engine: Any, tokenizer: Any) -> None:
        self.infer_engine = infer_engine
        self.tokenizer = tokenizer
        self.eos_ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        from vllm import SamplingParams as VllmSampling

        params = VllmSampling(
            n=1, max_tokens=sampling.max_tokens, temperature=sampling.temperature, top_p=sampling.top_p,
            seed=sampling.seed, logprobs=0, stop_token_ids=list(sampling.stop_token_ids) or None,
            stop=list(sampling.stop) or None, include_stop_str_in_output=False)
        result = None
        async for result in self.infer_engine._add_request({"input_ids": list(prompt_ids)}, params,
                                                           f"ajet-{uuid.uuid4().hex}"):
            pass
        if result is None or not result.outputs:
            raise EngineError("vLLM returned no output for an ajet request")
        out = result.outputs[0]
        ids = list(out.token_ids)
        logprobs = [float(step[token].logprob) for step, token in zip(out.logprobs or [], ids)]
        if len(logprobs) != len(ids):
            raise EngineError(f"vLLM returned {len(logprobs)} logprobs for {len(ids)} tokens")
        return Generation(ids, logprobs, "length" if out.finish_reason == "length" else "stop")
