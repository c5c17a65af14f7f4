"""`veritrail resume RUN_DIR`: finish an interrupted run from its run directory.

The run directory holds everything needed: the DAG path and content hash, the claims, the model
name and the settings (run.json, claims.json). Finished claims are loaded, the rest run, and the
model cache answers every call the interrupted run already made.
"""

from __future__ import annotations

import click

from .verify import HTML_BESIDE, execute, job_from_run_dir


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option(
    "--out",
    "out_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="The JSON report [default: where the run was told to write it].",
)
@click.option(
    "--html",
    "html_opt",
    is_flag=False,
    flag_value=HTML_BESIDE,
    default=None,
    metavar="[FILE]",
    help="Write the HTML report: to FILE, or beside the JSON when no FILE is given "
    "[default: where the run was told to write it, if anywhere].",
)
@click.option("--quiet", is_flag=True, help="No progress and no summary.")
def resume(run_dir: str, out_path: str | None, html_opt: str | None, quiet: bool) -> None:
    """Finish the run in RUN_DIR (same as re-running the `veritrail verify` command that made it)."""
    job = job_from_run_dir(run_dir, out_path=out_path, html=html_opt)
    execute(job, quiet=quiet)
