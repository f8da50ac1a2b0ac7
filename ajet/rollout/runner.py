"""Run batches of episodes: tasks × group_size, bounded concurrency, timeouts, retries, judging.

A failing episode (the workflow raised, cancelled itself, called sys.exit or timed out, after
`retries` extra attempts) is counted with its error and written to episodes.jsonl; it never stops the
batch (see `ajet.rollout.guard`). Only when every episode of a batch failed with a ConfigError (the
server file does not import, a workflow argument is wrong) does `run` raise it: a training run would
otherwise go on for all its steps with nothing to learn from. The timeout counts the workflow's own
time: while the gateway is answering any LLM call (rendering, queued for the engine, generating), the
clocks are paused, so a slow or saturated engine never fails a healthy episode, and a hung one is
caught once the model has nothing else to do. A judge that raises or returns something that is not a
usable reward (not a number, a bool or a string, NaN, inf, or beyond
±`ajet.judge.base.MAX_ABS_REWARD`) is counted too, and its episode gets no reward (and so no samples).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ajet.config.schema import JudgeConfig, RolloutConfig, TrackerConfig
from ajet.errors import ConfigError
from ajet.gateway.episodes import EpisodeSession
from ajet.gateway.inprocess import InProcessTransport
from ajet.gateway.server import Gateway
from ajet.judge.base import Judge, checked_reward, success_of
from ajet.rollout.episode import EpisodeResult, EpisodeWriter
from ajet.rollout.guard import OwnTimeout, UserCodeError, run_guarded
from ajet.rollout.progress import RolloutProgress
from ajet.rollout.seeds import episode_seed
from ajet.samples import Sample
from ajet.tracker.episode import EpisodeTracker
from ajet.tracker.merge import MergeMode, MergeStats, build_samples, merge_calls
from ajet.tuner import Tuner
from ajet.workflow import Task, Workflow, WorkflowOutput

log = logging.getLogger(__name__)


def _default(section: type[BaseModel], name: str) -> Any:
    return section.model_fields[name].default


@dataclass
class RolloutSettings:
    """How one batch runs. `ajet.rollout.stack.settings_for(cfg, split)` builds it from the config;
    the defaults are the config's own, read from the schema (one training episode per task)."""

    group_size: int = 1
    concurrency: int = _default(RolloutConfig, "concurrency")
    temperature: float = _default(RolloutConfig, "temperature")
    top_p: float = _default(RolloutConfig, "top_p")
    max_tokens: int = _default(RolloutConfig, "max_tokens_per_turn")
    max_turns: int | None = _default(RolloutConfig, "max_turns")
    episode_timeout_s: float = _default(RolloutConfig, "episode_timeout_s")
    retries: int = _default(RolloutConfig, "retries")
    merge: MergeMode = _default(TrackerConfig, "merge")
    success_threshold: float = _default(JudgeConfig, "success_threshold")
    seed: int | None = None  # the batch seed (see ajet.rollout.seeds); None: the engine draws per request


