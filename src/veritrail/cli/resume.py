"""`veritrail resume RUN_DIR`: finish an interrupted run from its run directory.

The run directory holds everything needed: the DAG path and content hash, the claims, the model
name and the settings (run.json, claims.json). Finished claims are loaded, the rest run, and the
model cache answers every call the interrupted run already made.
"""

from __future__ import annotations

import click

from .verify import execute, job_from_run_dir


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option(
    "--out",
    "out_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="The JSON report [default: where the run was told to write it].",
)
@click.option("--html", is_flag=True, help="Also write the HTML report beside the JSON (.html).")
@click.option("--html-out", type=click.Path(dir_okay=False), default=None)
@click.option("--quiet", is_flag=True, help="No progress and no summary.")
def resume(
    run_dir: str, out_path: str | None, html: bool, html_out: str | None, quiet: bool
) -> None:
    """Finish the run in RUN_DIR (same as re-running the `veritrail verify` command that made it)."""
    job = job_from_run_dir(run_dir, out_path=out_path, html=html, html_out=html_out)
    execute(job, quiet=quiet)
