"""What a run shows when it ends: the summary tables (verdicts, error stages, cost) and what
decides the exit status (errored claims grouped by cause, the `--max-unsupported` gate, whose
rule is `veritrail.outcome`'s), printed even with `--quiet`. The live display is `run.progress`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..display import CallLike as CallLike
from ..display import CallTotals as CallTotals
from ..display import fmt_dollars, shorten, unpriced_models
from ..display import fmt_duration as fmt_duration
from ..display import fmt_int as fmt_int
from ..outcome import GateResult as GateResult
from ..outcome import gate_failures as gate_failures
from ..records import ErrorStageStatus, Verdict
from ..report import ClaimSource, ReportSource, as_claim, as_dag, as_report, dag_roots
from ..report_model import NO_VERDICT

if TYPE_CHECKING:
    from ..report_model import ClaimDoc, DagDoc, ReportDoc


def model_line(report: ReportSource) -> str:
    """Who made the verdicts: "verdicts by demo/overlap (demonstration, not a judge)". A report
    of the embedded or a demonstration model says so wherever it is shown (report.model_kind)."""
    from ..report import report_model_kind

    doc = as_report(report)
    _, label = report_model_kind(doc)
    return f"verdicts by {doc.model}" + (f" ({label})" if label else "")


def rerun_line(report: ReportSource) -> str | None:
    """On a re-run, how many claims the run directory already held and what this run did: the
    cost table sums every run of the directory, so without this line a run that called nothing
    reads as one that made all those calls in no time. None on a fresh run."""
    doc = as_report(report)
    resumed = doc.run.resumed_claims or 0
    total = doc.summary.claims
    if resumed <= 0:
        return None
    where = f" in {doc.run.run_dir}" if doc.run.run_dir else " in the run directory"
    if resumed >= total:
        # Every claim came from the store, and with it the extracted claims: nothing was asked.
        return (
            f"all {total:,} claims were already finished{where}; no model call was made "
            "(the cost below is what the earlier runs spent)"
        )
    return (
        f"{resumed:,} of {total:,} claims were already finished{where}; {total - resumed:,} "
        "verified in this run (the cost below includes the earlier runs')"
    )


def summary_tables(report: ReportSource, *, wall_seconds: float | None = None) -> Group:
    """Verdicts, error stages and cost of a report, as rich tables."""
    doc = as_report(report)
    s = doc.summary
    n = s.claims or 1
    verdicts = Table(title="Verdicts", title_justify="left")
    verdicts.add_column("verdict")
    verdicts.add_column("claims", justify="right")
    verdicts.add_column("share", justify="right")
    styles = {
        Verdict.FULLY_SUPPORTED.value: "green",
        Verdict.NOT_FULLY_SUPPORTED.value: "red",
        Verdict.INCONCLUSIVE.value: "yellow",
        NO_VERDICT: "bold red",
    }
    for label, count in s.verdicts.items():
        verdicts.add_row(
            Text(label, style=styles.get(label, "")), str(count), f"{100 * count / n:.0f}%"
        )

    stages = Table(title="Error stages", title_justify="left")
    stages.add_column("stage", justify="right")
    stages.add_column("claims", justify="right")
    for stage, claims in stage_rows(s.stage_counts, doc.dag.max_stage or 0):
        stages.add_row(stage, claims)
    not_id = sum(1 for c in doc.claims if c.error_stage_status is ErrorStageStatus.NOT_IDENTIFIABLE)
    stages.add_row("not identifiable", str(not_id))

    c = s.cost
    ext = doc.run.extraction
    calls = c.lm_calls + (ext.lm_calls if ext else 0)
    cached = c.cached_calls + (ext.cached_calls if ext else 0)
    tokens_in = c.input_tokens + (ext.input_tokens if ext else 0)
    tokens_out = c.output_tokens + (ext.output_tokens if ext else 0)
    dollars = (c.dollars or 0) + ((ext.dollars or 0) if ext else 0)

    cost = Table(title="Cost", title_justify="left")
    cost.add_column("figure")
    cost.add_column("value", justify="right")
    cost.add_row("model calls", f"{calls:,}")
    if ext:
        cost.add_row("of which claim extraction", f"{ext.lm_calls:,}")
    cost.add_row("of which from cache", f"{cached:,}")
    cost.add_row("input tokens", f"{tokens_in:,}")
    cost.add_row("output tokens", f"{tokens_out:,}")
    # A model with no price counts 0 dollars: say "unknown" rather than show that 0 as a price.
    cost.add_row("dollars", fmt_dollars(dollars, unpriced_models(doc.run.notes)))
    dag_nodes = doc.dag.nodes
    mean = float(c.nodes_read_mean or 0.0)
    cost.add_row(
        "nodes read per claim",
        f"{mean:.1f}" + (f" ({100 * mean / dag_nodes:.1f}% of {dag_nodes:,})" if dag_nodes else ""),
    )
    if wall_seconds is not None:
        cost.add_row("wall time", fmt_duration(wall_seconds))
    head: list[Text] = [Text(model_line(doc), style="" if _judge(doc) else "bold yellow")]
    again = rerun_line(doc)
    if again is not None:
        head.append(Text(again, style="bold"))
    return Group(*head, verdicts, *_citations_table(doc), stages, cost)


def _citations_table(doc: ReportDoc) -> list[Table]:
    """Each claim's citation status (`--citations`, `veritrail.citations`); none without."""
    from ..citations import citation_rows
    from ..redaction import redact

    rows = citation_rows(doc)
    if not rows:
        return []
    table = Table(title="Citations", title_justify="left")
    for name in ("claim", "citation", "markers → cited"):
        table.add_column(name)
    for claim_id, kind, cites in rows:
        # Text, not markup: a marker such as [catalogue](url) is not a rich style tag.
        table.add_row(Text(redact(claim_id)), Text(kind), Text(redact(cites)))
    return [table]


