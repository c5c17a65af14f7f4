"""`veritrail check ANSWER SOURCE...`: one answer checked against its sources, no DAG file.

The sources are cut into chunks (the root nodes, ids `FILE#N`) and the answer is the terminal
node of a two-stage DAG (`veritrail.run.sources`); from there it is `veritrail verify`: the same
options, outputs, run directory (the DAG is kept in it as `dag.json`, so `veritrail resume`
works) and exit codes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ..run.job import JobInputError, prepare_job
from ..run.sources import STDIN, expand_paths, read_named, single_step_dag
from ..settings import find_config_file
from .verify import (
    EXIT_CODES_HELP,
    execute,
    job_errors,
    print_dry_run,
    resolve_cli_settings,
    run_options,
)


@click.command(epilog=EXIT_CODES_HELP)
@click.argument("answer", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("sources", nargs=-1, required=True)
@click.option(
    "--claims",
    "claims_path",
    type=click.Path(dir_okay=False),
    help="Claims JSON file (default: extract claims from the answer).",
)
@click.option(
    "--oracle",
    "oracle_path",
    type=click.Path(dir_okay=False),
    help="Answer every step from this oracle file instead of a model.",
)
@click.option(
    "--chunk-sentences",
    type=int,
    default=None,
    help="Sentences per source chunk [default: 10].",
)
@click.option(
    "--chunk-tokens",
    type=int,
    default=None,
    help="Source chunks of about this many tokens instead (whole sentences).",
)
@run_options
def check(
    answer: str,
    sources: tuple[str, ...],
    claims_path: str | None,
    oracle_path: str | None,
    chunk_sentences: int | None,
    chunk_tokens: int | None,
    out_path: str,
    html_opt: str | None,
    config_path: str | None,
    dry_run: bool,
    run_dir: str | None,
    quiet: bool,
    **setting_flags: Any,
) -> None:
    """Check the claims of ANSWER against SOURCE files and write a report with the evidence trail.

    ANSWER and every SOURCE are UTF-8 text files; SOURCE may be a glob (quote it: 'docs/*.md'),
    and one of them may be `-` for stdin. Without --claims, claims are extracted from the answer
    (--question gives the question it answered). Every option of `veritrail verify` applies.
    """
    settings = resolve_cli_settings(setting_flags, config_path)
    with job_errors():
        paths = expand_paths(sources)
        if answer == STDIN and STDIN in paths:
            raise JobInputError("stdin (-) can be read only once")
        stdin_text = sys.stdin.read() if STDIN in (answer, *paths) else None
        answer_text = read_named(answer, "answer file", stdin_text).text
        texts = [read_named(p, "source file", stdin_text) for p in paths]
        dag = single_step_dag(
            answer_text, texts, chunk_sentences=chunk_sentences, chunk_tokens=chunk_tokens
        )
        files = [("answer file", answer)] if answer != STDIN else []
        files += [("source file", p) for p in paths if p != STDIN]
        job = prepare_job(
            dag=dag,
            claims_path=claims_path,
            oracle_path=oracle_path,
            settings=settings,
            run_dir=run_dir,
            out_path=out_path,
            html=html_opt,
            config_file=find_config_file(config_path, os.environ, Path.cwd()),
            create_dirs=not dry_run,
            extra_inputs=files,
        )
    if dry_run:
        print_dry_run(job)
        return
    execute(job, quiet=quiet)
