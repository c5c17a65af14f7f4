"""`veritrail watch --phoenix URL --project P --sample RATE`: verify a Phoenix project's traces as
they arrive and write the verdicts back onto their spans (`veritrail.adapters.phoenix.watch`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from .common import EXIT_CODES_HELP, fail, job_errors

if TYPE_CHECKING:
    pass


@click.command("watch", epilog=EXIT_CODES_HELP + " A failed poll (Phoenix unreachable) is 3.")
@click.option("--phoenix", "url", required=True, metavar="URL", help="The Phoenix server.")
@click.option("--project", required=True, help="The Phoenix project to watch.")
@click.option(
    "--sample",
    type=click.FloatRange(0, 1),
    required=True,
    metavar="RATE",
    help="Share of traces to verify (0 to 1), chosen by a hash of the trace id: replicas and "
    "restarts take the same traces.",
)
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only traces with a span whose KEY (name, span_kind or status_code) is VALUE; "
    "repeat to require several.",
)
@click.option(
    "--settle",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="A trace is taken once no span of it has arrived or changed for this long.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between polls.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Traces verified at once.",
)
@click.option(
    "--checkpoint",
    type=click.Path(dir_okay=False),
    default=None,
    help="The checkpoint file [default: RUNS_DIR/watch-<project>.json].",
)
@click.option(
    "--since", default=None, metavar="TIME", help="Ignore traces started before TIME (ISO 8601)."
)
@click.option(
    "--once", is_flag=True, help="Stop when every trace seen is finished, instead of watching on."
)
@click.option("--model", default=None, help="provider/model [default: the default model].")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint of the model.")
@click.option(
    "--max-unsupported",
    type=float,
    default=None,
    metavar="RATE",
    help="Gate per trace: exit 1 at the end when some trace's share of Not Fully Supported "
    "claims was above RATE.",
)
@click.option("--runs-dir", default=None, help="Parent of the run directories [default: runs].")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="TOML settings file [default: ./veritrail.toml if present].",
)
@click.option("--quiet", is_flag=True, help="Print only errors.")
def watch(
    url: str,
    project: str,
    sample: float,
    filters: tuple[str, ...],
    settle: float,
    interval: float,
    concurrency: int,
    checkpoint: str | None,
    since: str | None,
    once: bool,
    model: str | None,
    base_url: str | None,
    max_unsupported: float | None,
    runs_dir: str | None,
    config_path: str | None,
    quiet: bool,
) -> None:
    """Verify a Phoenix project's traces as they finish and annotate them.

    Polls Phoenix every --interval seconds; a trace is taken once it has been quiet for
    --settle seconds; a hash of its id decides whether it is in the --sample; it is built into a
    DAG (as `veritrail from-trace --phoenix`), verified as `veritrail verify` would (its run
    directory under RUNS_DIR), and its verdicts are written back as span annotations (as
    `veritrail export --to phoenix`). The checkpoint file records every finished trace, so a
    restart, even after kill -9, neither verifies a trace again nor misses one. Ctrl-C or
    SIGTERM stops cleanly (exit 130); run the same command again to go on.
    """
    from ..adapters.phoenix.watch import WatchOptions, parse_filters
    from ..adapters.phoenix.watch import watch as run_watch
    from ..run.job import job_settings
    from ..run.settings import find_config_file

    try:
        pairs = parse_filters(filters)
    except ValueError as exc:
        fail(str(exc))
    flags: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "max_unsupported": max_unsupported,
        "runs_dir": runs_dir,
    }
    with job_errors():
        settings = job_settings(flags, config_path=config_path)
    options = WatchOptions(
        url=url,
        project=project,
        sample=sample,
        filters=pairs,
        settle=settle,
        interval=interval,
        concurrency=concurrency,
        checkpoint=checkpoint,
        since=since,
        once=once,
    )

    def say(line: str) -> None:
        if not quiet or line.startswith(("error", "warning")):
            click.echo(line, err=True)

    from ..api import trace_verifier

    verifier = trace_verifier(settings, config_file=find_config_file(config_path))
    summary = run_watch(options, verifier, runs_dir=settings.runs_dir, say=say)
    if not quiet:
        click.echo(
            f"{summary.annotated} traces annotated, {summary.skipped} skipped, "
            f"{summary.incomplete} with claims not verified, {summary.gate_failed} over the "
            f"gate, {summary.excluded} left out by the sample or filters; checkpoint "
            f"{summary.checkpoint}",
            err=True,
        )
    if summary.exit_code:
        sys.exit(summary.exit_code)
