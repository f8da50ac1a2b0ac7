"""Who counts as "this machine only": the one rule for binding a server (the training gateway, `ajet serve`,
`ajet view`, the Ray pool's gateway address) and for the Host header a loopback-only server accepts.

Two copies of `is_loopback` once disagreed (the gateway's missed `[::1]` and `LOCALHOST`), and one of
them decided who may reach the training gateway; so there is one, here, below everything that binds.
"""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether binding `host` is reachable only from this machine: 127.0.0.0/8, ::1 (bare or in brackets),
    'localhost' in any case. Any other name may resolve to any interface, so it is not."""
    host = host.strip()
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_header_is_loopback(header: str | None) -> bool:
    """Whether an HTTP Host header names this machine by a loopback name: `127.0.0.1:8080`, `localhost`,
    `[::1]:8080`. A page on another site that rebinds its own DNS name to 127.0.0.1 (DNS rebinding) still
    sends its own name, so a loopback-only server that checks this never answers it."""
    if not header:
        return False
    host = header.strip()
    if host.startswith("["):  # [v6]:port
        host = host[: host.find("]") + 1] if "]" in host else host
    elif host.count(":") == 1:  # name:port or v4:port
        host = host.rsplit(":", 1)[0]
    return is_loopback(host)
