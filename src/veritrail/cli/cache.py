"""`veritrail cache stats|clear`: inspect or empty the model response cache."""

from __future__ import annotations

from pathlib import Path

import click

from ..lm.cache import ResponseCache, default_cache_path

_cache_option = click.option(
    "--cache",
    "cache_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Cache file (default: $VERITRAIL_CACHE_DIR/cache.sqlite or ~/.cache/veritrail/cache.sqlite).",
)


@click.group()
def cache() -> None:
    """Inspect or clear the model response cache."""


@cache.command()
@_cache_option
def stats(cache_path: Path | None) -> None:
    """Entries and tokens per step, and the file size."""
    path = cache_path or default_cache_path()
    if not path.exists():
        click.echo(f"{path}: no cache yet")
        return
    c = ResponseCache(path)  # a `CacheOpenError` is reported by the group: exit 2
    try:
        s = c.stats()
    finally:
        c.close()
    click.echo(f"{s.path}: {s.entries} entries, {s.size_bytes / 1e6:.2f} MB")
    for ns in s.namespaces:
        click.echo(
            f"  {ns.namespace:<24} {ns.entries:>8} entries  "
            f"{ns.input_tokens:>10} input tokens  {ns.output_tokens:>9} output tokens"
        )


@cache.command()
@_cache_option
@click.option("--step", default=None, help="Only clear this step's namespace.")
def clear(cache_path: Path | None, step: str | None) -> None:
    """Delete cached replies (all, or one step's)."""
    path = cache_path or default_cache_path()
    if not path.exists():
        click.echo(f"{path}: no cache yet")
        return
    c = ResponseCache(path)  # a `CacheOpenError` is reported by the group: exit 2
    try:
        n = c.clear(step)
    finally:
        c.close()
    click.echo(f"{path}: deleted {n} entries" + (f" of step {step}" if step else ""))
