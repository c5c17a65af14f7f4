"""`veritrail diff A B`: what changed between two runs (run directories or report files)."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import InputProblem
from .common import ci_options, ci_targets, emit_ci_outputs


class DiffUsageError(InputProblem, ValueError):
    """An output of `veritrail diff` that cannot be written where it was asked."""


def _check_outputs(inputs: list[Path], outputs: list[Path]) -> None:
    """Refuse an output that is an input or another output; create missing parent folders."""
    seen: dict[Path, Path] = {}
    resolved_inputs = {p.resolve() for p in inputs}
    for out in outputs:
        r = out.resolve()
        if r in resolved_inputs:
            raise DiffUsageError(f"{out}: is an input of the diff; choose another output file")
        if r in seen:
            raise DiffUsageError(
                f"{out}: given for two outputs (both --json and --html, or two of --markdown, "
                "--junit, --sarif)"
            )
        if out.is_dir():
            raise DiffUsageError(f"{out}: is a directory; give a file name")
        seen[r] = out
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DiffUsageError(f"{out}: cannot create its folder ({exc.strerror})") from None


def _check_writable(
    inputs: list[Path],
    json_path: Path | None,
    html_path: Path | None,
    markdown_path: Path | None,
    junit: Path | None,
    sarif: Path | None,
) -> None:
    """Every output can be written, tried before the work as verify does
    (`run.inputs.check_output_files`): a place that takes no file is bad usage (exit 2),
    not a traceback or an exit 3 after the comparison."""
    from ..run.inputs import check_output_files
    from ..run.spec import JobInputError

    flags = (
        ("--json", json_path),
        ("--html", html_path),
        ("--markdown", markdown_path),
        ("--junit", junit),
        ("--sarif", sarif),
    )
    outs = [(flag, path) for flag, path in flags if path is not None]
    try:
        check_output_files(outs, [("input A", str(inputs[0])), ("input B", str(inputs[1]))])
    except JobInputError as exc:
        raise DiffUsageError(str(exc)) from None


@click.command("diff")
@click.argument("run_a", metavar="A", type=click.Path(path_type=Path))
@click.argument("run_b", metavar="B", type=click.Path(path_type=Path))
@click.option(
    "--max-new-unsupported",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Gate: exit 1 when more than N claims became unsupported in B.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help='Write the diff as JSON ("format": "veritrail-diff").',
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the diff as a self-contained HTML page.",
)
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the diff as Markdown: the body of one pull-request comment, its first line "
    "the hidden marker <!-- veritrail-report --> (action.yml posts it).",
)
@click.option(
    "--rows",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Rows per table in the terminal (0: all).",
)
@click.option(
    "--resamples",
    type=click.IntRange(min=0, max=1_000_000),
    default=2000,
    show_default=True,
    help="Bootstrap resamples of the interval of the share difference (0: no interval).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option(
    "--reviews/--no-reviews",
    default=True,
    show_default=True,
    help="Count a reviewed claim by its review's verdict (--no-reviews: the model's).",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the gate line.")
@ci_options
@click.pass_context
def diff(
    ctx: click.Context,
    run_a: Path,
    run_b: Path,
    max_new_unsupported: int | None,
    json_path: Path | None,
    html_path: Path | None,
    markdown_path: Path | None,
    rows: int,
    resamples: int,
    seed: int,
    reviews: bool,
    quiet: bool,
    junit_path: str | None,
    sarif_path: str | None,
    annotations: str | None,
) -> None:
    """Compare run A with run B (run directories or report.json files), claim by claim.

    Claims are matched by their normalised text (duplicates by the sources they trace to, then
    in claim-id order; docs/runs.md, "Comparing two runs"). Shows the claims that became
    unsupported and the stage where each entered, other verdict flips, changed evidence, and
    each run's unsupported share with a bootstrap 95% interval of the difference. --markdown
    writes the same as one pull-request comment (docs/running.md, "GitHub Action").

    Exit status: 0 no gate failed; 1 more than --max-new-unsupported claims became unsupported;
    2 bad input or usage.
    """
    from rich.console import Console

    from ..redaction import redact_obj
    from ..report import indented_json
    from ..runs.diff import compare, diff_document, gate_failed, load_side, report_path_of
    from ..runs.diffhtml import render_diff_html
    from ..runs.difftable import diff_tables, gate_line
    from ..textio import atomic_write_text

    ci = ci_targets(junit_path, sarif_path, annotations)
    inputs = [report_path_of(run_a), report_path_of(run_b)]
    outputs = [json_path, html_path, markdown_path, ci.junit, ci.sarif]
    _check_outputs(inputs, [p for p in outputs if p is not None])
    _check_writable(inputs, json_path, html_path, markdown_path, ci.junit, ci.sarif)
    a = load_side(run_a, label="A", use_reviews=reviews)
    b = load_side(run_b, label="B", use_reviews=reviews)
    result = compare(a, b, resamples=resamples, seed=seed)
    doc = redact_obj(diff_document(result, max_new_unsupported=max_new_unsupported))
    if json_path is not None:
        atomic_write_text(json_path, indented_json(doc))
    if html_path is not None:
        atomic_write_text(html_path, render_diff_html(doc))
    if markdown_path is not None:
        from ..runs.diffmd import render_diff_markdown

        atomic_write_text(markdown_path, render_diff_markdown(doc))

    console = Console()
    # Wide tables: when piped, do not squeeze them into the default 80 columns.
    out = Console(width=console.width if console.is_terminal else 160)
    if quiet:
        out.print(gate_line(result, max_new_unsupported))
    else:
        limit = rows if rows > 0 else -1
        out.print(diff_tables(result, max_new_unsupported=max_new_unsupported, limit=limit))
    for path, what in ((json_path, "JSON"), (html_path, "HTML"), (markdown_path, "Markdown")):
        if path is not None:
            click.echo(f"{what} diff written to {path}", err=True)
    if ci.any:
        from ..cigate import diff_input

        # The newly unsupported claims, located at B's report file (a diff names no DAG
        # file; a run directory is no file a CI can show).
        emit_ci_outputs(ci, [diff_input(doc, location=str(inputs[1]))], quiet=quiet)
    if gate_failed(result, max_new_unsupported):
        ctx.exit(1)
