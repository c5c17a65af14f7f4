"""`veritrail cache stats|clear`: inspect or empty the model response cache."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import InputProblem
from ..lm.cache import ResponseCache, default_cache_path
from ..records import Step

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
@click.option(
    "--step",
    default=None,
    help="Only clear this step's namespace: one of the method's steps or a namespace the "
    "cache holds (see `veritrail cache stats`).",
)
def clear(cache_path: Path | None, step: str | None) -> None:
    """Delete cached replies (all, or one step's)."""
    path = cache_path or default_cache_path()
    if not path.exists():
        _check_step(step, ())
        click.echo(f"{path}: no cache yet")
        return
    c = ResponseCache(path)  # a `CacheOpenError` is reported by the group: exit 2
    try:
        _check_step(step, [ns.namespace for ns in c.stats().namespaces])
        n = c.clear(step)
    finally:
        c.close()
    click.echo(f"{path}: deleted {n} entries" + (f" of step {step}" if step else ""))


def _check_step(step: str | None, stored: tuple[str, ...] | list[str]) -> None:
    """Raise `InputProblem` (exit 2) for a `--step` that is neither one of the method's steps nor
    a namespace in the cache: a typo would otherwise delete nothing and look like success.
    Stored namespaces count as known because pipelines and detectors name their own steps."""
    if step is None:
        return
    known = [s.value for s in Step] + sorted(set(stored) - {s.value for s in Step})
    if step not in known:
        raise InputProblem(f"unknown step {step!r} for --step; known steps: {', '.join(known)}")