@dataclass
class BatchResult:
    episodes: list[EpisodeResult]
    seconds: float
    merge: MergeStats = field(default_factory=MergeStats)

    @property
    def samples(self) -> list[Sample]:
        return [s for e in self.episodes for s in e.samples]

    def summary(self) -> dict[str, Any]:
        """Aggregates for reports and metrics.jsonl."""
        eps = self.episodes
        scored = [e for e in eps if e.reward is not None]
        n = max(len(eps), 1)
        parts: dict[str, list[float]] = {}
        for e in scored:
            for k, v in e.reward.parts.items():
                parts.setdefault(k, []).append(v)
        generated = sum(e.generated_tokens for e in eps)
        errors = Counter((e.error or "").split(":")[0] for e in eps if e.error)
        timed_out = [e for e in eps if e.counters.get("timed_out")]
        return {
            "episodes": len(eps),
            "failed": sum(1 for e in eps if e.error),
            "judge_failed": sum(1 for e in eps if e.judge_error),
            "errors": dict(errors),
            "timed_out": len(timed_out),
            # time the model was busy while the timed-out episodes ran: not counted against their timeout
            "timed_out_busy_s": _mean([e.counters.get("timeout_busy_s", 0.0) for e in timed_out]),
            "reward_mean": _mean([e.reward.total for e in scored]),
            "reward_std": _std([e.reward.total for e in scored]),
            "reward_parts": {k: _mean(v) for k, v in sorted(parts.items())},
            "success_rate": sum(1 for e in eps if e.success) / n,
            "turns_per_episode": _mean([len(e.calls) for e in eps]),
            "tokens_per_episode": _mean([e.generated_tokens for e in eps]),
            "tool_call_parse_failures": sum(e.counters.get("tool_call_parse_failures", 0) for e in eps),
            "tool_calls_parsed": sum(e.counters.get("tool_calls_parsed", 0) for e in eps),
            "tool_calls_json": sum(e.counters.get("tool_calls_json", 0) for e in eps),
            "truncated_completions": sum(e.counters.get("truncated", 0) for e in eps),
            "generated_tokens": generated,
            "tokens_per_s": generated / self.seconds if self.seconds else 0.0,
            "seconds": round(self.seconds, 2),
            "merge": self.merge.to_dict(),
            "workflow_metrics": workflow_metrics(eps),
        }

    def config_failure(self) -> str | None:
        """The error when every episode failed with a ConfigError (a server file that does not import,
        a bad workflow argument): no retry or later step can fix it. Else None."""
        errors = [e.error for e in self.episodes]
        if not errors or not all(err and err.startswith("ConfigError:") for err in errors):
            return None
        return Counter(errors).most_common(1)[0][0]


def workflow_metrics(episodes: list) -> dict[str, float]:
    """Each `WorkflowOutput.metrics` key averaged over the episodes that reported it (numbers only: a
    bool counts as 0/1, anything else or a non-finite number is left out)."""
    values: dict[str, list[float]] = {}
    for e in episodes:
        for key, value in ((e.output.metrics or {}) if e.output else {}).items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                values.setdefault(str(key), []).append(float(value))
    return {k: _mean(v) for k, v in sorted(values.items())}


def _error_text(exc: Exception) -> str:
    return str(exc) if isinstance(exc, UserCodeError) else f"{type(exc).__name__}: {exc}"


