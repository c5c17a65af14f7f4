"""`veritrail check ANSWER SOURCE...`: one answer checked against its sources, no DAG file.

The sources are cut into chunks (the root nodes, ids `FILE#N`) and the answer is the terminal
node of a two-stage DAG (`veritrail.run.sources`); from there it is `veritrail verify`: the same
options, outputs, run directory (the DAG is kept in it as `dag.json`, so `veritrail resume`
works) and exit codes.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ..run.job import JobInputError
from ..run.sources import STDIN, expand_paths, read_named, single_step_dag
from .common import EXIT_CODES_HELP, ci_options, claims_options, run_options
from .verify import run_command


@click.command(epilog=EXIT_CODES_HELP)
@click.argument("answer", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("sources", nargs=-1, required=True)
@claims_options("the answer")
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
@ci_options
def check(
    answer: str,
    sources: tuple[str, ...],
    chunk_sentences: int | None,
    chunk_tokens: int | None,
    **options: Any,
) -> None:
    """Check the claims of ANSWER against SOURCE files and write a report with the evidence trail.

    ANSWER and every SOURCE are UTF-8 text files; SOURCE may be a glob (quote it: 'docs/*.md'),
    and one of them may be `-` for stdin. Without --claims, claims are extracted from the answer
    (--question gives the question it answered). Every option of `veritrail verify` applies.
    """

    def inputs() -> dict[str, Any]:
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
        return {"dag": dag, "extra_inputs": files}

    run_command(options, inputs)
