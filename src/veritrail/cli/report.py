"""`veritrail report REPORT.json --html OUT`: the HTML trail viewer from a saved report."""

from __future__ import annotations

from pathlib import Path

import click

from ..report import read_report


@click.command()
@click.argument("report_path", type=click.Path(dir_okay=False))
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the self-contained HTML report here (default: beside the JSON, .html).",
)
def report(report_path: str, html_path: str | None) -> None:
    """Render REPORT_PATH (a VeriTrail report JSON) as one self-contained HTML file."""
    from ..html import write_html
    from ..report import as_report

    doc = read_report(report_path)  # a `ReportFormatError` is reported by the group: exit 2
    # Checked against the contract before anything is written (exit 2 naming the first wrong
    # field, as every reader of reports); the page embeds the document as the file has it.
    as_report(doc, source=report_path)
    out = Path(html_path) if html_path else Path(report_path).with_suffix(".html")
    write_html(doc, out)
    click.echo(f"HTML report written to {out}")
