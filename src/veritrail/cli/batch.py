"""`veritrail batch MANIFEST`: verify many jobs (DAG + claims) from a JSON Lines manifest.

Exit status over all jobs, as `veritrail verify`'s: 0 every claim verified and no gate failed;
1 a job's share of Not Fully Supported claims exceeds `--max-unsupported`, or its share of
miscited claims `--max-miscited` (docs/citations.md); 2 bad manifest or
input (plugged steps that do not load included), found before any model call; 3 some claim
could not be verified (wins over 1; also when an endpoint refused the run: bad key, unknown
model, no quota — no further claim is started on that endpoint, in any job — or the Ray cluster
cannot be reached); 130 interrupted. See docs/scale.md.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ..redaction import redact
from .common import (
    budget_options,
    cache_option,
    check_ci_outputs,
    ci_options,
    dag_input,
    emit_ci_outputs,
    fail,
    job_errors,
    pop_ci_targets,
)

if TYPE_CHECKING:
    from ..report import ReportDoc


def _fail_lines(message: str) -> NoReturn:
    """Exit 2 with one `error: ...` line per problem found (the manifest check lists them all)."""
    lines = message.splitlines() or [message]
    for line in lines[:-1]:
        click.echo(f"error: {line}", err=True)
    fail(lines[-1])


def _interrupt(_signum: int, _frame: Any) -> NoReturn:
    raise KeyboardInterrupt


@click.command()
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: one process, one event loop; ray: worker actors on a Ray cluster.",
)
@click.option(
    "--ray-address",
    default=None,
    help="Ray cluster to use: auto, ray://host:10001 or host:port [default: start a local Ray].",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Ray worker actors, one CPU each [default: the cluster's CPUs].",
)
@click.option(
    "--shard-size",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Claims per shard (what a Ray worker is fed at a time).",
)
@click.option(
    "--max-task-retries",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Ray restarts of a worker that died, and retries of its shards.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Model calls in flight over the whole batch [default: 8; split over Ray workers].",
)
@click.option(
    "--max-parallel-claims",
    type=click.IntRange(min=1),
    default=None,
    help="Claims verified at once (local: in all; ray: per worker [its share of --concurrency]).",
)
@click.option(
    "--model", default=None, help="provider/model for every job (a job's settings may override it)."
)
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint.")
@click.option(
    "-q",
    "--q",
    "q",
    type=int,
    default=None,
    help="Consecutive Not Fully Supported verdicts that stop a claim [default: 3].",
)
@click.option(
    "--claims-per-prompt",
    type=click.IntRange(min=1),
    default=None,
    help="Shared prompts: up to this many claims of a job in one prompt when they need the same "
    "step over the same text; 1 = one claim per prompt, the paper's form [default: 8].",
)
@cache_option
@click.option("--runs-dir", default=None, help="Parent of default run directories [default: runs].")
@click.option("--prices", default=None, help="JSON price file over the built-in price table.")
@click.option("--threads", type=int, default=None, help="CPU threads of an embedded local/ model.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="TOML settings file [default: ./veritrail.toml if present].",
)
@click.option(
    "--html", "html", is_flag=True, help="Also write each job's HTML report beside its JSON report."
)
@click.option(
    "--summary-dir",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="Where batch-summary.json and batch-index.html go.",
)
@click.option(
    "--max-unsupported",
    type=float,
    default=None,
    metavar="RATE",
    help="Exit 1 when a job's share of Not Fully Supported claims exceeds RATE (0..1).",
)
@click.option(
    "--citations",
    default=None,
    metavar="auto|off|PATTERN",
    help="Check each job's answer's own citation markers against the sources holding each "
    "claim's evidence: auto, off, or a regular expression (docs/citations.md) [default: off; a "
    "job's settings may set it].",
)
@click.option(
    "--max-miscited",
    type=float,
    default=None,
    metavar="RATE",
    help="Exit 1 when a job's share of cited claims that are misattributed or cite a source "
    "that does not support them exceeds RATE (0..1; with --citations).",
)
@budget_options
@click.option("--quiet", is_flag=True, help="No progress and no table (errors still print).")
@ci_options
def batch(
    manifest: str,
    executor: str,
    ray_address: str | None,
    workers: int | None,
    shard_size: int,
    max_task_retries: int,
    concurrency: int | None,
    max_parallel_claims: int | None,
    config_path: str | None,
    html: bool,
    summary_dir: str,
    max_unsupported: float | None,
    quiet: bool,
    **setting_flags: Any,
) -> None:
    """Verify every job of MANIFEST (JSON Lines: {"id", "dag", "claims", "out"} per line).

    Every finished claim is saved in its job's run directory as it arrives; run the same command
    again to finish an interrupted batch. Writes each job's report, batch-summary.json and
    batch-index.html.

    Exit status over all jobs: 0 every claim verified and no gate failed; 1 a job's gate
    (--max-unsupported, --max-miscited) failed; 2 bad manifest or input (before any model call); 3 some claim
    could not be verified, an endpoint refused the run (bad key, unknown model, no quota: no
    further claim starts on it, in any job), or the Ray cluster cannot be reached; 130
    interrupted. See docs/scale.md.
    """
    from ..batch import (
        BatchInputError,
        ExtractionFailed,
        LocalExecutor,
        ManifestError,
        RayExecutor,
        load_manifest,
        make_batch_progress,
        prepare_jobs,
        run_batch,
    )
    from ..batch.summary import summary_table
    from ..report import as_report
    from ..run.store import RunStoreError

    ci = pop_ci_targets(setting_flags)  # not settings
    if max_unsupported is not None and not 0.0 <= max_unsupported <= 1.0:
        fail(f"--max-unsupported must be between 0 and 1 (got {max_unsupported})")
    if max_unsupported is not None:
        setting_flags["max_unsupported"] = max_unsupported  # a setting: jobs may set their own
    flags = {k: v for k, v in setting_flags.items() if v is not None}
    if concurrency is not None:
        flags["concurrency"] = concurrency
    if max_parallel_claims is not None:
        flags["max_parallel_claims"] = max_parallel_claims
    manifest_path = Path(manifest)
    try:
        entries = load_manifest(manifest_path)
        extra = [Path(config_path)] if config_path else []
        jobs = prepare_jobs(
            manifest_path,
            entries,
            flags=flags,
            config_path=config_path,
            html=html,
            extra_inputs=extra,
            summary_dir=Path(summary_dir),
        )
    except (ManifestError, BatchInputError) as exc:
        _fail_lines(str(exc))
    # CI outputs: one file for the whole batch (a test suite / SARIF run per job), checked
    # like the jobs' reports before any model call.
    with job_errors():
        from ..batch.summary import INDEX_FILE, SUMMARY_FILE

        check_ci_outputs(
            ci,
            inputs=[("manifest", str(manifest_path))]
            + [i for j in jobs for i in j.inputs]
            + ([("config file", config_path)] if config_path else []),
            outputs=[(f"job {j.id}'s report", j.out_path) for j in jobs]
            + [(f"job {j.id}'s HTML report", j.html_path) for j in jobs]
            + [(name, Path(summary_dir) / name) for name in (SUMMARY_FILE, INDEX_FILE)],
            run_dirs=[j.run_dir for j in jobs],
        )
    # Each job's report, validated once as it finishes (`report.as_report`): what is printed
    # and emitted below reads the typed model, never the document by key.
    reports: dict[str, tuple[ReportDoc, str]] = {}
    # Batch-wide settings are the same in every job (the manifest cannot set them per job).
    s0 = jobs[0].settings
    total = s0.concurrency or 8
    # One cap for the whole batch (its jobs' own settings cannot set one each): every job's
    # calls and the driver's claim extraction spend from the same counter.
    budget = s0.budget()
    execu: LocalExecutor | RayExecutor
    if executor == "ray" and budget is not None:
        # Ray workers are separate processes: one counter shared by them would need a Ray actor
        # that every call asks first; until it exists the cap is refused, never ignored.
        fail("--max-cost and --max-tokens go with --executor local (not with Ray yet)")
    if executor == "ray":
        execu = RayExecutor(
            address=ray_address,
            workers=workers,
            concurrency=total,
            shard_size=shard_size,
            max_parallel_claims=s0.max_parallel_claims,
            max_task_retries=max_task_retries,
        )
        try:
            import ray  # noqa: F401
        except ImportError:
            fail("--executor ray needs Ray: pip install 'veritrail[ray]'")
    else:
        if ray_address or workers:
            fail("--ray-address and --workers go with --executor ray")
        execu = LocalExecutor(
            concurrency=total, max_parallel_claims=s0.max_parallel_claims, budget=budget
        )

    events = make_batch_progress(quiet=quiet, interval=s0.progress_interval)

    def done(st: Any) -> None:
        n = 0
        if st.report is not None:
            doc = as_report(st.report)
            reports[st.job.id] = (doc, st.job.dag_path)
            n = doc.summary.claims
        events.note(f"job {st.job.id}: {n} claims, report {st.job.out_path}")

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = run_batch(
            jobs,
            execu,
            manifest=str(manifest_path),
            summary_dir=Path(summary_dir),
            concurrency=total,
            on_job_done=done,
            events=events,
            budget=budget,
        )
    except KeyboardInterrupt:
        click.echo(
            "\ninterrupted: finished claims are saved in each job's run directory.\n"
            "Run the same command again to finish the batch (finished claims and cached model "
            "calls are reused).",
            err=True,
        )
        sys.exit(130)
    except (BatchInputError, RunStoreError) as exc:
        _fail_lines(str(exc))
    # A `RayUnavailableError` (exit 2) or `RayUnreachableError` (exit 3) is reported by the group.
    except ExtractionFailed as exc:
        if budget is not None and budget.reached is not None:
            fail(f"{redact(str(exc))}. Run the same command again with a higher cap.", 3)
        fail(f"{redact(str(exc))}. Fix the endpoint and run the same command again.", 3)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not quiet:
        click.echo(summary_table(result.summary))
        click.echo(f"summary: {result.summary_path}  index: {result.index_path}")
    # Printed even with --quiet: they explain the exit status.
    for cause in result.summary.get("fatal", []):
        click.echo(
            f"error: the endpoint refused the run: {redact(cause).rstrip('.')}. No further claim "
            "was started on it, in any job; finished claims are kept. Fix the endpoint and run "
            "the same command again.",
            err=True,
        )
    for o in result.outcomes:
        for f in o.failures:
            click.echo(f"job {o.id}: {redact(f)}", err=True)
    _name_unsupported(result.outcomes, reports, quiet=quiet)
    _name_miscited(result.outcomes, reports)
    if budget is not None and budget.reached is not None:
        from ..lm.budget import raise_cap

        total_claims = sum(o.claims for o in result.outcomes)
        verified = total_claims - sum(o.errors + o.missing for o in result.outcomes)
        click.echo(
            f"budget reached: {verified} of {total_claims} claims verified; resume with a higher "
            f"cap (veritrail batch {manifest} {raise_cap(budget, verified, total_claims - verified)}: "
            "finished claims and cached "
            "calls are reused)",
            err=True,
        )
    if ci.any:
        from ..cigate import incomplete_input

        emit_ci_outputs(
            ci,
            [
                dag_input(reports[j.id][0], reports[j.id][1], name=j.id)
                if j.id in reports
                else incomplete_input(j.id, str(j.run_dir))
                for j in jobs
            ],
            quiet=quiet,
        )
    sys.exit(result.exit_code)


def _name_unsupported(
    outcomes: Any, reports: Mapping[str, tuple[ReportDoc, str]], *, quiet: bool
) -> None:
    """Name each job's Not Fully Supported claims (id, text, error stage) on stderr, as `verify`
    does: at every exit status; with `--quiet` only for the jobs whose gate failed. `reports`:
    the report of every job that wrote one, by job id (collected as the jobs finished)."""
    from ..run.summary import claim_lines, unsupported_claims

    for o in outcomes:
        if o.id not in reports or (quiet and not o.gate_failed):
            continue
        claims = unsupported_claims(reports[o.id][0])
        if not claims:
            continue
        gate = " (its gate failed)" if o.gate_failed else ""
        click.echo(
            f"job {o.id}: {len(claims)} of {o.claims} claims are Not Fully Supported{gate}:",
            err=True,
        )
        for line in claim_lines(claims, dag=reports[o.id][0].dag):
            click.echo(line, err=True)


def _name_miscited(outcomes: Any, reports: Mapping[str, tuple[ReportDoc, str]]) -> None:
    """Name the miscited claims of each job whose `--max-miscited` gate failed (stderr, also
    with `--quiet`: they explain the exit status), as `verify` does."""
    from ..citations import miscited_gate
    from ..display import shorten

    for o in outcomes:
        if not o.miscited_gate_failed or o.id not in reports:
            continue
        gate = miscited_gate(reports[o.id][0])
        if gate is None:
            continue
        click.echo(
            f"job {o.id}: gate failed: {len(gate.claims)} of {gate.cited} cited claims "
            f"({100 * gate.share:.1f}%) cite a source that does not hold their evidence, above "
            f"--max-miscited {gate.rate:g} ({100 * gate.rate:.1f}%):",
            err=True,
        )
        for cid, text, kind in gate.claims:
            click.echo(f"  {cid}: {redact(shorten(text, 100))} ({kind})", err=True)
