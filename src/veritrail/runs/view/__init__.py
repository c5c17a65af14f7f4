"""`veritrail view`: a local web UI over the runs index
(docs/runs.md#the-web-view-veritrail-view).

`serve(runs_dir, ...)` opens the index (created on first use), builds the application
(`app.create_app`) and serves it with uvicorn on 127.0.0.1 by default. Its parts: `safety`
(what may reach the server and what a page may do: token, CSRF, Host and Origin checks,
security headers), `pages` (the Jinja2 templates and the inline SVG charts), `app` (the routes).
The pages, stylesheets and the trail viewer are package data: nothing is fetched from elsewhere,
no script but the trail viewer's own runs, nothing is reported anywhere.

Needs the `view` extra (`pip install 'veritrail[view]'`: Starlette, uvicorn, Jinja2).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from .safety import ViewUsageError, check_bind, is_loopback

EXTRA_HINT = "veritrail view needs its extra: pip install 'veritrail[view]'"


def require_extra() -> None:
    """Raise `ViewUsageError` (exit 2) naming the extra when Starlette, uvicorn or Jinja2 is
    missing."""
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ViewUsageError(f"{EXTRA_HINT} ({exc.name} is missing)") from None


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free port); `ViewUsageError` when it cannot."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ViewUsageError(f"--host {host}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ViewUsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """The address of the server listening on `sock`."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(
    runs_dir: str | Path,
    *,
    db_url: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the view of `runs_dir` until interrupted. `ready(url)` is called once it listens.
    Raises `ViewUsageError` (exit 2) for a non-loopback host without a token, a missing extra, a
    port in use; `RunsIndexError` (exit 2) for an index that cannot be opened."""
    check_bind(host, token)
    require_extra()
    import uvicorn

    from ..index import open_index
    from .app import create_app
    from .safety import Guard

    with open_index(runs_dir, db_url) as index:
        index.refresh()  # the index is created and filled on first use
        app = create_app(index, Guard.create(token))
        sock = bind(host, port)
        config = uvicorn.Config(
            app, lifespan="off", log_level="warning", access_log=False, server_header=False
        )
        server = uvicorn.Server(config)
        if ready is not None:
            ready(url_of(sock))
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()


__all__ = ["EXTRA_HINT", "bind", "is_loopback", "require_extra", "serve", "url_of"]
