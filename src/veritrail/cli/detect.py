"""`veritrail detect`: one text checked against its references by any registered detector (docs/detectors.md).

The detector runs through the package's one protocol (`veritrail.detectors.base.Detector`): the
text and its references become a DAG (`--dag` as given; `--text/--refs` as `base.text_dag`, the
references as roots) with the whole text as the one claim. `--method` takes a method spec of
`veritrail.detectors.registry` (the same as `veritrail eval --method`): `g2l` (the default)
writes G2LDetect's own report (`detectors.g2l.report`); every other kind writes the
``veritrail-detect-report`` (`detect_report`), whose ``detection`` is the detection as eval's
predictions write it (`detectors.base.detection_to_json`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from ..dag import Dag, DagValidationError, load_dag
from ..detectors.base import Detection, Detector, detection_to_json, text_claim, text_dag
from ..detectors.g2l import (
    G2LConfig,
    G2LResult,
    G2LStatus,
    Reference,
    g2l_report,
    references_from_dag,
)
from ..detectors.registry import BuildContext, MethodSpec, build_method, known_methods, needs_gold
from ..detectors.registry import uses_model as method_uses_model
from ..display import printable
from ..lm.model import Model
from ..method.config import VerifyConfig
from ..outcome import exit_status, gate_exceeded
from ..records import Claim, Verdict
from ..report import ReportFormatError, read_report, write_report
from .common import fail as _fail
from .common import model_options
from .common import read_text as _read

DETECT_REPORT_FORMAT = "veritrail-detect-report"
DETECT_REPORT_VERSION = 1
G2L_ONLY = ("attach_path", "reference_tokens", "max_depth", "max_nodes")
"""Options of G2LDetect's own path (``--method g2l``)."""


def _open_model(
    name: str | None, *, base_url: str | None, cache: str | None, threads: int | None
) -> Model:
    """The model, as `veritrail verify` builds it (`run.model_spec.ModelSpec`: user cache on
    unless turned off, `--threads` for an embedded `local/` model)."""
    from ..lm.registry import ModelNameError, resolve_name
    from ..run.model_spec import ModelSpec
    from ..run.settings import model_cache

    try:
        spec = ModelSpec(
            resolve_name(name), base_url=base_url, cache=model_cache(cache), threads=threads
        )
        return spec.build()
    except (ModelNameError, TypeError, ValueError) as exc:
        _fail(str(exc))


def _method_spec(ctx: click.Context, param: click.Parameter, value: str) -> MethodSpec:
    """Parse ``kind[:key=value,...]`` and check the kind is registered (else a usage error)."""
    try:
        spec = MethodSpec.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if spec.kind not in known_methods():
        raise click.BadParameter(
            f"unknown method {spec.kind!r}; known: {', '.join(known_methods())}"
        )
    return spec


