"""`veritrail export RUN --to phoenix|langfuse --endpoint URL`: a finished run's verdicts onto the
spans of the trace it verified (docs/adapters.md, "Verdicts back onto the trace")."""

from __future__ import annotations

import click

from ..redaction import redact_url


@click.command("export")
@click.argument("run", type=click.Path(exists=True))
@click.option(
    "--to",
    "target",
    type=click.Choice(["phoenix", "langfuse"]),
    required=True,
    help="Where to write: Phoenix span annotations or Langfuse scores.",
)
@click.option(
    "--endpoint",
    required=True,
    metavar="URL",
    help="The server's base URL. Keys: PHOENIX_API_KEY for Phoenix; LANGFUSE_PUBLIC_KEY and "
    "LANGFUSE_SECRET_KEY for Langfuse.",
)
@click.option(
    "--dag",
    "dag_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="The DAG the run verified [default: the run's own copy, or the file its report names].",
)
@click.option(
    "--project",
    default=None,
    help="Phoenix: assign the annotation configs to this project [default: the project the "
    "trace was read from].",
)
def export(run: str, target: str, endpoint: str, dag_path: str | None, project: str | None) -> None:
    """Write the verdicts of RUN (a run directory, or its report.json) back onto its trace.

    Phoenix: one span annotation per claim on the span of the final output (label = verdict,
    score, explanation = the model's reasoning), and on each span where a Not Fully Supported
    claim's content most likely entered, an annotation naming the claim with the evidence trail.
    Langfuse: the same as scores on the trace's observations. The DAG must come from
    `veritrail from-trace` (it keeps the span ids). Exporting again updates, never duplicates.

    Exit status: 0 written; 2 bad input (no report, a DAG without span ids, a refused key);
    3 the server cannot be reached or refused the annotations.
    """
    from ..adapters.phoenix.marks import summary_line

    if target == "phoenix":
        from ..adapters.phoenix import export_to_phoenix

        result = export_to_phoenix(run, endpoint, dag=dag_path, project=project)
    else:
        from ..adapters.langfuse_scores import export_to_langfuse

        result = export_to_langfuse(run, endpoint, dag=dag_path)
    click.echo(
        f"{summary_line(result.marks)} written to {target} at {redact_url(endpoint)} "
        f"(trace {result.trace_id})"
    )
