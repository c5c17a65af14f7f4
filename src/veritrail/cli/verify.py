"""`veritrail verify`: the main job. DAG (+ claims) in, report out.

This module only turns flags into a job (`veritrail.run.job`), runs it with progress and prints
the outcome; the job itself (settings, inputs checked, run directory, reports) is a library
object shared with `veritrail check`, `veritrail resume` and the Python API, and the dry run is
`veritrail.run.dryrun`. The job's typed errors become `error: ...` lines and exit codes here
(`JobError.exit_code`). See docs/running.md.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping
from typing import Any

import click

from ..cigate import CiTargets
from ..run.job import (
    ExitCode,
    Job,
    interruption_of,
    job_settings,
    prepare_job,
    run_and_write,
)
from ..run.settings import find_config_file
from .common import (
    EXIT_CODES_HELP,
    check_ci_outputs,
    ci_options,
    claims_options,
    dag_input,
    emit_ci_outputs,
    job_errors,
    pop_ci_targets,
    run_options,
)


def execute(job: Job, *, quiet: bool, ci: CiTargets | None = None) -> None:
    """Run the job with progress, write the outputs (and the CI outputs `ci`, checked by the
    caller), print the summary; handle Ctrl-C.

    Exits with the run's `ExitCode` (0 returns normally)."""
    from ..run.progress import make_progress

    progress = make_progress(quiet=quiet, interval=job.settings.progress_interval)
    _execute(job, quiet=quiet, progress=progress, ci=ci or CiTargets())


def _execute(job: Job, *, quiet: bool, progress: Any, ci: CiTargets) -> None:
    from ..run.progress import print_outcome, print_summary

    if not quiet:
        from ..report import MODEL_LABELS, model_kind

        label = MODEL_LABELS[model_kind(job.model_name)] if not job.oracle_path else None
        if label is not None:
            # Said before the run and again with the verdicts (run.summary.model_line).
            click.echo(f"note: verdicts by {job.model_name}: {label}.", err=True)
        click.echo(f"run directory: {job.run_dir}", err=True)
    try:
        with job_errors():
            done = asyncio.run(run_and_write(job, progress))
    except (KeyboardInterrupt, asyncio.CancelledError):
        # Ctrl-C (asyncio.run cancels the run and re-raises KeyboardInterrupt) or SIGTERM (our
        # handler cancels the main task); `run_to_report` recorded the interruption. Finished
        # claims are already durable in the store, which says where the run stands.
        got = interruption_of(job)
        if got is not None:
            click.echo(
                f"\ninterrupted: {got.done} of {got.total} claims are finished and saved in "
                f"{job.run_dir}"
                + (f" (partial report: {got.partial_report})" if got.partial_report else "")
                + f".\nResume with:  veritrail resume {job.run_dir}\n"
                "(or run the same command again; finished claims and cached model calls are reused)",
                err=True,
            )
        else:
            click.echo("\ninterrupted before any claim was started.", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    doc = done.doc  # validated once by the run; the summary and the outcome read the typed model
    if not quiet:
        print_summary(doc, wall_seconds=doc.run.wall_seconds)
        if job.out_path is not None:
            click.echo(f"report written to {job.out_path}")
        else:
            # No --out: the report is the run directory's (never a silent ./report.json).
            click.echo(f"report written to {done.run_dir / 'report.json'}")
        if job.html_path is not None:
            click.echo(f"HTML report written to {job.html_path}")
    emit_ci_outputs(ci, [dag_input(doc, job.dag_path)], quiet=quiet)
    # Errors and a failed gate print even with --quiet: they decide the exit status.
    print_outcome(
        doc,
        max_unsupported=job.settings.max_unsupported,
        run_dir=str(done.run_dir),
        fatal=done.fatal,
        quiet=quiet,
    )
    if done.budget is not None:
        click.echo(done.budget, err=True)  # the cap stopped it: the last line says how to go on
    if done.exit_code is not ExitCode.OK:
        sys.exit(done.exit_code)


def print_dry_run(job: Job) -> None:
    """Print what the run would call and the estimate; no model is built or called."""
    from ..run.dryrun import plan_dry_run, render_dry_run

    with job_errors():
        plan = plan_dry_run(job)
    for line in render_dry_run(plan):
        click.echo(line)


def run_command(options: Mapping[str, Any], inputs: Callable[[], Mapping[str, Any]]) -> None:
    """The body of every command that verifies (`verify`, `check`): the settings, the job, then
    the dry run or the run (exit status as `EXIT_CODES_HELP`).

    `options` are the command's `claims_options` and `run_options` as click passes them;
    `inputs()` gives the job's DAG (`dag_path=` or `dag=` and `extra_inputs=` of `prepare_job`),
    called after the settings are resolved and under the same error handling."""
    o = dict(options)
    claims_path, oracle_path = o.pop("claims_path"), o.pop("oracle_path")
    out_path, html_opt, run_dir = o.pop("out_path"), o.pop("html_opt"), o.pop("run_dir")
    config_path, dry_run, quiet = o.pop("config_path"), o.pop("dry_run"), o.pop("quiet")
    ci = pop_ci_targets(o)
    with job_errors():
        settings = job_settings(o, config_path=config_path)  # every other option is a setting
        job = prepare_job(
            **inputs(),
            claims_path=claims_path,
            oracle_path=oracle_path,
            settings=settings,
            run_dir=run_dir,
            out_path=out_path,
            html=html_opt,
            config_file=find_config_file(config_path),
            create_dirs=not dry_run,
        )
        outs = [("--out", job.out_path), ("--html", job.html_path)]
        check_ci_outputs(
            ci, inputs=job.inputs, outputs=outs, create=not dry_run, run_dirs=[job.run_dir]
        )
    if dry_run:
        print_dry_run(job)
        return
    execute(job, quiet=quiet, ci=ci)


@click.command(epilog=EXIT_CODES_HELP)
@click.argument("dag_path", type=click.Path(dir_okay=False))
@claims_options("the final output")
@run_options
@ci_options
def verify(dag_path: str, **options: Any) -> None:
    """Verify the claims of DAG_PATH's final output and write a report with the evidence trail.

    Settings come from flags, then VERITRAIL_* environment variables, then the TOML file, then
    defaults. The run is saved as it goes; run the same command again (or `veritrail resume
    RUN_DIR`) to finish an interrupted run; claims that ended in error are verified again.
    """
    run_command(options, lambda: {"dag_path": dag_path})
