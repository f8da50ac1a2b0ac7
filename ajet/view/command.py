"""`ajet view RUN_DIR [RUN_DIR ...]`: serve the viewer on a local port, print its address, and open
it in a browser when this machine has one (a desktop session) and --no-browser was not given.

Beyond loopback (`--host 0.0.0.0`) it needs a key (`--api-key KEY` or AJET_VIEW_API_KEY) and refuses to
start without one, as `ajet serve --enable-lora` does (ajet/serving/auth.py: one rule for both): the run
folders hold prompts, answers and configs. The printed address carries the key (`/?key=KEY`); the page
sends it with every API call."""

from __future__ import annotations

import os
import socket
import sys
import threading
import webbrowser
from pathlib import Path
from urllib.parse import quote

from ajet.view.run_folder import RunFolder, ViewError

KEY_ENV = "AJET_VIEW_API_KEY"


def browser_available() -> bool:
    """A browser that can show a page: on Linux only inside a graphical session (a server or a
    container may have a text browser or none; `webbrowser` would then block or fail)."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False
    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    return True


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 takes a free one (the caller reads which from the socket)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ViewError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port, or --port 0 "
                        "for a free one") from None
    sock.listen(128)
    return sock


def main(run_dirs: list[str], host: str = "127.0.0.1", port: int = 0, open_browser: bool = True,
         api_key: str | None = None) -> int:
    import uvicorn

    from ajet.loopback import is_loopback
    from ajet.serving.auth import require_key_beyond_loopback, resolve_api_key
    from ajet.view.app import create_app

    api_key = resolve_api_key(api_key, env=KEY_ENV)
    require_key_beyond_loopback(host, api_key, "ajet view", "read every run folder given (prompts, answers, "
                                "configs)", f"--api-key KEY (or {KEY_ENV})")
    runs = [RunFolder(Path(path), i) for i, path in enumerate(run_dirs)]
    sock = bind(host, port)
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{sock.getsockname()[1]}/" + ("?key=" + quote(api_key, safe="") if api_key else "")
    names = ", ".join(run.name() for run in runs)
    print(f"ajet view: {url}  ({names}; read-only; Ctrl-C to stop)", flush=True)
    if open_browser and browser_available():
        threading.Timer(0.5, webbrowser.open, (url,)).start()
    app = create_app(runs, api_key=api_key, loopback_only=is_loopback(host))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])
    return 0