def _judge(doc: ReportDoc) -> bool:
    from ..report import report_model_kind

    return report_model_kind(doc)[0] == "judge"


STAGE_ROWS = 10
"""Error stages listed by name in the end-of-run table; the rest are summed in one row."""


def stage_rows(
    per_stage: Mapping[int, int], max_stage: int, limit: int = STAGE_ROWS
) -> list[tuple[str, str]]:
    """(stage, claims) rows of the Error stages table.

    A DAG with few stages gets one row per stage (zeros included, so the shape is visible);
    a deeper one (a 200,000-stage chain) gets the `limit` stages with the most claims, in stage
    order, plus one "n more stages" row: the table stays a few rows long whatever the depth.
    """
    if max_stage <= limit:
        return [(str(k), str(per_stage.get(k, 0))) for k in range(1, max_stage + 1)]
    top = sorted(
        sorted((k for k, v in per_stage.items() if v > 0), key=lambda k: (-per_stage[k], k))[:limit]
    )
    rows = [(str(k), str(per_stage[k])) for k in top]
    rest = max_stage - len(top)
    rest_claims = sum(v for k, v in per_stage.items() if k not in set(top))
    rows.append((f"{rest:,} more stages", str(rest_claims)))
    return rows


def error_cause(error: str | None) -> str:
    """The cause of a claim's error, for grouping: the first line (a bug's traceback is left
    out), redacted, without the exception class name the loop puts in front."""
    from ..redaction import redact

    first = (error or "unknown error").strip().splitlines()[0] if error else "unknown error"
    first = re.sub(r"^not started: ", "", first)
    first = re.sub(r"^[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Failure): ", "", first)
    return redact(first.strip()) or "unknown error"


def error_groups(claims: Sequence[ClaimSource]) -> list[tuple[str, list[str]]]:
    """Errored claims of a report grouped by cause: (cause, claim ids), largest group first."""
    groups: dict[str, list[str]] = {}
    for c in map(as_claim, claims):
        if c.errored:
            groups.setdefault(error_cause(c.error), []).append(c.id)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _ids(ids: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", … {len(ids) - limit} more" if len(ids) > limit else "")


