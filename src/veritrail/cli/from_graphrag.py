"""`veritrail from-graphrag INDEX_DIR --out dag.json`: a GraphRAG index (and query) → DAG."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import click
from pydantic import ValidationError

from ..dag import Dag, DagValidationError, save_dag
from ..textio import InputError
from .common import fail as _fail
from .common import model_options, open_model

if TYPE_CHECKING:
    from ..adapters.graphrag import GraphRagIndex
    from ..lm.model import Model


@click.command("from-graphrag")
@click.argument("index_dir", type=click.Path(file_okay=False))
@click.option(
    "--out", "out_path", required=True, type=click.Path(dir_okay=False), help="DAG file to write."
)
@click.option(
    "--question", default=None, help="Run our GraphRAG-style global search for this question."
)
@model_options
@click.option(
    "--capture",
    "capture_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="A captured global search (JSON, docs/adapters.md) to add as map answers and answer.",
)
@click.option(
    "--local-capture",
    "local_capture_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="A captured local search (JSON, docs/adapters.md): its answer and context records.",
)
@click.option(
    "--terminal-report",
    default=None,
    help="Without a query: make this report (community number or report id) the terminal.",
)
@click.option(
    "--community-level", type=int, default=2, show_default=True, help="Level cut for --question."
)
@click.option(
    "--batch-tokens", type=int, default=8000, show_default=True, help="Report tokens per map call."
)
@click.option(
    "--save-capture",
    type=click.Path(dir_okay=False),
    default=None,
    help="With --question: also write the search as a capture file.",
)
def from_graphrag(
    index_dir: str,
    out_path: str,
    question: str | None,
    model_name: str | None,
    base_url: str | None,
    cache: str | None,
    threads: int | None,
    capture_path: str | None,
    local_capture_path: str | None,
    terminal_report: str | None,
    community_level: int,
    batch_tokens: int,
    save_capture: str | None,
) -> None:
    """Build the generation DAG of a GraphRAG index output folder.

    Text units → entity/relationship descriptions → community reports, then either the map
    answers and final answer of a global search (--capture FILE, or --question Q --model M to
    run our own), the answer of a local search (--local-capture FILE), or, with no query, a chosen report as terminal (--terminal-report) or by default
    a plumbing DAG whose top-level report is made terminal over everything.
    """
    from ..adapters.graphrag import (
        GlobalSearchCapture,
        GraphRagIndexError,
        build_index_dag,
        build_query_dag,
        load_index,
    )

    if (
        sum(x is not None for x in (question, capture_path, local_capture_path, terminal_report))
        > 1
    ):
        _fail("use only one of --question, --capture, --local-capture and --terminal-report")
    try:
        index = load_index(index_dir)
        dag: Dag
        if capture_path is not None:
            try:
                capture = GlobalSearchCapture.from_file(capture_path)
            except InputError as exc:  # unreadable, not UTF-8, not JSON: names the file
                _fail(str(exc))
            except (OSError, ValidationError) as exc:
                _fail(f"{capture_path}: {exc}")
            dag = build_query_dag(index, capture)
        elif local_capture_path is not None:
            from ..adapters.graphrag import LocalSearchCapture, build_local_query_dag

            try:
                local = LocalSearchCapture.from_file(local_capture_path)
            except InputError as exc:  # unreadable, not UTF-8, not JSON: names the file
                _fail(str(exc))
            except (OSError, ValidationError) as exc:
                _fail(f"{local_capture_path}: {exc}")
            dag = build_local_query_dag(index, local)
        elif question is not None:
            dag = asyncio.run(
                _search(
                    index,
                    question,
                    open_model(model_name, base_url=base_url, cache=cache, threads=threads),
                    community_level,
                    batch_tokens,
                    save_capture,
                )
            )
        else:
            dag = build_index_dag(index, terminal_report=terminal_report)
    except (GraphRagIndexError, DagValidationError) as exc:
        _fail(str(exc))
    save_dag(dag, out_path)
    st = dag.meta.get("stage_names", {})
    per_stage = ", ".join(f"{sum(1 for n in dag if n.stage == int(k))} {v}" for k, v in st.items())
    click.echo(
        f"{len(dag)} nodes ({per_stage}); terminal {dag.terminal}; written to {Path(out_path)}"
    )


async def _search(
    index: GraphRagIndex,
    question: str,
    model: Model,
    community_level: int,
    batch_tokens: int,
    save_capture: str | None,
) -> Dag:
    from ..pipelines.graphrag_search import GlobalSearchConfig, GlobalSearchError, global_search

    try:
        res = await global_search(
            index,
            question,
            model,
            GlobalSearchConfig(community_level=community_level, batch_tokens=batch_tokens),
        )
    except GlobalSearchError as exc:
        _fail(str(exc))
    finally:
        await model.aclose()
    if save_capture:
        Path(save_capture).write_text(res.capture.model_dump_json(indent=1), encoding="utf-8")
    return res.dag
