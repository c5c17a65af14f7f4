"""`veritrail detect`: whole-text hallucination detectors other than the VeriTrail loop (SPEC §6).

The detector runs through the package's one protocol (`veritrail.detectors.base.Detector`): the
text and its references become a DAG (`--dag` as given; `--text/--refs` as `base.text_dag`, the
references as roots) with the whole text as the one claim.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import click

from ..dag import Dag, DagValidationError, load_dag
from ..detectors.base import Detection, text_claim, text_dag
from ..detectors.g2l import (
    G2LConfig,
    G2LDetector,
    G2LResult,
    G2LStatus,
    Reference,
    g2l_report,
    references_from_dag,
)
from ..records import Claim
from ..report import ReportFormatError, load_report, write_report
from .common import fail as _fail
from .common import model_options, open_model
from .common import read_text as _read

METHODS = ("g2l",)


@click.command("detect")
@click.option(
    "--method",
    type=click.Choice(METHODS),
    default="g2l",
    show_default=True,
    help="Detector to run.",
)
@click.option(
    "--text",
    "text_path",
    type=click.Path(exists=True, dir_okay=False),
    help="File holding the text to check.",
)
@click.option(
    "--refs",
    "refs",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Reference document(s); further file names after the options are references too.",
)
@click.option(
    "--dag",
    "dag_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Check a DAG's terminal node against its root nodes (instead of --text/--refs).",
)
@model_options
@click.option(
    "--out",
    "out_path",
    default="detect-report.json",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="JSON report to write.",
)
@click.option(
    "--attach",
    "attach_path",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help='Also store the result under "g2l" in this VeriTrail report (its HTML shows a section).',
)
@click.option(
    "--reference-tokens",
    type=click.IntRange(min=1),
    default=G2LConfig().reference_tokens,
    show_default=True,
    help="Token budget for the reference text of one check prompt; longer references are chunked.",
)
@click.option(
    "--max-depth",
    type=click.IntRange(min=1),
    default=G2LConfig().max_depth,
    show_default=True,
    help="Deepest usable tree (a deeper one is re-asked, then recorded as failed).",
)
@click.option(
    "--max-nodes",
    type=click.IntRange(min=1),
    default=G2LConfig().max_nodes,
    show_default=True,
    help="Largest usable tree, in nodes.",
)
@click.argument("more_refs", nargs=-1, type=click.Path(exists=True, dir_okay=False))
def detect(
    method: str,
    text_path: str | None,
    refs: tuple[str, ...],
    dag_path: str | None,
    model_name: str | None,
    base_url: str | None,
    cache: str | None,
    threads: int | None,
    out_path: str,
    attach_path: str | None,
    reference_tokens: int,
    max_depth: int,
    max_nodes: int,
    more_refs: tuple[str, ...],
) -> None:
    """Check a text against reference documents with a whole-text detector (G2LDetect).

    Either `--text OUTPUT --refs DOC [DOC...]`, or `--dag DAG.json` to check the final output
    against the DAG's root nodes. Writes a JSON report listing every root-to-leaf path with its
    verdict and the failing paths. With `--attach REPORT.json` the result is also stored under
    `"g2l"` in an existing VeriTrail report, whose HTML rendering then shows a G2LDetect section.
    """
    all_refs = (*refs, *more_refs)
    host_report = None
    if attach_path is not None:
        try:
            host_report = load_report(attach_path)
        except ReportFormatError as exc:
            _fail(str(exc))
    if dag_path is not None:
        if text_path is not None or all_refs:
            _fail("give either --dag or --text with --refs, not both")
        try:
            dag = load_dag(dag_path)
        except DagValidationError as exc:
            _fail(str(exc))
        text = dag.node(dag.terminal).text
        claim = Claim(dag.terminal, text)
        show: Callable[[Dag], list[Reference]] = references_from_dag  # sorted, "node <id>"
        source_names = [f"{dag_path}#{nid}" for nid in sorted(dag.roots)]
        text_name = f"{dag_path}#{dag.terminal}"
    else:
        if text_path is None or not all_refs:
            _fail("give --text OUTPUT and at least one --refs DOC (or --dag DAG.json)")
        text = _read(text_path)
        ids = [f"source-{i}" for i in range(1, len(all_refs) + 1)]
        labels = dict(zip(ids, (Path(r).name for r in all_refs), strict=True))
        dag = text_dag(text, [_read(r) for r in all_refs], source_ids=ids)
        claim = text_claim(text)

        def by_file_name(d: Dag) -> list[Reference]:
            # References in the order given, labelled by file name (as the prompts always were).
            return [Reference(labels[nid], d.node(nid).text) for nid in ids]

        show = by_file_name

        source_names = list(all_refs)
        text_name = text_path
    try:
        cfg = G2LConfig(reference_tokens=reference_tokens, max_depth=max_depth, max_nodes=max_nodes)
    except ValueError as exc:
        _fail(str(exc))
    model = open_model(model_name, base_url=base_url, cache=cache, threads=threads)
    detector = G2LDetector(model, cfg, references=show)

    async def go() -> Detection:
        try:
            (found,) = await detector.detect(dag, [claim])
            return found
        finally:
            await model.aclose()

    found = asyncio.run(go())
    if isinstance(found.native, BaseException):
        raise found.native  # a model failure ends the command as it always did (cli.main)
    result: G2LResult = found.native
    report = g2l_report(
        result,
        model=model.name,
        text=text,
        sources=source_names,
        usage={step: asdict(c) for step, c in model.usage.per_step().items()},
    )
    report["text_source"] = text_name
    Path(out_path).write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    if host_report is not None and attach_path is not None:
        host_report["g2l"] = report
        write_report(host_report, attach_path)
        click.echo(
            f"G2LDetect result attached to {attach_path} (re-render it with `veritrail report`)"
        )
    if result.status is G2LStatus.TREE_FAILED:
        click.echo(f"G2LDetect could not build a tree ({result.tree_error}); report: {out_path}")
        return
    failing = result.failing_paths
    click.echo(
        f"G2LDetect: {result.status.value} — {len(result.paths)} paths, {len(failing)} unsupported"
        f"; report: {out_path}"
    )
    for p in failing:
        click.echo("  ✗ " + " › ".join(p.nodes))
