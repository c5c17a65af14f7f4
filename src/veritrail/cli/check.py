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
@click.argument("answer", type=click.Path(dir_okay=False, allow_dash=True), required=False)
@click.argument("sources", nargs=-1)
@click.option(
    "--conversation",
    "conversation",
    type=click.Path(dir_okay=False),
    default=None,
    help="Check the last assistant message of this chat transcript (OpenAI chat messages, JSON) "
    "against the turns, tool calls and tool results before it, instead of ANSWER and SOURCE.",
)
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
    answer: str | None,
    sources: tuple[str, ...],
    conversation: str | None,
    chunk_sentences: int | None,
    chunk_tokens: int | None,
    **options: Any,
) -> None:
    """Check the claims of ANSWER against SOURCE files and write a report with the evidence trail.

    ANSWER and every SOURCE are UTF-8 text files; SOURCE may be a glob (quote it: 'docs/*.md'),
    and one of them may be `-` for stdin. Without --claims, claims are extracted from the answer
    (--question gives the question it answered). Every option of `veritrail verify` applies.

    With --conversation FILE (and no ANSWER or SOURCE), the last assistant message of a chat
    transcript is checked against the messages, tool calls and tool results before it; each
    assistant message is a stage, so the error stage names the one that first said it.
    """

    def inputs() -> dict[str, Any]:
        if conversation is not None:
            return _conversation_inputs(
                conversation, answer, sources, chunk_sentences, chunk_tokens
            )
        if answer is None or not sources:
            raise JobInputError("give ANSWER and at least one SOURCE (or --conversation FILE)")
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


def _conversation_inputs(
    path: str,
    answer: str | None,
    sources: tuple[str, ...],
    chunk_sentences: int | None,
    chunk_tokens: int | None,
) -> dict[str, Any]:
    """`--conversation FILE`: the transcript's DAG (`adapters.conversation`)."""
    from pathlib import Path

    from ..adapters.conversation import read_conversation
    from ..run.job import InMemoryDag

    if answer is not None or sources:
        raise JobInputError("--conversation FILE takes no ANSWER or SOURCE: the file holds both")
    if chunk_sentences is not None or chunk_tokens is not None:
        raise JobInputError(
            "--chunk-sentences and --chunk-tokens cut SOURCE files, not a conversation"
        )
    if path == STDIN:
        raise JobInputError("--conversation reads a file, not stdin (-)")
    if not Path(path).is_file():
        raise JobInputError(f"conversation file {path} not found")
    dag = InMemoryDag(read_conversation(path), name=Path(path).stem or "conversation")
    return {"dag": dag, "extra_inputs": [("conversation file", path)]}
