"""Several replicas of the same model behind one gateway (`engine.base_urls`), each a vLLM-protocol
server (`vllm serve`, `ajet serve`), with routing that keeps prefixes where their cache is.

Routing: a request carries a route key (the gateway sets `route_key` to the episode's GRPO group id for
the duration of its engine call). The first request of a key goes to the least busy replica (requests
in flight, then keys held); every later request of that key goes to the same replica. So an episode's
turns (each prompt extends the previous one) and a group's episodes (the same system prompt, tools and
query) hit one replica's prefix cache, and groups spread over the replicas. A request without a key
(not from an episode) goes to the least busy replica.

A replica that cannot be reached is set aside for `DOWN_S` seconds; its keys move to the others and
the request is sent again there, so one replica dying costs a retry, not the episode.

LoRA: `load_adapter` / `unload_adapter` go to every replica (each must see the adapter folder at the
same path), so whichever replica a request lands on serves the weights the trainer just published. A
load is all or nothing: when a replica refuses it, the others unload it again.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import time
from collections import OrderedDict
from typing import Any

import httpx

from ajet.engine.base import Generation, SamplingParams
from ajet.engine.remote import RemoteEngine
from ajet.errors import EngineError

route_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("ajet_route_key", default=None)
MAX_KEYS = 16384  # route keys remembered (least recently used dropped first)
DOWN_S = 30.0  # how long an unreachable replica is left out


class ReplicatedEngine(RemoteEngine):
    """A RemoteEngine over several servers (a RemoteEngine, so LoRA publishing treats it as one)."""

    def __init__(self, base_urls: list[str], model: str | None = None, api_key: str = "EMPTY", timeout_s: float = 300,
                 tokenizer: Any = None, **kwargs: Any) -> None:
        if not base_urls:
            raise EngineError("engine.base_urls is empty: list at least one server")
        super().__init__(base_urls[0], model=model, api_key=api_key, timeout_s=timeout_s, tokenizer=tokenizer, **kwargs)
        self.replicas = [RemoteEngine(url, model=model, api_key=api_key, timeout_s=timeout_s, tokenizer=tokenizer,
                                      **kwargs) for url in base_urls]
        self.base_urls = [r.base_url for r in self.replicas]
        self.in_flight = [0] * len(self.replicas)
        self.served = [0] * len(self.replicas)  # requests answered, per replica
        self._routes: OrderedDict[str, int] = OrderedDict()
        self._held = [0] * len(self.replicas)  # route keys per replica, kept with _routes
        self._down_until = [0.0] * len(self.replicas)

    async def start(self) -> None:
        for replica in self.replicas:
            replica._http()
        # One model name for all: the first reachable replica's (they serve the same model).
        for replica in self.replicas:
            try:
                self.model = await replica._resolve_model()
                break
            except EngineError:
                continue
        if self.model is None:
            raise EngineError(f"none of engine.base_urls answers: {', '.join(self.base_urls)}")
        for replica in self.replicas:
            replica.model = self.model

    async def close(self) -> None:
        for replica in self.replicas:
            await replica.close()

    # ------------------------------------------------------------------ routing
    def _up(self) -> list[int]:
        now = time.monotonic()
        up = [i for i, until in enumerate(self._down_until) if until <= now]
        return up or list(range(len(self.replicas)))  # all down: try them anyway

    def pick(self, key: str | None) -> int:
        """The replica for a request with route key `key` (see the module docstring)."""
        up = self._up()
        if key is not None:
            index = self._routes.get(key)
            if index is not None and index in up:
                self._routes.move_to_end(key)
                return index
        index = min(up, key=lambda i: (self.in_flight[i], self._held[i], i))
        if key is not None:
            previous = self._routes.pop(key, None)  # its replica is down: the key moves
            if previous is not None:
                self._held[previous] -= 1
            self._routes[key] = index
            self._held[index] += 1
            while len(self._routes) > MAX_KEYS:
                self._held[self._routes.popitem(last=False)[1]] -= 1
        return index

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        key = route_key.get()
        sampling = dataclasses.replace(sampling, adapter=sampling.adapter or self.adapter)
        tried: set[int] = set()
        while True:
            index = self.pick(key)
            if index in tried:  # every replica up has failed this request
                raise EngineError(f"no replica of engine.base_urls could answer ({', '.join(self.base_urls)})")
            tried.add(index)
            self.in_flight[index] += 1
            try:
                generation = await self.replicas[index].generate(prompt_ids, sampling)
            except EngineError as exc:
                if not _unreachable(exc) or len(self.replicas) == 1:
                    raise
                self._down_until[index] = time.monotonic() + DOWN_S  # its keys move on at the next pick
                continue
            finally:
                self.in_flight[index] -= 1
            self.served[index] += 1
            return generation

    # ------------------------------------------------------------------ LoRA
    async def load_adapter(self, name: str, path: str) -> None:
        """Load on every replica or on none: when one refuses, the replicas that loaded it unload it again
        (so no two replicas serve different weights under one name) and the refusal is raised."""
        results = await asyncio.gather(*(r.load_adapter(name, path) for r in self.replicas), return_exceptions=True)
        failed = [(r, e) for r, e in zip(self.replicas, results) if isinstance(e, BaseException)]
        if not failed:
            return
        loaded = [r for r, e in zip(self.replicas, results) if not isinstance(e, BaseException)]
        await asyncio.gather(*(r.unload_adapter(name) for r in loaded), return_exceptions=True)
        first = failed[0][1]
        if not isinstance(first, Exception):  # a cancellation: pass it on
            raise first
        where = ", ".join(r.base_url for r, _ in failed)
        raise EngineError(f"{first} [refused by {len(failed)} of {len(self.replicas)} replicas ({where}); unloaded "
                          f"again from the {len(loaded)} that had loaded it]") from first

    async def unload_adapter(self, name: str) -> None:
        """Unload from every replica; one that does not have it (HTTP 404, e.g. after a rolled-back load) is
        already where it should be. EngineError when none had it, or a replica failed otherwise."""
        results = await asyncio.gather(*(r.unload_adapter(name) for r in self.replicas), return_exceptions=True)
        errors = [e for e in results if isinstance(e, BaseException)]
        other = [e for e in errors if not (isinstance(e, EngineError) and "answered HTTP 404" in str(e))]
        if other or len(errors) == len(self.replicas):
            raise (other or errors)[0]


def _unreachable(exc: EngineError) -> bool:
    """The replica is gone (connection refused or dropped), as opposed to refusing this request."""
    return isinstance(exc.__cause__, (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError,
                                      httpx.ReadError))
