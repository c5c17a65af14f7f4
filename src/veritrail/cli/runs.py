"""`veritrail runs [ls]` lists the runs of a runs directory from its index (refreshed first,
incrementally); `veritrail runs reindex` rebuilds the index from the run directories
(docs/runs.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from ..runs.layout import INDEX_FILE

RUN_STATUSES = ("running", "interrupted", "complete", "incomplete")

RUNS_DIR_HELP = "The runs directory [default: the runs_dir setting, `runs`]."
DB_HELP = (
    "The index database: a postgresql:// URL or a SQLite file [default: $VERITRAIL_RUNS_DB, "
    f"else RUNS_DIR/{INDEX_FILE}]."
)


def resolve_runs_dir(value: str | None) -> Path:
    """`--runs-dir`, else the `runs_dir` setting as `veritrail verify` resolves it
    (`VERITRAIL_RUNS_DIR`, the TOML file, the default `runs`)."""
    if value:
        return Path(value)
    from ..run.settings import resolve_settings

    return Path(resolve_settings({}).runs_dir)


class _DefaultToLs(click.Group):
    """`veritrail runs [OPTIONS]` is `veritrail runs ls [OPTIONS]`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["ls", *args]
        return super().parse_args(ctx, args)


@click.group("runs", cls=_DefaultToLs, context_settings={"help_option_names": ["-h", "--help"]})
def runs() -> None:
    """The runs of a runs directory, from its index (SQLite, or PostgreSQL with --db).

    `veritrail runs` (= `veritrail runs ls`) lists them, newest first; `veritrail runs
    reindex` rebuilds the index from the run directories (a corrupt SQLite index is moved
    aside and rebuilt). Exit status: 0; 2 for bad input (an unknown directory, a database URL
    that cannot be used); 3 when the database fails (unreachable, locked, corrupt).
    """


def _when(value: str | None, flag: str, *, end_of_day: bool = False) -> datetime | None:
    """A date (`2025-05-01`) or time (`2025-05-01T09:30`, with an offset or `Z`); UTC unless
    it says otherwise. `end_of_day`: a date alone means the end of that day (for --until)."""
    if value is None:
        return None
    try:
        got = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a date (YYYY-MM-DD) or time (YYYY-MM-DDTHH:MM)", param_hint=flag
        ) from None
    if got.tzinfo is None:
        got = got.replace(tzinfo=UTC)
    if end_of_day and len(value.strip()) <= 10:
        got += timedelta(days=1)
    return got


def _pct(share: float | None) -> str:
    return "–" if share is None else f"{100 * share:.1f}%"


def _table(rows: list[Any]) -> Any:
    from rich.table import Table

    t = Table(show_lines=False, pad_edge=False)
    for name, justify in (
        ("run", "left"),
        ("DAG", "left"),
        ("model", "left"),
        ("created (UTC)", "left"),
        ("status", "left"),
        ("claims", "right"),
        ("unsupported", "right"),
        ("cost", "right"),
        ("reviewed", "right"),
    ):
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        dag = r.dag if not r.pipeline or r.pipeline == r.dag else f"{r.dag} ({r.pipeline})"
        done = f"{r.verified}/{r.claims}" if r.verified < r.claims else str(r.claims)
        t.add_row(  # names from outside, escaped: no terminal control reaches the screen
            _cell(r.id),
            _cell(dag),
            _cell(r.model),
            r.created.strftime("%Y-%m-%d %H:%M"),
            _cell(r.status),
            done,
            _pct(r.unsupported_share),
            f"${r.dollars:.4f}",
            str(r.reviewed),
        )
    return t


def _cell(text: str) -> Any:
    """A table cell shown as written: control characters escaped (`display.printable`), and
    no rich markup read from a run's name."""
    from rich.text import Text

    from ..display import printable

    return Text(printable(text))


def _warn_failed(stats: Any) -> None:
    from ..display import printable
    from ..redaction import redact

    for path, why in stats.failed:
        click.echo(
            printable(f"warning: {redact(path)} left out of the index: {redact(why)}"), err=True
        )
    for why in stats.warnings:
        click.echo(printable(f"warning: {redact(why)}"), err=True)


@runs.command("ls")
@click.option("--runs-dir", default=None, help=RUNS_DIR_HELP)
@click.option("--db", "db_url", default=None, metavar="URL", help=DB_HELP)
@click.option("--dag", default=None, help="Only runs whose DAG or pipeline name contains this.")
@click.option("--model", default=None, help="Only runs whose model name contains this.")
@click.option("--since", default=None, help="Only runs created on or after this date/time (UTC).")
@click.option("--until", default=None, help="Only runs created on or before this date/time (UTC).")
@click.option("--status", type=click.Choice(RUN_STATUSES), default=None, help="Only this status.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N runs.")
@click.option("--json", "as_json", is_flag=True, help="JSON (a list of runs) instead of a table.")
def ls(
    runs_dir: str | None,
    db_url: str | None,
    dag: str | None,
    model: str | None,
    since: str | None,
    until: str | None,
    status: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """List the runs, newest first, after bringing the index up to date (only run directories
    whose files changed since are read again)."""
    from ..runs.index import RunFilter, open_index

    flt = RunFilter(
        dag=dag,
        model=model,
        since=_when(since, "--since"),
        until=_when(until, "--until", end_of_day=True),
        status=status,
    )
    root = resolve_runs_dir(runs_dir)
    from .. import environment

    configured_db = db_url or environment.get("VERITRAIL_RUNS_DB")
    if runs_dir is None and not configured_db and not root.exists():
        # The default runs directory before the first run: nothing is wrong, there is nothing
        # yet (an explicit --runs-dir that does not exist stays bad input, exit 2).
        if as_json:
            click.echo("[]")
        else:
            click.echo(
                f"no runs yet: {root}/ does not exist; `veritrail verify` and `veritrail check` "
                "save their runs there"
            )
        return
    with open_index(root, db_url) as index:
        stats = index.refresh()
        rows = index.list_runs(flt, limit=limit)
    _warn_failed(stats)
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], indent=1, ensure_ascii=False))
        return
    if not rows:
        click.echo("no runs" + (" match" if flt != RunFilter() else f" in {index.root}"))
        return
    from rich.console import Console

    console = Console()
    Console(width=console.width if console.is_terminal else 200).print(_table(rows))


@runs.command("reindex")
@click.option("--runs-dir", default=None, help=RUNS_DIR_HELP)
@click.option("--db", "db_url", default=None, metavar="URL", help=DB_HELP)
def reindex(runs_dir: str | None, db_url: str | None) -> None:
    """Rebuild the index from the run directories (they are the source of truth)."""
    from ..runs.index import open_index

    with open_index(resolve_runs_dir(runs_dir), db_url, rebuild_corrupt=True) as index:
        moved = index.moved_aside
        stats = index.reindex()
        where = index.display_url
    if moved is not None:
        click.echo(
            f"warning: the index was not a database: moved aside to {moved}, rebuilt from the "
            "run directories",
            err=True,
        )
    _warn_failed(stats)
    click.echo(f"indexed {stats.added} runs in {stats.seconds:.2f} s ({where})")
