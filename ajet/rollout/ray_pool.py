"""Episodes on Ray (`ajet --conf X.yaml --with-ray`, the `ray:` config section; docs/cluster.md).

The driver keeps everything that decides a result: the engine, the gateway (keys, rendering, the
tracker that records every call's tokens), the seeds, the timeouts, the judge and episodes.jsonl. Only
the user's workflow runs in the workers: `ray.num_workers` async actors (`EpisodeWorker`), each
running many episodes at once, spread over the cluster by Ray. So an episode reads the same whether
it ran in-process or on Ray.

A worker that dies (its process killed, its node lost) fails the episodes it was running with
`WorkerLost`; the runner closes their gateway sessions (their recorded calls are dropped, nothing is
counted twice) and reruns each once more on another worker (`ray.lost_retries`), with the same
seed. The dead actor is replaced, so the step goes on at full width.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ajet.config.schema import AjetConfig
from ajet.errors import ConfigError
from ajet.loopback import is_loopback
from ajet.rollout.guard import UserCodeError
from ajet.rollout.ray_worker import EpisodeWorker
from ajet.workflow import Task, WorkflowOutput

log = logging.getLogger(__name__)

WILDCARD_HOSTS = ("0.0.0.0", "::", "")


class WorkerLost(Exception):
    """The Ray worker running an episode died before answering."""

    def __init__(self, worker: int, reason: str) -> None:
        self.worker = worker
        super().__init__(f"Ray worker {worker} died while running the episode ({reason})")


class RayEpisodePool:
    """`start()` joins or starts Ray and creates the workers; `execute()` runs one workflow episode."""

    def __init__(self, cfg: AjetConfig) -> None:
        self.cfg = cfg
        self.settings = cfg.ray
        self.lost_retries = cfg.ray.lost_retries
        self.lost = 0  # workers found dead so far
        self.base_url = ""
        self._actors: list[Any] = []
        self._in_flight: list[int] = []
        self._owns_ray = False
        self._actor_class: Any = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, gateway_url: str, gateway_host: str) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("ray.enabled (--with-ray) needs Ray in this environment: pip install 'ajet[ray]' "
                              "(on every node of the cluster)") from None

        ray_cfg = self.settings
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True,
                                      "logging_level": logging.WARNING, "configure_logging": False}
            if ray_cfg.address is None:  # a private single-node Ray, kept small (a laptop, a test)
                cpus = ray_cfg.local_cpus or max(1, int(ray_cfg.num_workers * ray_cfg.cpus_per_worker + 0.999))
                # address="local": a new Ray, never one that `ray start` left running on this machine
                kwargs.update(address="local", num_cpus=cpus, num_gpus=0,
                              object_store_memory=ray_cfg.object_store_mb << 20)
            else:
                kwargs["address"] = ray_cfg.address
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(f"ray.address = {ray_cfg.address!r}: could not join the Ray cluster: {exc}") from None
            self._owns_ray = True
        self.base_url = self._advertised_url(gateway_url, gateway_host)
        self._actor_class = ray.remote(EpisodeWorker)
        self._actors = [self._new_actor() for _ in range(ray_cfg.num_workers)]
        self._in_flight = [0] * len(self._actors)
        try:  # the workflows' constructors ran: surface their errors now, as the in-process stack does
            ray.get([a.pid.remote() for a in self._actors], timeout=300)
        except Exception as exc:  # noqa: BLE001 - RayActorError wraps the constructor's exception
            self.shutdown()
            raise ConfigError(f"the Ray workers could not load the workflow: {_cause(exc)}") from None

    def _new_actor(self) -> Any:
        options: dict[str, Any] = {"num_cpus": self.settings.cpus_per_worker, "max_restarts": 0,
                                   "max_task_retries": 0}
        if self.settings.runtime_env:
            options["runtime_env"] = self.settings.runtime_env
        return self._actor_class.options(**options).remote(self.cfg)

    def _advertised_url(self, gateway_url: str, host: str) -> str:
        """The gateway URL as the workers must call it, checked against where the cluster's nodes are."""
        import ray

        port = gateway_url.rsplit(":", 1)[1]  # "<port>/v1"
        if self.settings.gateway_host:  # NAT, a DNS name: the host only, so each stack's own port is kept
            return f"http://{_url_host(self.settings.gateway_host)}:{port}"
        here = ray.util.get_node_ip_address()
        if host in WILDCARD_HOSTS:
            return f"http://{_url_host(here)}:{port}"
        if is_loopback(host):
            others = sorted({n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")} - {here, "127.0.0.1"})
            if others:
                raise ConfigError(f"the Ray cluster has nodes at {', '.join(others)}, but the gateway listens on "
                                  f"{host} only: set gateway.host=0.0.0.0 (its episode keys guard it) and open "
                                  "its port (gateway.port) to the workers (docs/cluster.md)")
        return gateway_url

    def pids(self) -> list[int]:
        """The workers' process ids (tests kill one)."""
        import ray

        return ray.get([a.pid.remote() for a in self._actors], timeout=60)

    def shutdown(self) -> None:
        import ray

        for actor in self._actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - already dead
                pass
        self._actors = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False

    # ------------------------------------------------------------------ episodes
    def _pick(self, avoid: set[int]) -> int:
        """The least busy worker, preferring those not in `avoid` (the ones an episode was lost on)."""
        candidates = [i for i in range(len(self._actors)) if i not in avoid] or list(range(len(self._actors)))
        return min(candidates, key=lambda i: (self._in_flight[i], i))

    async def execute(self, task: Task, issue_key: Callable[[str], str], max_turns: int | None,
                      external: dict[str, tuple[str, str, str]], model: str,
                      avoid: set[int] | None = None) -> WorkflowOutput | Any:
        """Run the workflow on `task` in a worker. Raises UserCodeError with the text the in-process
        rollout would record when the workflow failed, WorkerLost when the worker died."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError, TaskCancelledError, WorkerCrashedError

        index = self._pick(avoid or set())
        actor = self._actors[index]
        keys = {"assistant": issue_key("assistant")}
        self._in_flight[index] += 1
        ref = actor.run.remote(task, self.base_url, model, keys, max_turns, external)
        try:
            output, error = await ref
        except asyncio.CancelledError:  # the episode timed out, or the run stops: stop the worker's task too
            ray.cancel(ref)
            raise
        except (RayActorError, WorkerCrashedError) as exc:
            self._replace(index, actor)
            raise WorkerLost(index, _cause(exc)) from None
        except TaskCancelledError as exc:
            raise UserCodeError(f"CancelledError: the episode's Ray task was cancelled ({_cause(exc)})") from None
        except RayTaskError as exc:  # the output could not be sent back (not picklable), ...
            raise UserCodeError(f"RayTaskError: {_cause(exc)}") from None
        finally:
            if self._actors[index] is actor:  # a replaced worker's count starts again at 0
                self._in_flight[index] -= 1
        if error is not None:
            raise UserCodeError(error)
        return output

    def _replace(self, index: int, dead: Any) -> None:
        if self._actors[index] is not dead:  # another episode of the same worker replaced it already
            return
        self.lost += 1
        log.warning("Ray worker %d died; its episodes are rerun elsewhere and a new worker replaces it", index)
        self._actors[index] = self._new_actor()
        self._in_flight[index] = 0


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host  # an IPv6 address


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:500]
