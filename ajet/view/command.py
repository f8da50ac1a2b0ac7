"""`ajet view RUN_DIR [RUN_DIR ...]`: serve the viewer on a local port, print its address, and open
it in a browser when this machine has one (a desktop session) and --no-browser was not given."""

from __future__ import annotations

import os
import socket
import sys
import threading
import webbrowser
from pathlib import Path

from ajet.view.run_folder import RunFolder, ViewError


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


def main(run_dirs: list[str], host: str = "127.0.0.1", port: int = 0, open_browser: bool = True) -> int:
    import uvicorn

    from ajet.view.app import create_app

    runs = [RunFolder(Path(path), i) for i, path in enumerate(run_dirs)]
    sock = bind(host, port)
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{sock.getsockname()[1]}/"
    names = ", ".join(run.name() for run in runs)
    print(f"ajet view: {url}  ({names}; read-only; Ctrl-C to stop)", flush=True)
    if open_browser and browser_available():
        threading.Timer(0.5, webbrowser.open, (url,)).start()
    server = uvicorn.Server(uvicorn.Config(create_app(runs), log_level="warning"))
    server.run(sockets=[sock])
    return 0
