"""`veritrail view [RUNS_DIR]`: the local web UI over the runs index
(docs/runs.md#the-web-view-veritrail-view)."""

from __future__ import annotations

import click

from .runs import DB_HELP, resolve_runs_dir


@click.command("view")
@click.argument("runs_dir", required=False, metavar="[RUNS_DIR]")
@click.option("--db", "db_url", default=None, metavar="URL", help=DB_HELP)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; any address but a loopback one needs --token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on (0: a free one, printed at start).",
)
@click.option(
    "--token",
    default=None,
    help="Require this token on every request (open the address once with ?token=T).",
)
@click.option(
    "--open/--no-open",
    "open_browser",
    default=False,
    show_default=True,
    help="Open the view in the default web browser.",
)
def view(
    runs_dir: str | None,
    db_url: str | None,
    host: str,
    port: int,
    token: str | None,
    open_browser: bool,
) -> None:
    """Browse, compare and review the runs of RUNS_DIR in a local web page.

    RUNS_DIR defaults to the runs_dir setting (`runs`). The index is created on first use
    (SQLite at RUNS_DIR/index.sqlite, or --db). Listens on 127.0.0.1 on a free port unless told
    otherwise; stop it with Ctrl-C. Nothing is fetched from the network and nothing is sent
    anywhere. Exit status: 2 for bad input or usage (a host beyond loopback without --token,
    a port in use, a database that cannot be used, the `view` extra missing).
    """
    from ..runs.view import serve

    root = resolve_runs_dir(runs_dir)

    def ready(url: str) -> None:
        click.echo(f"veritrail view of {root}: {url}")
        if token:
            click.echo("every request needs the token: open the address once with ?token=<--token>")
        click.echo("Ctrl-C stops it.")
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    serve(root, db_url=db_url, host=host, port=port, token=token, ready=ready)
