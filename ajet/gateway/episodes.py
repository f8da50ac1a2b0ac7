"""API keys: one per episode and agent. A key tells the gateway whose call it is; unknown or finished
keys are refused. `BusyClock` measures the time LLM calls spend in the gateway (rendered, queued
for the engine, generated): the rollout leaves the gateway's busy time out of an episode's own time
(`rollout.episode_timeout_s`), and reports each episode's own calls' time."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ajet.tracker.episode import EpisodeTracker


@dataclass
class EpisodeSession:
    """Gateway-side state of one running episode."""

    episode_id: str
    tracker: EpisodeTracker
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256  # cap of max_tokens per call, and its default unless default_max_tokens is set
    default_max_tokens: int | None = None
    max_turns: int | None = None  # per agent
    is_trained: Callable[[str], bool] = lambda agent: True
    record: bool = True
    seed: int | None = None
    route: str | None = None  # the replica-routing key (the GRPO group): its calls share one replica's prefix cache
    tool_call_parse_failures: int = 0
    tool_calls_parsed: int = 0
    tool_calls_json: int = 0  # of those, written as plain or fenced JSON rather than in <tool_call> tags
    truncated: int = 0  # completions that hit max_tokens
    keys: dict[str, str] = field(default_factory=dict)  # agent -> key
    model_clock: BusyClock = field(default_factory=lambda: BusyClock())  # this episode's calls in the gateway

    def call_seed(self) -> int | None:
        """The seed of the next call that names none: the episode's seed mixed with the call's index.
        One seed for every call would replay the same random draws at each turn (a near-uniform
        model then writes the same reply every turn)."""
        return None if self.seed is None else derive_seed(self.seed, self.tracker.next_index())

    def calls_of(self, agent: str) -> int:
        return sum(1 for c in self.tracker.calls if c.agent == agent)


def derive_seed(base: int, *parts: object) -> int:
    """A 63-bit seed from `base` and `parts`, stable across processes (unlike hash() of a str), so a
    resumed or repeated run draws the same numbers and different parts draw independent ones."""
    digest = hashlib.sha256(repr((base, *parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class BusyClock:
    """Wall time during which at least one holder is inside (the union of their intervals): the time
    a gateway, or one episode's calls, spent answering LLM calls. Used from one event loop."""

    def __init__(self) -> None:
        self._holders = 0
        self._since = 0.0
        self._total = 0.0

    def hold(self) -> BusyClock:
        """`with clock.hold():` the block counts as busy; holds nest. The clock is its own context
        manager: two are entered per call, and a generator-based one costs ~1 us each."""
        return self

    def __enter__(self) -> None:
        if self._holders == 0:
            self._since = time.perf_counter()
        self._holders += 1

    def __exit__(self, *exc: object) -> None:
        self._holders -= 1
        if self._holders == 0:
            self._total += time.perf_counter() - self._since

    def seconds(self) -> float:
        """Busy seconds so far, including a stretch still under way."""
        return self._total + (time.perf_counter() - self._since if self._holders else 0.0)


class KeyRegistry:
    """Issues and checks keys. Keys are random, so they cannot be forged from an episode id."""

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[EpisodeSession, str]] = {}
        self._sessions: dict[str, EpisodeSession] = {}
        self._issuers: dict[str, Callable[[str], str]] = {}
        self._lock = threading.Lock()

    def open(self, session: EpisodeSession) -> Callable[[str], str]:
        """Register `session`; returns `issue_key(agent) -> key` for its Tuner."""
        with self._lock:
            if session.episode_id in self._sessions:
                raise ValueError(f"episode {session.episode_id!r} is already open")
            self._sessions[session.episode_id] = session

        def issue_key(agent: str) -> str:
            with self._lock:
                if session.episode_id not in self._sessions:
                    raise RuntimeError(f"episode {session.episode_id!r} is finished; it cannot issue keys")
                key = session.keys.get(agent)
                if key is None:
                    key = f"ajet-{secrets.token_urlsafe(18)}"
                    session.keys[agent] = key
                    self._by_key[key] = (session, agent)
                return key

        with self._lock:
            self._issuers[session.episode_id] = issue_key
        return issue_key

    def issue_for(self, key: str | None, agent: str) -> str | None:
        """A key for `agent` in the episode that `key` belongs to (a Ray worker's Tuner asks the gateway
        for its other agents' keys); None when `key` is unknown or finished."""
        found = self.resolve(key)
        if found is None:
            return None
        with self._lock:
            issuer = self._issuers.get(found[0].episode_id)
        if issuer is None:
            return None
        try:
            return issuer(agent)
        except RuntimeError:  # the episode finished between the two looks
            return None

    def resolve(self, key: str | None) -> tuple[EpisodeSession, str] | None:
        if not key:
            return None
        with self._lock:
            return self._by_key.get(key)

    def close(self, episode_id: str) -> EpisodeSession | None:
        """Finish an episode: its keys stop working at once."""
        with self._lock:
            session = self._sessions.pop(episode_id, None)
            self._issuers.pop(episode_id, None)
            if session is not None:
                for key in session.keys.values():
                    self._by_key.pop(key, None)
            return session

    def __len__(self) -> int:
        return len(self._sessions)
