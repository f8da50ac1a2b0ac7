"""The GRPO multi-turn scheduler that runs the user's workflow inside ms-swift (in swift's process).

swift asks a multi-turn scheduler for one trajectory per prompt row (`run(infer_request)`). This one
runs the user's `Workflow.execute` on the row's task with an ajet `Tuner` whose gateway generates
with swift's inference engine (`ajet.backbone.swift.engine`), exactly as the debug backbone's
rollout does: the gateway renders each call to token ids, the tracker records every call, and the
episode's calls are merged into one sample (prompt, then every LLM turn trained, tool results and
other non-generated tokens masked). The sample goes back to swift whole: `response_token_ids`,
`response_loss_mask` and `rollout_logprobs` for swift's bookkeeping, and the exact ids and mask in
`rollout_infos['ajet']`, which `ajet.backbone.swift.plugin` makes swift's trainer encode verbatim.

The judge does not run here: `AjetJudge` (the reward function) scores the episodes of a whole batch,
so group judges see their groups. A workflow that raises or times out (after `rollout.retries`) is
counted and returned as a trajectory that trains nothing (`failed_output`); it never raises into swift's
trainer.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from typing import Any

from swift.infer_engine.protocol import (ChatCompletionResponse, ChatCompletionResponseChoice, ChatMessage,
                                         RolloutInferRequest, RolloutOutput, UsageInfo)
from swift.rollout.multi_turn import MultiTurnScheduler

from ajet.backbone.swift.engine import engine_for
from ajet.config.schema import AjetConfig
from ajet.judge.base import Judge, Reward
from ajet.rollout.seeds import batch_seed
from ajet.rollout.stack import RolloutStack, settings_for
from ajet.workflow import Task

log = logging.getLogger(__name__)
SCHEDULER_NAME = "ajet_workflow"
TASK_COLUMN = "ajet_task"


class _Unscored(Judge):
    """Stands in for the judge while the episode runs; the reward function scores it afterwards."""

    async def score(self, task: Task, output: Any) -> Reward:
        return Reward(total=0.0)


class WorkflowScheduler(MultiTurnScheduler):
    """`--multi_turn_scheduler ajet_workflow`: one episode of the user's workflow per trajectory."""

    cfg: AjetConfig | None = None  # set by ajet.backbone.swift.plugin.install

    def __init__(self, infer_engine: Any = None, max_turns: int | None = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(infer_engine, max_turns, *args, **kwargs)
        if self.cfg is None:
            raise RuntimeError("ajet's swift plugin was not installed (ajet.backbone.swift.plugin.install)")
        self._stacks: dict[int, tuple[RolloutStack, Any]] = {}  # id(event loop) -> (stack, engine)
        self._counter = itertools.count()

    # ------------------------------------------------------------------ swift's entry points
    async def run(self, infer_request: RolloutInferRequest, request_config: Any = None, **kwargs: Any) -> RolloutOutput:
        """One trajectory (server mode calls this per request; the colocate driver for a batch)."""
        started = time.perf_counter()
        try:
            stack = await self._stack()
            task = Task.model_validate_json(infer_request.data_dict[TASK_COLUMN])
            settings = settings_for(self.cfg, "train")
            settings.group_size = 1
            settings.seed = batch_seed(self.cfg.engine.seed, next(self._counter))  # one batch per trajectory
            batch = await stack.runner.run([task], settings, show_progress=False)
            return episode_output(batch.episodes[0], infer_request, stack, time.perf_counter() - started)
        except Exception as exc:  # a plugin failure is one failed episode, never a crashed trainer
            log.exception("ajet episode failed inside the plugin")
            return failed_output(infer_request, self.tokenizer, f"{type(exc).__name__}: {exc}")

    async def run_batch(self, requests: list[RolloutInferRequest]) -> list[RolloutOutput]:
        """Colocate mode: every trajectory of a generation batch, concurrently, in this event loop."""
        try:
            return list(await asyncio.gather(*(self.run(r) for r in requests)))
        finally:
            await self.close()

    # ------------------------------------------------------------------ the rollout stack
    async def _stack(self) -> RolloutStack:
        key = id(asyncio.get_running_loop())
        if key not in self._stacks:
            engine = engine_for(self.infer_engine, self.tokenizer, max_batch_size=self.cfg.engine.max_batch_size,
                                seed=self.cfg.engine.seed)
            stack = RolloutStack(self.cfg, engine, self.tokenizer, run_dir=None)
            await stack.__aenter__()
            stack.runner.judge = _Unscored()  # scored by the reward function, batch by batch
            self._stacks[key] = (stack, engine)
        return self._stacks[key][0]

    async def close(self) -> None:
        stack_engine = self._stacks.pop(id(asyncio.get_running_loop()), None)
        if stack_engine is not None:
            stack, engine = stack_engine
            await stack.__aexit__(None, None, None)
            await engine.close()


def episode_output(result: Any, request: RolloutInferRequest, stack: RolloutStack, seconds: float) -> RolloutOutput:
    """An ajet episode as swift's RolloutOutput (see the module docstring)."""
    samples = sorted(result.samples, key=lambda s: s.num_trained_tokens, reverse=True)
    info = _episode_info(result, seconds)
    if result.error is not None or not samples:
        return failed_output(request, stack.gateway.tokenizer, result.error or "the episode made no trained LLM call",
                             info)
    sample = samples[0]  # a linear episode merges into one sample; forks beyond it are counted, not trained
    info["dropped_samples"] = len(samples) - 1
    first = sample.loss_mask.index(1)
    response_ids, response_mask = sample.input_ids[first:], sample.loss_mask[first:]
    logprobs = [lp for lp, m in zip(sample.old_logprobs[first:], response_mask) if m]
    info.update(input_ids=list(sample.input_ids), loss_mask=list(sample.loss_mask))
    last = result.calls[-1]
    answer = result.output.answer if result.output is not None else None
    text = answer if isinstance(answer, str) else stack.gateway.tokenizer.decode(last.completion_ids,
                                                                                 skip_special_tokens=True)
    return RolloutOutput(
        response=_response(text, last.completion_ids, "length" if last.finish_reason == "length" else "stop",
                           len(sample.input_ids)),
        messages=[*request.messages, {"role": "assistant", "content": text}],
        response_token_ids=[response_ids], response_loss_mask=[response_mask], rollout_logprobs=[logprobs],
        rollout_infos={"num_turns": len(result.calls), "ajet": info})


def failed_output(request: RolloutInferRequest, tokenizer: Any, error: str,
                  info: dict[str, Any] | None = None) -> RolloutOutput:
    """A trajectory that trains nothing: the prompt and an EOS. The EOS is its one labelled token
    (swift sizes its logits window from the first labelled token of each row; a row with none breaks
    it), and `AjetJudge` gives the episode its group's mean reward, so its advantage is exactly 0."""
    from ajet.render import ChatRenderer

    prompt = ChatRenderer(tokenizer).encode(list(request.messages), None).token_ids
    eos = tokenizer.eos_token_id
    info = {**(info or {}), "error": error, "input_ids": [*prompt, eos], "loss_mask": [0] * len(prompt) + [1]}
    info.setdefault("task", request.data_dict.get(TASK_COLUMN))
    return RolloutOutput(
        response=_response("", [eos], "stop", len(prompt) + 1),
        messages=[*request.messages, {"role": "assistant", "content": ""}],
        response_token_ids=[[eos]], response_loss_mask=[[1]], rollout_logprobs=[],
        rollout_infos={"num_turns": 0, "ajet": info})


def _response(text: str, token_ids: list[int], finish: str, total: int) -> ChatCompletionResponse:
    choice = ChatCompletionResponseChoice(index=0, message=ChatMessage(role="assistant", content=text),
                                          finish_reason=finish, token_ids=list(token_ids))
    return ChatCompletionResponse(model="ajet-policy", choices=[choice],
                                  usage=UsageInfo(total - len(token_ids), len(token_ids), total))


def _episode_info(result: Any, seconds: float) -> dict[str, Any]:
    """What the reward function and the run's records need to know about the episode (JSON only:
    in server mode it travels over HTTP)."""
    output = None
    if result.output is not None:  # metadata may hold anything: keep what JSON can carry
        output = json.loads(json.dumps(result.output.model_dump(exclude={"reward"}), default=str))
        if result.output.reward is not None:
            output["reward"] = Reward.of(result.output.reward).model_dump(mode="json")
    return {
        "episode_id": result.episode_id,
        "task": result.task.model_dump_json(),
        "output": output,
        "error": result.error,
        "attempts": result.attempts,
        "seconds": round(seconds, 3),
        "counters": result.counters,
        "merge": result.merge.to_dict(),
        "samples": len(result.samples),
        "dropped_samples": 0,
        "generated_tokens": result.generated_tokens,
        "calls": [{"completion_ids": list(c.completion_ids), "finish_reason": c.finish_reason, "trained": c.trained}
                  for c in result.calls],
    }
