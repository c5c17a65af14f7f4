"""`veritrail pipeline …`: run a reference pipeline and write the DAG it recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .common import fail as _fail
from .common import model_options
from .common import read_text as _read

if TYPE_CHECKING:
    from ..lm.model import Model
    from ..pipelines import PipelineResult


def _run(
    model_args: dict[str, Any], out_path: str, job: Callable[[Model], Awaitable[PipelineResult]]
) -> None:
    from ..dag import save_dag
    from ..pipelines import PipelineError
    from .common import open_model

    # Same model flags and cache behaviour as `veritrail verify` (re-runs cost nothing).
    model = open_model(
        model_args["model_name"],
        base_url=model_args["base_url"],
        cache=model_args["cache"],
        threads=model_args["threads"],
    )

    async def go() -> PipelineResult:
        try:
            return await job(model)
        finally:
            await model.aclose()

    try:
        res = asyncio.run(go())
    except PipelineError as exc:
        _fail(str(exc))
    save_dag(res.dag, out_path)
    stages = max(n.stage for n in res.dag)
    click.echo(
        f"{len(res.dag)} nodes over {stages} stages, {res.lm_calls} model calls ({model.name}); "
        f"DAG written to {Path(out_path)}"
    )


_out_option = click.option(
    "--out", "out_path", required=True, type=click.Path(dir_okay=False), help="DAG file to write."
)
_chunk_option = click.option(
    "--chunk-tokens",
    type=int,
    default=2048,
    show_default=True,
    help="Chunk size (estimated tokens).",
)


def _margs(
    model_name: str | None, base_url: str | None, cache: str | None, threads: int | None
) -> dict[str, Any]:
    return {"model_name": model_name, "base_url": base_url, "cache": cache, "threads": threads}


@click.group()
def pipeline() -> None:
    """Run a reference pipeline that records its generation DAG (to verify its output)."""


@pipeline.command("summarize")
@click.argument("book", type=click.Path(dir_okay=False, exists=True))
@_out_option
@model_options
@_chunk_option
@click.option(
    "--context-tokens",
    type=int,
    default=8192,
    show_default=True,
    help="Tokens of summaries merged in one call.",
)
@click.option("--summary-words", type=int, default=300, show_default=True)
@click.option("--max-output-tokens", type=int, default=600, show_default=True)
@click.option("--title", default=None, help="Title shown to the model with each chunk.")
def summarize(
    book: str,
    out_path: str,
    model_name: str | None,
    base_url: str | None,
    cache: str | None,
    threads: int | None,
    chunk_tokens: int,
    context_tokens: int,
    summary_words: int,
    max_output_tokens: int,
    title: str | None,
) -> None:
    """Hierarchical summarization of BOOK (chunk → summaries → merged level by level)."""
    from ..pipelines import HierarchicalConfig, summarize_hierarchical

    text = _read(book)
    try:
        cfg = HierarchicalConfig(
            chunk_tokens=chunk_tokens,
            context_tokens=context_tokens,
            summary_words=summary_words,
            max_output_tokens=max_output_tokens,
            title=title,
        )
    except ValueError as exc:
        _fail(str(exc))
    _run(
        _margs(model_name, base_url, cache, threads),
        out_path,
        lambda m: summarize_hierarchical(text, m, cfg),
    )


@pipeline.command("incremental")
@click.argument("book", type=click.Path(dir_okay=False, exists=True))
@_out_option
@model_options
@_chunk_option
@click.option("--summary-words", type=int, default=300, show_default=True)
@click.option("--max-output-tokens", type=int, default=600, show_default=True)
def incremental(
    book: str,
    out_path: str,
    model_name: str | None,
    base_url: str | None,
    cache: str | None,
    threads: int | None,
    chunk_tokens: int,
    summary_words: int,
    max_output_tokens: int,
) -> None:
    """Incremental summarization of BOOK (a running summary updated chunk by chunk)."""
    from ..pipelines import IncrementalConfig, summarize_incremental

    text = _read(book)
    try:
        cfg = IncrementalConfig(
            chunk_tokens=chunk_tokens,
            summary_words=summary_words,
            max_output_tokens=max_output_tokens,
        )
    except ValueError as exc:
        _fail(str(exc))
    _run(
        _margs(model_name, base_url, cache, threads),
        out_path,
        lambda m: summarize_incremental(text, m, cfg),
    )


@pipeline.command("qa")
@click.argument("docs", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--question", required=True, help="The question to answer from DOCS.")
@_out_option
@model_options
@_chunk_option
@click.option(
    "--context-tokens",
    type=int,
    default=8192,
    show_default=True,
    help="Tokens of answers reduced in one call.",
)
@click.option("--max-output-tokens", type=int, default=600, show_default=True)
def qa(
    docs: tuple[str, ...],
    question: str,
    out_path: str,
    model_name: str | None,
    base_url: str | None,
    cache: str | None,
    threads: int | None,
    chunk_tokens: int,
    context_tokens: int,
    max_output_tokens: int,
) -> None:
    """Map-reduce question answering over DOCS (one answer per chunk, then reduced)."""
    from ..pipelines import QAConfig, answer_map_reduce

    texts = [_read(d) for d in docs]
    try:
        cfg = QAConfig(
            chunk_tokens=chunk_tokens,
            context_tokens=context_tokens,
            max_output_tokens=max_output_tokens,
        )
    except ValueError as exc:
        _fail(str(exc))
    _run(
        _margs(model_name, base_url, cache, threads),
        out_path,
        lambda m: answer_map_reduce(question, texts, m, cfg),
    )
