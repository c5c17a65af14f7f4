"""`veritrail resume RUN_DIR`: finish an interrupted run from its run directory.

The run directory holds everything needed: the DAG path and content hash, the claims, the model
name and the settings (run.json, claims.json). Finished claims are loaded; the rest, and the
claims that ended in error last time, are verified; the model cache answers every call the
earlier run already made. The exit status is the same as `veritrail verify`'s.
"""

from __future__ import annotations

from typing import Any

import click

from .. import environment
from ..redaction import url_secret
from ..run.job import HTML_BESIDE, job_from_run_dir
from ..run.settings import SettingsError, coerce_setting
from .common import EXIT_CODES_HELP, budget_options, fail, job_errors
from .verify import execute


@click.command(epilog=EXIT_CODES_HELP)
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
@click.option(
    "--max-unsupported",
    type=float,
    default=None,
    metavar="RATE",
    help="CI gate: exit 1 when the share of claims judged Not Fully Supported is above RATE "
    "(0 to 1) [default: the run's own setting].",
)
@click.option(
    "--base-url",
    default=None,
    help="The endpoint again, when the run's had a user or password (run.json never stores "
    "them) [default: the run's own].",
)
@budget_options
@click.option("--quiet", is_flag=True, help="No progress and no summary (errors still print).")
def resume(
    run_dir: str,
    out_path: str | None,
    html_opt: str | None,
    max_unsupported: float | None,
    base_url: str | None,
    max_cost: float | None,
    max_tokens: int | None,
    quiet: bool,
) -> None:
    """Finish the run in RUN_DIR (same as re-running the `veritrail verify` command that made it).

    Claims that ended in error are verified again; finished verdicts are kept.
    """
    overrides: dict[str, Any] = {}
    base_url = base_url or environment.get("VERITRAIL_BASE_URL")
    try:
        if max_unsupported is not None:
            overrides["max_unsupported"] = coerce_setting(
                "max_unsupported", max_unsupported, "option --max-unsupported"
            )
        # A cap given here replaces the run's own (run.json keeps the one the run was given);
        # it bounds this command's calls: those the earlier run made are answered by the cache.
        for name, value in (("max_cost", max_cost), ("max_tokens", max_tokens)):
            if value is not None:
                overrides[name] = coerce_setting(name, value, f"option --{name.replace('_', '-')}")
        if base_url:
            overrides["base_url"] = coerce_setting("base_url", base_url, "option --base-url")
    except SettingsError as exc:
        fail(str(exc))
    url_secret(base_url)
    with job_errors():
        job = job_from_run_dir(run_dir, out_path=out_path, html=html_opt, overrides=overrides)
    execute(job, quiet=quiet)