@click.command("detect")
@click.option(
    "--method",
    "spec",
    default="g2l",
    show_default=True,
    callback=_method_spec,
    help="Detector to run: a method spec as in `veritrail eval --method` (g2l, veritrail:q=3, "
    "rag:k=15, direct, nli:model=DIR, sirg:classifier=DIR, ...; the gold oracle needs labels and "
    "is refused). Only g2l writes G2LDetect's report and takes --attach and the tree options.",
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
@click.option(
    "--max-unsupported",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    metavar="RATE",
    help="CI gate: exit 1 when the share of unsupported paths (g2l; any other method: the text, "
    "1 of 1 when judged Not Fully Supported) is above RATE (0 to 1).",
)
@click.argument("more_refs", nargs=-1, type=click.Path(exists=True, dir_okay=False))
def detect(
    spec: MethodSpec,
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
    max_unsupported: float | None,
    more_refs: tuple[str, ...],
) -> None:
    """Check a text against reference documents with a detector (G2LDetect by default).

    Either `--text OUTPUT --refs DOC [DOC...]`, or `--dag DAG.json` to check the final output
    against the DAG's root nodes. With `--method g2l`, writes a JSON report listing every
    root-to-leaf path with its verdict and the failing paths; with `--attach REPORT.json` the
    result is also stored under `"g2l"` in an existing VeriTrail report, whose HTML rendering then
    shows a G2LDetect section. Any other `--method` writes the detector's verdict, score, evidence
    and cost (docs/detectors.md).

    Exit status, as `veritrail verify`'s: 0 no gate failed; 1 the --max-unsupported gate failed;
    2 bad input or usage; 3 the text could not be checked (no usable tree, a path no reply
    decided, a detector error); the report is written in every case but 2.
    """
    if spec.kind != "g2l":
        ctx = click.get_current_context()
        for name in G2L_ONLY:
            if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT:
                flag = "--" + name.removesuffix("_path").replace("_", "-")
                _fail(f"{flag} is an option of --method g2l, not of {spec.kind!r}")
        if needs_gold(spec.kind):
            _fail(
                f"method {spec.kind!r} replays gold labels, and a text checked by "
                "`veritrail detect` has none (run it with `veritrail eval`)"
            )
    all_refs = (*refs, *more_refs)
    host_report = None
    if attach_path is not None:
        try:
            host_report = read_report(attach_path)
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
        source_ids = sorted(dag.roots)
        source_names = [f"{dag_path}#{nid}" for nid in source_ids]
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

        source_ids = ids
        source_names = list(all_refs)
        text_name = text_path
    if spec.kind == "g2l":
        # The tree options are the method's own options (``g2l:max_depth=4`` is the same).
        given = dict(spec.options)
        for key, value in (
            ("reference_tokens", reference_tokens),
            ("max_depth", max_depth),
            ("max_nodes", max_nodes),
        ):
            given.setdefault(key, str(value))
        spec = MethodSpec(spec.kind, tuple(given.items()))
    model = (
        _open_model(model_name, base_url=base_url, cache=cache, threads=threads)
        if method_uses_model(spec.kind)
        else None
    )
    try:
        built = build_method(
            spec, BuildContext(model=model, base_config=VerifyConfig(), references=show)
        )
    except (ValueError, RuntimeError, OSError) as exc:
        if model is not None:
            asyncio.run(model.aclose())
        _fail(str(exc))
    found = asyncio.run(_run(built, model, dag, claim))
    if isinstance(found.native, BaseException):
        raise found.native  # a model failure ends the command as it always did (cli.main)
    if spec.kind != "g2l":
        _write_detection(
            found,
            spec,
            model,
            text=text,
            text_source=text_name,
            sources=source_names,
            source_ids=source_ids,
            out_path=out_path,
            max_unsupported=max_unsupported,
        )
        return
    assert model is not None  # G2LDetect always calls the model
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
        sys.exit(int(exit_status(errors=True, gate_failed=False)))
    failing = result.failing_paths
    undecided = [p for p in result.paths if p.supported is None]
    click.echo(
        f"G2LDetect: {result.status.value} — {len(result.paths)} paths, {len(failing)} unsupported"
        + (f", {len(undecided)} could not be checked" if undecided else "")
        + f"; report: {out_path}"
    )

    def path_line(nodes: Sequence[str]) -> str:
        # A path's nodes are the model's own text: one line each (a tree node may hold a
        # newline), with any control character shown, never acted on by the terminal.
        return " › ".join(printable(" ".join(n.split())) for n in nodes)

    for p in failing:
        click.echo("  ✗ " + path_line(p.nodes))
    for p in undecided:
        click.echo("  ? " + path_line(p.nodes) + (f" ({printable(p.error)})" if p.error else ""))
    gate = gate_exceeded(len(failing), len(result.paths), max_unsupported)
    if gate and max_unsupported is not None:
        click.echo(
            f"gate failed: {len(failing)} of {len(result.paths)} paths unsupported "
            f"({len(failing) / len(result.paths):.0%}, allowed {max_unsupported:.0%})"
        )
    code = exit_status(errors=bool(undecided), gate_failed=gate)
    if code:
        sys.exit(int(code))


def _write_detection(
    found: Detection,
    spec: MethodSpec,
    model: Model | None,
    *,
    text: str,
    text_source: str,
    sources: Sequence[str],
    source_ids: Sequence[str],
    out_path: str,
    max_unsupported: float | None = None,
) -> None:
    """Any detector's result but G2LDetect's (which writes its own report format): write
    `detect_report`, print the verdict. Exit 0 with a verdict or none, 1 when the text is judged
    Not Fully Supported and `max_unsupported` is below 1 (the gate over one claim), 3 when the
    detection records an error."""
    doc = detect_report(
        found,
        method=spec,
        model=model,
        text=text,
        text_source=text_source,
        sources=sources,
        source_ids=source_ids,
    )
    Path(out_path).write_text(
        json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    if found.error is not None:
        _fail(f"{found.method} could not decide: {found.error}; report: {out_path}", 3)
    score = "" if found.score is None else f" (score {found.score:.3f})"
    verdict = found.verdict.value if found.verdict is not None else "no verdict"
    click.echo(f"{found.method}: {verdict}{score}; report: {out_path}")
    unsupported = int(found.verdict is Verdict.NOT_FULLY_SUPPORTED)
    if gate_exceeded(unsupported, 1, max_unsupported) and max_unsupported is not None:
        click.echo(f"gate failed: the text is not supported (allowed {max_unsupported:.0%})")
        sys.exit(int(exit_status(errors=False, gate_failed=True)))


async def _run(detector: Detector, model: Model | None, dag: Dag, claim: Claim) -> Detection:
    """The one detection of `claim`; the model is closed afterwards."""
    try:
        (found,) = await detector.detect(dag, [claim])
        return found
    finally:
        if model is not None:
            await model.aclose()


def detect_report(
    found: Detection,
    *,
    method: MethodSpec,
    model: Model | None,
    text: str,
    text_source: str,
    sources: Sequence[str],
    source_ids: Sequence[str],
) -> dict[str, Any]:
    """The ``veritrail-detect-report`` of one detection by a detector other than G2LDetect.

    `references` name the reference files (or ``DAG#node``) and `reference_ids` the DAG node ids
    they were given, in the same order, which the detection's evidence keys
    (``[node id, sentence index]``) use.
    """
    spec = method.kind + (
        ":" + ",".join(f"{k}={v}" for k, v in method.options) if method.options else ""
    )
    return {
        "format": DETECT_REPORT_FORMAT,
        "version": DETECT_REPORT_VERSION,
        "method": spec,
        "detector": found.method,
        "model": model.name if model is not None else None,
        "verdict": found.verdict.value if found.verdict is not None else None,
        "score": found.score,
        "text": text,
        "text_source": text_source,
        "references": list(sources),
        "reference_ids": list(source_ids),
        "detection": detection_to_json(found),
        "cost": (
            {step: asdict(c) for step, c in model.usage.per_step().items()}
            if model is not None
            else {}
        ),
    }
