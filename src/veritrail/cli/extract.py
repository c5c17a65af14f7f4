"""`veritrail extract`: claims from a DAG's final output (or a text file), for review before verify."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from ..dag import DagValidationError, load_dag
from ..method.extraction import (
    DEFAULT_CONTEXT_AFTER,
    DEFAULT_CONTEXT_BEFORE,
    DEFAULT_SIMILARITY,
    ExtractionConfig,
    ExtractionMode,
    ExtractionResult,
    SentenceOutcome,
    claims_document,
    trace_to_json,
    write_claims_document,
)
from ..method.extraction import (
    extract as run_extraction,
)
from ..textio import InputError
from ..textio import read_input_text as _read_text_file
from .common import fail as _fail
from .common import model_options, open_model


def read_input_text(path: str) -> tuple[str, str]:
    """The text to extract from and what it is: a DAG's terminal node (`.json` / `.jsonl` files
    that are DAGs) or the whole file read as text."""
    p = Path(path)
    if p.suffix.lower() in (".json", ".jsonl"):
        dag = load_dag(p)  # a JSON file that is not a valid DAG is an error, not text
        return dag.node(dag.terminal).text, f"terminal node {dag.terminal!r} of {p}"
    return _read_text_file(p, "text file"), f"text file {p}"


@click.command("extract")
@click.argument("input_path", metavar="DAG|TEXT_FILE", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--out",
    "out_path",
    default="claims.json",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="Claims file to write (read by `veritrail verify --claims`).",
)
@model_options
@click.option(
    "--context-before",
    type=click.IntRange(min=0),
    default=DEFAULT_CONTEXT_BEFORE,
    show_default=True,
    help="Preceding sentences shown with each sentence.",
)
@click.option(
    "--context-after",
    type=click.IntRange(min=0),
    default=DEFAULT_CONTEXT_AFTER,
    show_default=True,
    help="Following sentences shown with each sentence.",
)
@click.option("--question", default=None, help="The question the text answers, if any.")
@click.option(
    "--extraction",
    "mode",
    type=click.Choice([m.value for m in ExtractionMode]),
    default=ExtractionMode.BATCHED.value,
    show_default=True,
    help="Each stage over many sentences per call, or per-sentence (three calls a sentence, "
    "the paper's form).",
)
@click.option(
    "--similarity",
    type=click.FloatRange(min=0.0, max=1.0, min_open=True),
    default=DEFAULT_SIMILARITY,
    show_default=True,
    help="Near-duplicate threshold for merging claims (1.0 = exact matches only).",
)
@click.option(
    "--trace",
    "trace_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the per-sentence trace (selection, disambiguation, decomposition) here.",
)
def extract(
    input_path: str,
    out_path: str,
    model_name: str | None,
    base_url: str | None,
    cache: str | None,
    threads: int | None,
    context_before: int,
    context_after: int,
    question: str | None,
    mode: str,
    similarity: float,
    trace_path: str | None,
) -> None:
    """Extract self-contained, checkable claims from DAG|TEXT_FILE and write them to --out.

    A `.json` / `.jsonl` input is read as a DAG and its terminal node is used; anything else is
    read as plain text. Edit the claims file if you like, then run
    `veritrail verify DAG --claims FILE`.
    """
    try:
        text, described = read_input_text(input_path)
    except (DagValidationError, InputError) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{input_path}: {exc}")
    cfg = ExtractionConfig(context_before, context_after, similarity, mode=ExtractionMode(mode))
    model = open_model(model_name, base_url=base_url, cache=cache, threads=threads)

    async def go() -> ExtractionResult:
        try:
            return await run_extraction(model, text, question=question, config=cfg)
        finally:
            await model.aclose()

    result = asyncio.run(go())
    doc: dict[str, Any] = claims_document(
        result, source=str(input_path), model=model.name, question=question
    )
    doc["cost"] = {step: asdict(c) for step, c in model.usage.per_step().items()}
    write_claims_document(doc, out_path)
    if trace_path:
        Path(trace_path).write_text(
            json.dumps(trace_to_json(result.trace), indent=2, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
    outcomes = [t.outcome for t in result.trace]
    skipped = {
        "no checkable content": outcomes.count(SentenceOutcome.NO_VERIFIABLE_CONTENT),
        "unresolvable": outcomes.count(SentenceOutcome.UNRESOLVABLE),
        "no claims": outcomes.count(SentenceOutcome.NO_CLAIMS),
        "unreadable replies": outcomes.count(SentenceOutcome.ERROR),
    }
    detail = ", ".join(f"{k}: {v}" for k, v in skipped.items() if v)
    click.echo(
        f"{len(result.claims)} claims from {len(result.sentences)} sentences of the {described}"
        + (f" (skipped — {detail})" if detail else "")
        + f"; written to {out_path}"
    )
