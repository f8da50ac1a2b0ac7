"""The API key of `ajet serve`, as vLLM's `--api-key` works, and the refusal to expose LoRA loading.

With a key (`--api-key KEY`, or the `VLLM_API_KEY` environment variable vLLM reads), every route but
`/health` and `/metrics` needs `Authorization: Bearer KEY`; anything else gets 401 with an
OpenAI-shaped error (`code: invalid_api_key`). vLLM keeps the same two routes open, so load
balancers' health checks and Prometheus scrapes need no key.

`/v1/load_lora_adapter` reads a folder from the server's disk, so `--enable-lora` on an interface
other than loopback needs a key: `check_exposure` refuses to start without one.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import secrets
from collections.abc import Mapping
from typing import Any

from ajet.errors import ConfigError
from ajet.gateway.request import openai_error

API_KEY_ENV = "VLLM_API_KEY"
PUBLIC_PATHS = ("/health", "/metrics")  # open without a key, as in vLLM


def resolve_api_key(flag: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The key from `--api-key`, else from VLLM_API_KEY; None when neither is set (or set empty)."""
    return flag or environ.get(API_KEY_ENV) or None


def is_loopback(host: str) -> bool:
    """Whether binding `host` is reachable only from this machine (127.0.0.0/8, ::1, 'localhost')."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # another host name: it may resolve to any interface
        return False


def check_exposure(host: str, enable_lora: bool, api_key: str | None) -> None:
    """Refuse runtime LoRA loading on a non-loopback interface without an API key (ConfigError, exit 2)."""
    if enable_lora and not api_key and not is_loopback(host):
        raise ConfigError(
            f"--enable-lora with --host {host} and no API key: anyone who can reach the port could load any "
            f"folder on this machine's disk as an adapter. Set --api-key KEY (or {API_KEY_ENV}), or bind a "
            "loopback host (--host 127.0.0.1) and put a proxy in front.")


class ApiKeyMiddleware:
    """Pure ASGI middleware: 401 unless `Authorization: Bearer <key>` matches, outside PUBLIC_PATHS."""

    def __init__(self, app: Any, api_key: str) -> None:
        self.app = app
        self._digest = hashlib.sha256(api_key.encode("utf-8")).digest()

    def _authorised(self, scope: dict[str, Any]) -> bool:
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        digest = hashlib.sha256(token.strip().encode("utf-8")).digest()
        # Compared as digests in constant time: the answer's timing says nothing about the key.
        return scheme.lower() == "bearer" and secrets.compare_digest(digest, self._digest)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") == "OPTIONS" or path in PUBLIC_PATHS \
                or self._authorised(scope):
            await self.app(scope, receive, send)
            return
        response = openai_error(401, "missing or wrong API key: send the key `ajet serve` was started with as "
                                "`Authorization: Bearer KEY`", code="invalid_api_key")
        await response(scope, receive, send)
