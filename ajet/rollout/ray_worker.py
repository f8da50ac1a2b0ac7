"""The Ray actor that runs workflows on a worker node (`--with-ray`, see ajet.rollout.ray_pool).

One actor loads the user's workflow once (and whatever its constructor starts: an MCP server, a
sandbox) and runs many episodes at once on its own event loop. Each episode gets a `Tuner` bound to
the driver's gateway URL and the episode's key; the keys of the episode's other agents are asked of
the gateway (`POST /v1/ajet/keys`). The workflow's outcome goes back as `(output, None)` or
`(None, error text)`, the text exactly what the in-process rollout would record, so episodes.jsonl
reads the same whichever ran it. Timeouts are measured in the driver (they pause while the engine is
busy, which only the driver sees); it cancels the actor's task when one passes.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from ajet.config.schema import AjetConfig
from ajet.rollout.guard import UserCodeError, run_guarded
from ajet.rollout.loading import load_workflow
from ajet.tuner import Tuner
from ajet.workflow import Task, WorkflowOutput

KEY_TIMEOUT_S = 30.0


class KeyClient:
    """`issue_key(agent)` for a worker's Tuner: the keys handed over with the episode, else the gateway's."""

    def __init__(self, base_url: str, keys: dict[str, str], default_agent: str = "assistant") -> None:
        self.base_url = base_url.rstrip("/")
        self.keys = dict(keys)
        self.default_agent = default_agent

    def __call__(self, agent: str) -> str:
        key = self.keys.get(agent)
        if key is not None:
            return key
        # Blocking, once per extra agent and episode: the Tuner's key lookup is synchronous.
        response = httpx.post(f"{self.base_url}/ajet/keys", json={"agent": agent}, timeout=KEY_TIMEOUT_S,
                              headers={"authorization": f"Bearer {self.keys[self.default_agent]}"})
        if response.status_code != 200:
            raise RuntimeError(f"the gateway refused a key for agent {agent!r}: HTTP {response.status_code} "
                               f"{response.text[:300]}")
        key = self.keys[agent] = response.json()["key"]
        return key


class EpisodeWorker:
    """Wrapped by `ray.remote` in ajet.rollout.ray_pool; plain Python here so it is testable without Ray."""

    def __init__(self, cfg: AjetConfig) -> None:
        self.workflow = load_workflow(cfg)

    def pid(self) -> int:
        return os.getpid()

    async def run(self, task: Task, base_url: str, model: str, keys: dict[str, str], max_turns: int | None,
                  external: dict[str, tuple[str, str, str]]) -> tuple[WorkflowOutput | Any, str | None]:
        tuner = Tuner(base_url, model, KeyClient(base_url, keys), max_turns=max_turns, external=external)
        try:
            # No time limit here: the driver measures the episode's own time and cancels this task.
            return await run_guarded(lambda: self.workflow.execute(task, tuner)), None
        except UserCodeError as exc:
            return None, str(exc)
        except Exception as exc:  # noqa: BLE001 - the user's workflow may raise anything: it is reported as text
            return None, f"{type(exc).__name__}: {exc}"
        finally:
            await tuner.aclose()