def _private(task: Task) -> Task:
    """A deep copy of `task` for user code (workflow, judge) to read or even rewrite: the reader's Task
    stays what episodes.jsonl logs, what the judge scores against and what later repeats and steps see."""
    try:
        return task.model_copy(deep=True)
    except Exception:  # noqa: BLE001 - a python reader's metadata holding something deepcopy refuses
        return task.model_copy(update={"metadata": dict(task.metadata)})


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = _mean(values)
    return (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5


class RolloutRunner:
    """Runs a workflow against a gateway (already serving at `base_url`) and scores it with a judge."""

    def __init__(
        self,
        gateway: Gateway,
        base_url: str,
        workflow: Workflow,
        judge: Judge,
        *,
        is_trained=lambda agent: True,
        external_agents: dict[str, tuple[str, str, str]] | None = None,
        writer: EpisodeWriter | None = None,
        decode=None,
        remote: Any = None,
        app: Any = None,
    ) -> None:
        self.gateway = gateway
        self.base_url = base_url
        self.workflow = workflow
        self.judge = judge
        self.is_trained = is_trained
        self.external_agents = external_agents or {}
        self.writer = writer
        self.remote = remote  # a RayEpisodePool (--with-ray): workflows run in its workers, not here
        self.app = app  # the gateway's ASGI app when served by this process: tuner clients call it in-process
        self._transport: InProcessTransport | None = None
        self.decode = decode or (lambda ids: gateway.tokenizer.decode(ids, skip_special_tokens=False))

    async def run(self, tasks: list[Task], settings: RolloutSettings, *, label: str = "rollout",
                  step: int | None = None, show_progress: bool = True) -> BatchResult:
        started = time.perf_counter()
        semaphore = asyncio.Semaphore(settings.concurrency)
        total = len(tasks) * settings.group_size
        with RolloutProgress(label, total, enabled=show_progress, concurrency=settings.concurrency) as progress:
            groups = await asyncio.gather(
                *(self._run_group(task, settings, semaphore, progress, step) for task in tasks)
            )
        episodes = [e for group in groups for e in group]
        merge = MergeStats()
        for e in episodes:
            merge.add(e.merge)
        batch = BatchResult(episodes, time.perf_counter() - started, merge)
        failure = batch.config_failure()
        if failure is not None:  # stop here: a training run would otherwise go on, step after empty step
            raise ConfigError(f"all {len(episodes)} episodes of {label} failed (retries included) with {failure}")
        return batch

    async def _run_group(self, task, settings, semaphore, progress, step) -> list[EpisodeResult]:
        group_id = task.task_id if step is None else f"{step}/{task.task_id}"

        async def one(repeat: int) -> EpisodeResult:
            async with semaphore:
                with progress.running():
                    result = await self._run_episode(task, repeat, group_id, settings)
            if not self.judge.scores_groups:
                await self._judge_one(result, settings)
                self._finish(result, settings, step, progress)
            return result

        results = list(await asyncio.gather(*(one(r) for r in range(settings.group_size))))
        if self.judge.scores_groups:
            await self._judge_group(task, results, settings)
            for result in results:
                self._finish(result, settings, step, progress)
        return results

    async def _run_episode(self, task: Task, repeat: int, group_id: str, settings: RolloutSettings) -> EpisodeResult:
        result = EpisodeResult(episode_id="", task=task, repeat=repeat, group_id=group_id)
        started = time.perf_counter()
        lost = 0
        for attempt in range(settings.retries + 1):
            avoid: set[int] = set()  # Ray workers this attempt was lost on
            while True:
                worker_lost = await self._attempt(result, task, repeat, attempt, settings, avoid)
                if worker_lost is None:
                    break
                lost += 1
                if len(avoid) >= self.remote.lost_retries:
                    break
                avoid.add(worker_lost.worker)  # rerun the same attempt (same seed) on another worker
            if lost:
                result.counters["worker_lost"] = lost
            if result.error is None:
                break
        result.seconds = time.perf_counter() - started
        if result.output is not None:
            result.output.metadata["ajet"] = {
                "tool_call_parse_failures": result.counters["tool_call_parse_failures"],
                "tool_calls_parsed": result.counters["tool_calls_parsed"],
                "tool_calls_json": result.counters["tool_calls_json"],
                "llm_calls": len(result.calls),
                "timed_out": result.counters["timed_out"],
                "truncated": result.counters["truncated"],
            }
        return result

    def _in_process(self) -> InProcessTransport | None:
        """One transport for every episode's clients, made in the loop that serves the gateway."""
        if self.app is None or self.remote is not None:
            return None
        if self._transport is None or self._transport.loop is not asyncio.get_running_loop():
            self._transport = InProcessTransport(self.app)
        return self._transport

    async def _attempt(self, result: EpisodeResult, task: Task, repeat: int, attempt: int,
                       settings: RolloutSettings, avoid: set[int]) -> Any:
        """One attempt of an episode, its outcome written into `result`; returns the WorkerLost when
        its Ray worker died (the attempt's calls are then dropped with its gateway session)."""
        lost = None
        result.attempts = attempt + 1
        result.episode_id = f"{task.task_id}-{repeat}-{uuid.uuid4().hex[:8]}"
        session = EpisodeSession(
            episode_id=result.episode_id, tracker=EpisodeTracker(result.episode_id),
            temperature=settings.temperature, top_p=settings.top_p, max_tokens=settings.max_tokens,
            max_turns=settings.max_turns, is_trained=self.is_trained,
            seed=episode_seed(settings.seed, task.task_id, repeat, attempt), route=result.group_id,
        )
        issue_key = self.gateway.open_episode(session)
        tuner = Tuner(self.base_url, self.gateway.model_name, issue_key, max_turns=settings.max_turns,
                      external=self.external_agents, transport=self._in_process())
        busy_at_start = self.gateway.busy.seconds()
        busy_not_counted = 0.0
        try:
            own = _private(task)  # a workflow may rewrite its Task: never the reader's, nor the judge's
            if self.remote is None:
                start = lambda: self.workflow.execute(own, tuner)  # noqa: E731
            else:  # in a Ray worker; the timeout is still measured (and enforced) here
                start = lambda: self.remote.execute(own, issue_key, settings.max_turns,  # noqa: E731
                                                    self.external_agents, self.gateway.model_name, avoid)
            output = await run_guarded(start, settings.episode_timeout_s,
                                       paused=lambda: self.gateway.busy.seconds() - busy_at_start)
            if not isinstance(output, WorkflowOutput):
                raise TypeError(f"execute() returned {type(output).__name__}; it must return ajet.WorkflowOutput")
            result.output, result.error = output, None
        except OwnTimeout as exc:
            result.error = f"TimeoutError: the workflow {exc} (rollout.episode_timeout_s)"
            busy_not_counted = exc.paused_s
        except UserCodeError as exc:
            result.error = str(exc)
        except Exception as exc:  # the user's workflow may raise anything: count it, never crash the batch
            result.error = f"{type(exc).__name__}: {exc}"
            if type(exc).__name__ == "WorkerLost":  # ajet.rollout.ray_pool: the caller may rerun it elsewhere
                lost = exc
            log.debug("episode %s failed:\n%s", result.episode_id, traceback.format_exc())
        finally:
            self.gateway.close_episode(result.episode_id)
            await tuner.aclose()
        result.calls = session.tracker.calls
        result.counters = {
            "tool_call_parse_failures": session.tool_call_parse_failures,
            "tool_calls_parsed": session.tool_calls_parsed,
            "tool_calls_json": session.tool_calls_json,
            "truncated": session.truncated,
            "timed_out": bool(result.error and result.error.startswith("TimeoutError")),
            "model_wait_s": round(session.model_clock.seconds(), 3),  # its own calls in the gateway
            "timeout_busy_s": round(busy_not_counted, 3),  # model-busy time not counted before timing out
        }
        return lost

    async def _judge_one(self, result: EpisodeResult, settings: RolloutSettings) -> None:
        if result.error is not None or result.output is None:
            return
        if result.output.reward is not None:
            result.reward, result.judge_error = checked_reward(result.output.reward, "the workflow set WorkflowOutput.reward")
            return
        try:
            reward = await run_guarded(lambda: self.judge.score(_private(result.task), result.output),
                                       who="the judge")
        except Exception as exc:  # a judge bug must not kill the run: the episode just gets no reward
            result.judge_error = _error_text(exc)
            return
        result.reward, result.judge_error = checked_reward(reward, "the judge returned")

    async def _judge_group(self, task: Task, results: list[EpisodeResult], settings: RolloutSettings) -> None:
        scorable = [r for r in results if r.error is None and r.output is not None and r.output.reward is None]
        for r in results:
            if r.error is None and r.output is not None and r.output.reward is not None:
                r.reward, r.judge_error = checked_reward(r.output.reward, "the workflow set WorkflowOutput.reward")
        if not scorable:
            return
        try:
            rewards = await run_guarded(lambda: self.judge.score_group(_private(task), [r.output for r in scorable]),
                                        who="the judge")
            if not isinstance(rewards, (list, tuple)) or len(rewards) != len(scorable):
                got = len(rewards) if isinstance(rewards, (list, tuple)) else type(rewards).__name__
                raise ValueError(f"score_group returned {got} rewards for {len(scorable)} episodes")
        except Exception as exc:
            for r in scorable:
                r.judge_error = _error_text(exc)
            return
        for r, reward in zip(scorable, rewards):
            r.reward, r.judge_error = checked_reward(reward, "the judge returned")

    def _finish(self, result: EpisodeResult, settings: RolloutSettings, step, progress: RolloutProgress) -> None:
        if result.reward is not None:
            verdict = result.output.is_success if result.output is not None else None
            result.success = success_of(result.reward, settings.success_threshold, verdict)
            turns = result.reward.turn_rewards
            result.samples, result.merge = build_samples(
                result.calls, reward=result.reward.total, group_id=result.group_id,
                episode_id=result.episode_id, task_id=result.task.task_id, repeat=result.repeat,
                mode=settings.merge, decode=self.decode, turn_rewards=turns,
            )
            if turns is not None:  # per-turn rewards that fit no sample's turns are dropped: say so
                result.counters["turn_rewards_dropped"] = sum(s.turn_rewards is None for s in result.samples)
        else:  # no reward, no samples; the merge stats still count its calls
            result.merge = merge_calls([c for c in result.calls if c.trained], settings.merge, self.decode)[1]
        if self.writer is not None:
            self.writer.write(result, step=step)
        progress.episode_done(result)
