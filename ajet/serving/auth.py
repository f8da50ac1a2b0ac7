"""Who may reach a server ajet starts: the API key of `ajet serve` (as vLLM's `--api-key` works) and of
`ajet view`, the refusal to expose what reads the disk beyond loopback without one, and the Host check
of a loopback-only server.

With a key (`--api-key KEY`, or the `VLLM_API_KEY` environment variable vLLM reads), every route but
`/health` and `/metrics` needs `Authorization: Bearer KEY`; anything else gets 401 with an
OpenAI-shaped error (`code: invalid_api_key`). vLLM keeps the same two routes open, so load
balancers' health checks and Prometheus scrapes need no key.

`require_key_beyond_loopback` is the one decision: a server that reads the machine's disk for its
clients (`ajet serve --enable-lora` loads any folder as an adapter; `ajet view` serves run folders)
does not start on an interface other than loopback without a key. `ajet view` bound to loopback also
checks the Host header (`LoopbackHostMiddleware`), so a web page that rebinds its DNS name to
127.0.0.1 cannot read it from the user's browser.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Mapping
from typing import Any

from ajet.errors import ConfigError
from ajet.gateway.request import openai_error
from ajet.loopback import host_header_is_loopback, is_loopback

API_KEY_ENV = "VLLM_API_KEY"
PUBLIC_PATHS = ("/health", "/metrics")  # open without a key, as in vLLM


def resolve_api_key(flag: str | None, environ: Mapping[str, str] = os.environ, env: str = API_KEY_ENV) -> str | None:
    """The key from `--api-key`, else from the environment variable `env` (VLLM_API_KEY for `ajet serve`);
    None when neither is set (or set empty)."""
    return flag or environ.get(env) or None


def require_key_beyond_loopback(host: str, api_key: str | None, server: str, could: str, key_from: str) -> None:
    """Refuse to start a server that reads this machine's disk for its clients on a non-loopback `host`
    without an API key (ConfigError, exit 2). `could`: what anyone reaching the port could then do."""
    if not api_key and not is_loopback(host):
        raise ConfigError(
            f"{server} with --host {host} and no API key: anyone who can reach the port could {could}. Set "
            f"{key_from}, or bind a loopback host (--host 127.0.0.1) and forward the port (ssh -L) or put a "
            "proxy in front.")


def check_exposure(host: str, enable_lora: bool, api_key: str | None) -> None:
    """Refuse runtime LoRA loading on a non-loopback interface without an API key (ConfigError, exit 2)."""
    if enable_lora:
        require_key_beyond_loopback(host, api_key, "--enable-lora", "load any folder on this machine's disk as an "
                                    "adapter", f"--api-key KEY (or {API_KEY_ENV})")


class ApiKeyMiddleware:
    """Pure ASGI middleware: 401 unless `Authorization: Bearer <key>` matches, outside `public_paths` and
    paths under `public_prefixes`."""

    def __init__(self, app: Any, api_key: str, public_paths: tuple[str, ...] = PUBLIC_PATHS,
                 public_prefixes: tuple[str, ...] = ()) -> None:
        self.app = app
        self._digest = hashlib.sha256(api_key.encode("utf-8")).digest()
        self.public_paths = public_paths
        self.public_prefixes = public_prefixes

    def _authorised(self, scope: dict[str, Any]) -> bool:
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        digest = hashlib.sha256(token.strip().encode("utf-8")).digest()
        # Compared as digests in constant time: the answer's timing says nothing about the key.
        return scheme.lower() == "bearer" and secrets.compare_digest(digest, self._digest)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") == "OPTIONS" or path in self.public_paths \
                or any(path.startswith(prefix) for prefix in self.public_prefixes) or self._authorised(scope):
            await self.app(scope, receive, send)
            return
        response = openai_error(401, "missing or wrong API key: send the key `ajet serve` was started with as "
                                "`Authorization: Bearer KEY`", code="invalid_api_key")
        await response(scope, receive, send)


class LoopbackHostMiddleware:
    """Pure ASGI middleware for a server bound to loopback: 403 unless the Host header names a loopback
    host (`127.0.0.1:8080`, `localhost`, `[::1]:8080`). A page on another site that rebinds its DNS name
    to 127.0.0.1 sends its own name, so it is refused (DNS rebinding)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        if host_header_is_loopback(host):
            await self.app(scope, receive, send)
            return
        response = openai_error(403, f"Host {host!r} is not this machine's loopback name: this server answers "
                                "only requests addressed to 127.0.0.1, localhost or [::1]", code="host_not_allowed")
        await response(scope, receive, send)
