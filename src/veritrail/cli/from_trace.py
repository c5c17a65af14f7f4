"""`veritrail from-trace FILE --out dag.json`: an OpenInference / Langfuse trace → DAG; with
`--phoenix URL --project P` the trace is read from a Phoenix server instead of a file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..redaction import redact, redact_url
from .common import fail as _fail

if TYPE_CHECKING:
    from ..adapters.trace import TraceImport


@click.command("from-trace")
@click.argument("trace_file", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--out", "out_path", required=True, type=click.Path(dir_okay=False), help="DAG file to write."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["otlp", "otel-sdk", "langfuse"]),
    default=None,
    help="Force the input format (default: detected).",
)
@click.option("--trace-id", default=None, help="Which trace, when the file holds several.")
@click.option(
    "--phoenix",
    "phoenix_url",
    default=None,
    metavar="URL",
    help="Read the trace from this Phoenix server instead of a file (API key: PHOENIX_API_KEY).",
)
@click.option("--project", default=None, help="The Phoenix project (with --phoenix).")
@click.option(
    "--since",
    default=None,
    metavar="TIME",
    help="With --phoenix and no --trace-id: the traces started since TIME (ISO 8601) "
    "[default: all].",
)
@click.option(
    "--threshold",
    type=click.FloatRange(1, 100),
    default=None,
    help="Fuzzy-match score (rapidfuzz partial_ratio, 0-100) for a sentence to count as part "
    "of an input. Default 90 (docs/adapters.md).",
)
@click.option("--no-fuzzy", is_flag=True, help="Link by containment only.")
@click.option(
    "--no-prefilter",
    is_flag=True,
    help="Fuzzy-compare every sentence with every generation input, even those that share "
    "too few distinctive words to match (slower; docs/adapters.md, 'Speed').",
)
@click.option(
    "--explain", is_flag=True, help="Also list unmatched spans, fuzzy and ambiguous links."
)
def from_trace(
    trace_file: str | None,
    out_path: str,
    fmt: str | None,
    trace_id: str | None,
    phoenix_url: str | None,
    project: str | None,
    since: str | None,
    threshold: float | None,
    no_fuzzy: bool,
    no_prefilter: bool,
    explain: bool,
) -> None:
    """Build the generation DAG of a traced pipeline run.

    Reads OpenTelemetry spans with OpenInference attributes or the OpenTelemetry GenAI
    conventions (gen_ai.*, as OpenLLMetry writes them) — OTLP JSON from the collector's file
    exporter, or opentelemetry-sdk span.to_json() objects — or a Langfuse trace export. Roots are
    the texts that entered the trace (inputs, retrieved documents, tool outputs), nodes are LLM
    generations, and an edge u -> v means u's text is part of the input of the generation that
    wrote v. A trace that gives no valid DAG is rejected with the reason (exit status 2).

    With --phoenix URL --project P (and --trace-id ID, or --since TIME) the spans are read
    through Phoenix's REST API and built into a DAG by the same rules; the DAG keeps the trace id
    and every node's span ids, so `veritrail export` can write the verdicts back onto them.
    Phoenix unreachable: exit 3; unknown project or refused API key: exit 2.
    """
    from ..adapters.trace import DEFAULT_THRESHOLD, MatchSettings, TraceError, dag_from_trace
    from ..dag import save_dag

    if phoenix_url is None:
        if trace_file is None:
            _fail("give a TRACE_FILE, or --phoenix URL --project P")
        if project is not None or since is not None:
            _fail("--project and --since go with --phoenix")
    else:
        if trace_file is not None:
            _fail("give either a TRACE_FILE or --phoenix, not both")
        if not project:
            _fail("--phoenix needs --project (the Phoenix project to read the trace from)")
        if fmt is not None:
            _fail("--format is for trace files (Phoenix's spans are read as they come)")
        if trace_id is not None and since is not None:
            _fail("give --trace-id or --since, not both")
    source = trace_file if trace_file is not None else redact_url(str(phoenix_url))
    if trace_file is not None:
        try:
            if Path(out_path).resolve() == Path(trace_file).resolve():
                _fail("--out must not be the trace file (an input file is never overwritten)")
        except OSError as exc:
            _fail(redact(str(exc)))
    settings = MatchSettings(
        threshold=threshold if threshold is not None else DEFAULT_THRESHOLD,
        fuzzy=not no_fuzzy,
        prefilter=not no_prefilter,
    )
    try:
        if trace_file is not None:
            result = dag_from_trace(trace_file, fmt=fmt, trace_id=trace_id, settings=settings)
        else:
            from ..adapters.phoenix import PhoenixClient, dag_from_phoenix

            assert phoenix_url is not None and project is not None
            with PhoenixClient(phoenix_url) as client:
                result = dag_from_phoenix(
                    client, project, trace_id=trace_id, since=since, settings=settings
                )
    except TraceError as exc:
        _fail(redact(f"{source}: {exc}"))
    if explain:
        click.echo(explain_text(result))
    try:
        save_dag(result.dag, out_path)
    except OSError as exc:
        _fail(redact(f"{out_path}: cannot write the DAG ({exc.strerror or exc})"))
    dag = result.dag
    st = dag.meta.get("stage_names", {})
    per_stage = ", ".join(f"{sum(1 for n in dag if n.stage == int(k))} {v}" for k, v in st.items())
    click.echo(
        f"{len(dag)} nodes, {dag.edges} edges ({per_stage}); terminal {dag.terminal}; "
        f"written to {Path(out_path)}"
    )


def explain_text(result: TraceImport) -> str:
    """The `--explain` listing: links by how they were found, unmatched spans, ambiguities."""
    lines = [f"trace {result.trace_id}"]
    fuzzy = [lk for lk in result.links if lk.how == "fuzzy"]
    contained = len(result.links) - len(fuzzy)
    lines.append(f"links: {contained} by containment, {len(fuzzy)} fuzzy")
    for lk in fuzzy:
        lines.append(
            f"  fuzzy {lk.source} -> {lk.target}: score {lk.score:g}, "
            f"{lk.sentences} sentences matched"
        )
    lines.append(f"ambiguous links: {len(result.ambiguous)}")
    for a in result.ambiguous:
        lines.append(f"  {', '.join(a.sources)} into {a.target}: {a.reason}")
    lines.append(f"unmatched spans: {len(result.unmatched)}")
    for n in result.unmatched:
        lines.append(f"  {n.kind} {n.name} ({n.span_id}): {n.note}")
    if result.no_text:
        lines.append(
            "spans that generate no text (never nodes): "
            + ", ".join(f"{k} {v}" for k, v in result.no_text.items())
        )
    lines.append(f"root candidates not used by the final output: {len(result.unused_roots)}")
    lines += [f"  {u}" for u in result.unused_roots]
    return redact("\n".join(lines))
