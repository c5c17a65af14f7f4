"""`veritrail from-booookscore TRACE.json`: BooookScore summary traces → DAG files."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..dag import save_dag


@click.command("from-booookscore")
@click.argument("trace", type=click.Path(dir_okay=False, exists=True))
@click.option("--book", default=None, help="Convert only this book (its key in the file).")
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="DAG file (with --book).",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write one DAG per book here (<book>.json).",
)
def from_booookscore(
    trace: str, book: str | None, out_path: str | None, out_dir: str | None
) -> None:
    """Convert a BooookScore hierarchical or incremental trace file into DAGs.

    Hierarchical: chunk summaries (roots) → merged levels → final summary. Incremental: the
    chain of running summaries. See docs/adapters.md for the assumptions.
    """
    from ..adapters.booookscore import iter_book_dags, safe_filename

    if (out_path is None) == (out_dir is None):
        click.echo("error: give exactly one of --out (with --book) and --out-dir", err=True)
        sys.exit(2)
    if out_path is not None and book is None:
        click.echo("error: --out writes one DAG: name the book with --book", err=True)
        sys.exit(2)
    written = 0
    # A `BooookScoreError` or `DagValidationError` is reported by the group: exit 2.
    for name, dag in iter_book_dags(trace):
        if book is not None and name != book:
            continue
        if out_path is not None:
            save_dag(dag, out_path)
        else:
            assert out_dir is not None
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            save_dag(dag, Path(out_dir) / safe_filename(name))
        written += 1
    if written == 0:
        click.echo(f"error: no book named {book!r} in {trace}", err=True)
        sys.exit(2)
    click.echo(f"{written} DAG{'s' if written != 1 else ''} written to {out_path or out_dir}")
