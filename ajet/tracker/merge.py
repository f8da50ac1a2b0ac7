"""Merge the LLM calls of an episode into training samples.

A call whose full token sequence (prompt + completion) is a prefix of a later call of the same agent
is absorbed by that later call: a linear multi-turn episode becomes ONE sample whose loss mask covers
every generated turn. A call that extends nothing it could extend starts a new sample (a fork), and
the fork's reason is recorded:

    different_agent   an earlier timeline of another agent is a prefix (agents never share samples)
    tools_changed     the same agent's previous call offered other tools
    think_stripped    an earlier generation came back with its <think> block removed
    retokenized       the earlier text is a prefix but its token ids differ (token mode only)
    history_edited    anything else: messages were dropped, edited or reordered
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from ajet.samples import Sample, trained_spans
from ajet.tracker.timeline import LLMCall

MergeMode = Literal["token", "text", "off"]


@dataclass
class Timeline:
    agent: str
    tokens: list[int]
    mask: list[int]
    logprobs: list[float]
    calls: list[int]  # indices of the LLM calls merged into it
    fork_reason: str | None = None
    last: LLMCall | None = None


@dataclass
class MergeStats:
    llm_calls: int = 0
    samples: int = 0
    tokens_before: int = 0  # sum over calls of prompt + completion tokens (one sample per call)
    tokens_after: int = 0  # sum over samples of their tokens
    trained_tokens: int = 0
    forks: Counter = field(default_factory=Counter)

    def add(self, other: MergeStats) -> None:
        self.llm_calls += other.llm_calls
        self.samples += other.samples
        self.tokens_before += other.tokens_before
        self.tokens_after += other.tokens_after
        self.trained_tokens += other.trained_tokens
        self.forks.update(other.forks)

    def to_dict(self) -> dict[str, Any]:
        ratio = self.tokens_after / self.tokens_before if self.tokens_before else 1.0
        return {
            "llm_calls": self.llm_calls,
            "samples": self.samples,
            "tokens_before_merge": self.tokens_before,
            "tokens_after_merge": self.tokens_after,
            "merge_token_ratio": round(ratio, 4),
            "trained_tokens": self.trained_tokens,
            "forks": dict(self.forks),
        }


def merge_calls(calls: list[LLMCall], mode: MergeMode = "token", decode=None) -> tuple[list[Timeline], MergeStats]:
    """Merge `calls` (in the order they were made). `decode(ids) -> str` is needed for text mode
    and for telling a retokenization apart from an edit."""
    stats = MergeStats(llm_calls=len(calls))
    timelines: list[Timeline] = []
    for call in sorted(calls, key=lambda c: c.index):
        stats.tokens_before += len(call.tokens)
        if mode == "off":
            tokens, mask, logprobs = call.timeline(train_context=False)
            timelines.append(Timeline(call.agent, tokens, mask, logprobs, [call.index], None, call))
            continue
        tokens, mask, logprobs = call.timeline(train_context=True)
        target = _find_prefix(timelines, call, tokens, mode, decode)
        if target is not None:
            _absorb(target, call, tokens, mask, logprobs, mode, decode)
            continue
        reason = _fork_reason(timelines, call, tokens, decode) if timelines else None
        if reason:
            stats.forks[reason] += 1
        timelines.append(Timeline(call.agent, tokens, mask, logprobs, [call.index], reason, call))
    stats.samples = len(timelines)
    stats.tokens_after = sum(len(t.tokens) for t in timelines)
    stats.trained_tokens = sum(sum(t.mask) for t in timelines)
    return timelines, stats


def _is_prefix(short: list[int], long: list[int]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


def _find_prefix(timelines, call, tokens, mode, decode) -> Timeline | None:
    for timeline in reversed(timelines):  # the most recent extendable timeline wins
        if timeline.agent != call.agent:
            continue
        if _is_prefix(timeline.tokens, tokens):
            return timeline
        if mode == "text" and decode is not None and decode(tokens).startswith(decode(timeline.tokens)):
            return timeline
    return None


def _absorb(target: Timeline, call, tokens, mask, logprobs, mode, decode) -> None:
    if mode == "text" and not _is_prefix(target.tokens, tokens):
        # Same text, other ids: train the later call's ids over the earlier generated span. Their
        # sampling logprobs are unknown (NaN); the trainer fills them with its own (ratio 1).
        start, end = _span_covering(tokens, decode, len(decode(target.tokens[: _prompt_len(target)])),
                                    len(decode(target.tokens)))
        for i in range(start, end):
            if not mask[i]:
                mask[i] = 1
                logprobs[i] = float("nan")
    target.tokens, target.mask, target.logprobs = tokens, mask, logprobs
    target.calls.append(call.index)
    target.last = call


def _prompt_len(timeline: Timeline) -> int:
    last = timeline.last
    return len(last.prompt_ids) if last is not None else len(timeline.tokens)


def _span_covering(tokens: list[int], decode, char_start: int, char_end: int) -> tuple[int, int]:
    """Token range [i, j) of `tokens` whose decoded text covers characters [char_start, char_end)."""

    def first_reaching(n_chars: int) -> int:
        lo, hi = 0, len(tokens)
        while lo < hi:
            mid = (lo + hi) // 2
            if len(decode(tokens[: mid + 1])) >= n_chars:
                hi = mid
            else:
                lo = mid + 1
        return lo

    return first_reaching(char_start + 1), first_reaching(char_end) + 1


def _fork_reason(timelines: list[Timeline], call: LLMCall, tokens: list[int], decode) -> str:
    for timeline in timelines:
        if timeline.agent != call.agent and _is_prefix(timeline.tokens, tokens):
            return "different_agent"
    same = [t for t in timelines if t.agent == call.agent]
    if not same:
        return "different_agent"
    previous = same[-1]
    if previous.last is not None and previous.last.tools_key != call.tools_key:
        return "tools_changed"
    if call.think_stripped:
        return "think_stripped"
    if decode is not None and decode(tokens).startswith(decode(previous.tokens)):
        return "retokenized"
    return "history_edited"


def build_samples(
    calls: list[LLMCall],
    *,
    reward: float,
    group_id: str,
    episode_id: str,
    task_id: str,
    repeat: int = 0,
    mode: MergeMode = "token",
    decode=None,
    turn_rewards: list[float] | None = None,
) -> tuple[list[Sample], MergeStats]:
    """Samples of one episode, for its trained agents only; every sample carries the episode reward.

    turn_rewards: one per trained call, in call order (`Reward.turn_rewards`); each sample gets those of the
    calls merged into it, when it has exactly one trained span per call (else None: a call that generated
    nothing, or a list of the wrong length, leaves the sample to its episode reward)."""
    trained = [c for c in calls if c.trained]
    timelines, stats = merge_calls(trained, mode, decode)
    by_call = ({c.index: float(r) for c, r in zip(sorted(trained, key=lambda c: c.index), turn_rewards)}
               if turn_rewards is not None and len(turn_rewards) == len(trained) else {})
    samples = [
        Sample(
            input_ids=t.tokens,
            loss_mask=t.mask,
            old_logprobs=t.logprobs,
            reward=reward,
            group_id=group_id,
            agent=t.agent,
            episode_id=episode_id,
            task_id=task_id,
            repeat=repeat,
            fork_reason=t.fork_reason,
            meta={"calls": t.calls},
            turn_rewards=[by_call[c] for c in t.calls] if by_call and len(trained_spans(t.mask)) == len(t.calls) else None,
        )
        for t in timelines
    ]
    return samples, stats
