"""`--dry-run`: what a job would call and the estimate of calls, tokens and cost, no model built.

`plan_dry_run(job)` gathers it (the run directory's state, the claims left, the price, the
`estimate.estimate_run` record) and `render_dry_run` turns it into the lines the CLI prints.
Bad input (a run directory that holds another run, an unreadable price file) raises
`JobInputError`, as preparing the job does. See docs/running.md, "Dry run and the estimator".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..lm.pricing import Price
from ..records import Claim
from ..redaction import redact_url
from .estimate import DECOMPOSITION, EVIDENCE, EXTRACTION, VERDICT, RunEstimate, estimate_run
from .job import Job, JobInputError
from .settings import settings_table
from .store import RUN_FILE, RunStore, RunStoreError

SHOWN_CLAIMS = 10
"""Claims listed one by one; the rest are counted."""


@dataclass(frozen=True, slots=True)
class DryRun:
    """What `--dry-run` reports about a job."""

    job: Job
    run_dir_exists: bool
    done: int
    """Claims already finished in the run directory (the run would resume)."""
    claims_total: int | None
    """Claims of the run; None when they are still to be extracted."""
    todo: int | None
    """Claims left to verify; None when they are still to be extracted."""
    estimate: RunEstimate


def plan_dry_run(job: Job) -> DryRun:
    """Look at the run directory, the price table and the DAG; call nothing."""
    claims = job.claims
    done_ids: set[str] = set()
    exists = (job.run_dir / RUN_FILE).exists()
    if exists:
        try:
            existing = RunStore.open(job.run_dir)
        except RunStoreError as exc:
            raise JobInputError(str(exc)) from None
        if existing.info.fingerprint != job.fingerprint:
            raise JobInputError(f"{job.run_dir} holds a different run; use another --run-dir")
        done_ids = set(existing.done)
        claims = existing.claims
    todo: list[Claim] | None = None
    if claims is not None:
        todo = [c for c in claims if c.id not in done_ids]
    s = job.settings
    price: Price | None = None
    if job.oracle_path is None:
        from ..lm.pricing import PriceTable
        from ..lm.registry import split_name

        prov, mdl = split_name(job.model_name)
        try:
            table = PriceTable.from_file(s.prices) if s.prices else PriceTable()
        except (OSError, ValueError) as exc:
            raise JobInputError(
                str(exc) if str(s.prices) in str(exc) else f"price file {s.prices}: {exc}"
            ) from None
        price = table.lookup(prov, mdl)  # with its cached-input rate, when it has one
    from ..method.prompting import prompt_dir

    with prompt_dir(s.prompt_dir):  # the estimate measures the prompts the run would send
        estimate = estimate_run(
            job.dag, todo, s.verify_config(), price=price, extraction_mode=s.extraction
        )
    return DryRun(
        job=job,
        run_dir_exists=exists,
        done=len(done_ids),
        claims_total=len(claims) if claims is not None else None,
        todo=len(todo) if todo is not None else None,
        estimate=estimate,
    )


def render_dry_run(plan: DryRun) -> list[str]:
    """The lines `veritrail verify --dry-run` prints."""
    job, s, est = plan.job, plan.job.settings, plan.estimate
    out = ["dry run: no model was called"]
    endpoint = f" at {redact_url(s.base_url)}" if s.base_url else ""
    out.append(f"model: {job.model_name}{endpoint}")
    dag = job.dag
    out.append(f"DAG: {job.dag_path} ({len(dag):,} nodes, {max(n.stage for n in dag)} stages)")
    if plan.run_dir_exists:
        out.append(
            f"run directory: {job.run_dir} (exists: {plan.done} of {plan.claims_total} claims "
            "finished; the run would resume)"
        )
    else:
        out.append(f"run directory: {job.run_dir} (would be created)")
    if plan.todo is None:
        out.append("claims: extracted from the terminal node (one claim per sentence assumed)")
    else:
        out.append(
            f"claims: {plan.todo} claims to verify"
            + (f" ({plan.done} already done)" if plan.done else "")
        )
    out.append(f"steps: {'oracle file ' + str(job.oracle_path) if job.oracle_path else 'model'}")
    out.append("settings (value, source):")
    for name, value, source in settings_table(s):
        out.append(f"  {name:<28} {value:<24} {source}")
    out.append("")
    out.append("per claim (estimate / upper): iterations, nodes read, model calls")
    shown = est.claims[:SHOWN_CLAIMS]
    for ce in shown:
        e, u = ce.estimate, ce.upper
        out.append(
            f"  {ce.claim_id:<12} iterations {e.iterations}/{u.iterations}  "
            f"nodes {e.nodes_read}/{u.nodes_read}  calls {e.calls}/{u.calls}"
        )
    if len(est.claims) > len(shown):
        out.append(f"  ... and {len(est.claims) - len(shown)} more claims")
    out.append("")
    cfg = s.verify_config()
    if cfg.claims_per_prompt > 1 and cfg.samples == 1 and len(est.claims) > 1:
        # The per-claim lines count the one-claim prompts; the totals below share them.
        out.append(
            f"shared prompts: up to {cfg.claims_per_prompt} claims per prompt in the totals "
            "below (per-claim lines: one claim per prompt; docs/method.md#shared-prompts)"
        )
        out.append("")
    out.append("estimate (see docs/running.md for the assumptions; lower / estimate / upper):")
    rows: list[tuple[str, list[str]]] = []
    step_rows = [
        (EXTRACTION, "claim extraction calls"),
        (DECOMPOSITION, "decomposition calls"),
        (EVIDENCE, "evidence calls"),
        (VERDICT, "verdict calls"),
    ]
    sc3 = (est.lower, est.estimate, est.upper)
    for step, label in step_rows:
        vals = [sc.steps.get(step) for sc in sc3]
        if all(v is None or v.calls == 0 for v in vals):
            continue
        rows.append((label, [f"{(v.calls if v else 0):,}" for v in vals]))
    rows.append(("total calls", [f"{x.calls:,}" for x in sc3]))
    rows.append(("input tokens", [f"{x.input_tokens:,}" for x in sc3]))
    rows.append(("output tokens", [f"{x.output_tokens:,}" for x in sc3]))
    rows.append(
        ("nodes read per claim", [f"{(x.nodes_read / max(1, len(est.claims))):,.1f}" for x in sc3])
    )
    if job.oracle_path is None and est.dollars_estimate is not None:
        dollars = (est.dollars_lower, est.dollars_estimate, est.dollars_upper)
        rows.append(("cost (USD)", ["$" + format(d or 0.0, ",.4f") for d in dollars]))
    out.extend("  " + line for line in aligned_table(("", "lower", "estimate", "upper"), rows))
    if job.oracle_path is not None:
        out.append("  cost: none (the oracle answers every step)")
    elif est.dollars_estimate is None:
        out.append(
            f"  cost: unknown (no price for {job.model_name}; add one with VERITRAIL_PRICES)"
        )
    return out


def aligned_table(header: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """Lines of a text table: the label column left-aligned, number columns right-aligned, each
    as wide as its widest cell plus two spaces, so no two numbers ever touch (1,234,567,890
    included)."""
    ncols = len(header) - 1
    label_w = max([len(header[0])] + [len(label) for label, _ in rows])
    widths = [
        max([len(header[i + 1])] + [len(cells[i]) for _, cells in rows]) + 2 for i in range(ncols)
    ]
    lines = [
        f"{header[0]:<{label_w}}"
        + "".join(f"{h:>{w}}" for h, w in zip(header[1:], widths, strict=True))
    ]
    for label, cells in rows:
        lines.append(
            f"{label:<{label_w}}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))
        )
    return lines