def outcome_lines(
    report: ReportSource,
    *,
    max_unsupported: float | None = None,
    run_dir: str | None = None,
    fatal: str | None = None,
    limit: int = 20,
    quiet: bool = False,
) -> list[str]:
    """What decides the exit status, as lines: the fatal endpoint error, the errored claims
    grouped by cause, the failed gate, and the Not Fully Supported claims (id, text, error
    stage; at most `limit` listed) whatever the exit status.

    With `quiet` (`--quiet`) the Not Fully Supported claims are named only when they fail the
    gate: a quiet run that passes prints nothing, as cron jobs and scripts expect."""
    from ..redaction import redact

    lines: list[str] = []
    doc = as_report(report)
    claims = doc.claims
    if fatal:
        lines.append(
            f"error: the endpoint refused the run: {redact(fatal).rstrip('.')}. "
            "No further claim was started; "
            "finished claims are kept."
        )
    groups = error_groups(claims)
    if groups:
        n = sum(len(ids) for _, ids in groups)
        again = f"veritrail resume {run_dir}" if run_dir else "veritrail resume RUN_DIR"
        lines.append(
            f"error: {n} of {len(claims)} claims could not be verified; they are verified again "
            f"by the same command or `{again}`:"
        )
        for cause, ids in groups:
            lines.append(f"  {len(ids)} claim{'s' if len(ids) != 1 else ''}: {cause} ({_ids(ids)})")
    gate = gate_failures(doc, max_unsupported)
    unsupported = unsupported_claims(doc)
    if quiet and gate is None:
        unsupported = []
    if gate is not None:
        lines.append(
            f"gate failed: {len(gate.claims)} of {gate.total} claims ({100 * gate.share:.1f}%) "
            f"are Not Fully Supported, above --max-unsupported {gate.rate:g} "
            f"({100 * gate.rate:.1f}%):"
        )
    elif unsupported:
        # Named at every exit status, not only when a gate fails: CI logs show which claims.
        lines.append(f"{len(unsupported)} of {len(claims)} claims are Not Fully Supported:")
    lines.extend(claim_lines(unsupported, limit=limit, dag=doc.dag))
    from ..citations import miscited_gate

    cited = miscited_gate(doc)
    if cited is not None:
        lines.append(
            f"gate failed: {len(cited.claims)} of {cited.cited} cited claims "
            f"({100 * cited.share:.1f}%) cite a source that does not hold their evidence, "
            f"above --max-miscited {cited.rate:g} ({100 * cited.rate:.1f}%):"
        )
        lines.extend(
            f"  {cid}: {redact(shorten(text, 100))} ({kind})" for cid, text, kind in cited.claims
        )
    return lines


def unsupported_claims(report: ReportSource) -> list[ClaimDoc]:
    """The report's Not Fully Supported claims (the model's verdict, as the gate counts)."""
    return [c for c in as_report(report).claims if c.unsupported]


def claim_lines(
    claims: Sequence[ClaimSource],
    *,
    limit: int = 20,
    dag: DagDoc | Mapping[str, Any] | None = None,
) -> list[str]:
    """One indented line per claim (id, text cut to 100 characters, error stage and, with the
    report's `dag` section, the nodes blamed for it: "error stage 2, node summary-2"), at most
    `limit`, then how many more."""
    from ..redaction import redact
    from ..report import blamed_nodes

    typed_dag = as_dag(dag) if dag else None
    roots = dag_roots(typed_dag) if typed_dag is not None else set()
    lines = []
    for c in map(as_claim, claims[:limit]):
        short = shorten(c.text, 100)
        blamed = blamed_nodes(c, roots, typed_dag.terminal) if typed_dag is not None else ()
        lines.append(f"  {c.id}: {redact(short)} ({redact(_stage_text(c, blamed))})")
    if len(claims) > limit:
        lines.append(f"  … and {len(claims) - limit} more (see the report)")
    return lines


def _stage_text(claim: ClaimDoc, blamed: Sequence[str] = ()) -> str:
    """The claim's error stages in words, with the blamed nodes ("error stage 2, node summary-2",
    "no identifiable error stage")."""
    stages = [str(s) for s in claim.error_stages]
    if not stages:
        return "no identifiable error stage"
    nodes = f", node{'s' if len(blamed) > 1 else ''} {', '.join(blamed)}" if blamed else ""
    return f"error stage{'s' if len(stages) > 1 else ''} {', '.join(stages)}{nodes}"


def print_outcome(
    report: ReportSource,
    *,
    max_unsupported: float | None = None,
    run_dir: str | None = None,
    fatal: str | None = None,
    stream: TextIO | None = None,
    quiet: bool = False,
) -> None:
    """Print `outcome_lines` to stderr (also with `--quiet`: they explain the exit status)."""
    out = stream if stream is not None else sys.stderr
    for line in outcome_lines(
        report, max_unsupported=max_unsupported, run_dir=run_dir, fatal=fatal, quiet=quiet
    ):
        out.write(line + "\n")
    out.flush()


def print_summary(
    report: ReportSource, *, console: Console | None = None, wall_seconds: float | None = None
) -> None:
    """Print `summary_tables` (to stdout by default)."""
    (console or Console()).print(summary_tables(report, wall_seconds=wall_seconds))
