"""Verdicts → Phoenix span annotations (`veritrail export RUN --to phoenix`).

Each `Mark` becomes one span annotation (`POST /v1/span_annotations?sync=true`): name, label,
score, explanation, metadata, annotator kind LLM, and the mark's identifier. Phoenix keeps one
annotation per (name, span, identifier) and replaces it when the same three come again, so an
export run twice updates its annotations and never adds a second copy. Before the first write the
two categorical annotation configs (`CONFIGS`) are created when the server has none of those
names, so Phoenix shows the labels as categories (an existing config is left as it is); the
citation config (`CITATION_CONFIG`) only when the run checked citations (it has citation marks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...records import CitationStatus, Verdict
from .client import PhoenixClient
from .marks import (
    CITATION_NAME,
    CITATION_SCORES,
    ERROR_LABEL,
    ORIGIN_LABEL,
    ORIGIN_NAME,
    VERDICT_NAME,
    Mark,
    load_run,
    marks_for_run,
)

CONFIGS: tuple[Mapping[str, Any], ...] = (
    {
        "name": VERDICT_NAME,
        "type": "CATEGORICAL",
        "description": "VeriTrail's verdict on one claim of the final output (label), with the "
        "model's reasoning (explanation). The claim is in the metadata.",
        "optimization_direction": "MAXIMIZE",
        "values": [
            {"label": Verdict.FULLY_SUPPORTED.value, "score": 1.0},
            {"label": Verdict.INCONCLUSIVE.value, "score": 0.5},
            {"label": Verdict.NOT_FULLY_SUPPORTED.value, "score": 0.0},
            {"label": ERROR_LABEL, "score": None},
        ],
    },
    {
        "name": ORIGIN_NAME,
        "type": "CATEGORICAL",
        "description": "VeriTrail traced a Not Fully Supported claim back to this span: its "
        "unsupported content most likely entered here. The explanation names the claim and the "
        "evidence trail.",
        "optimization_direction": "MINIMIZE",
        "values": [{"label": ORIGIN_LABEL, "score": 0.0}],
    },
)
"""The annotation configs created once per Phoenix server."""

CITATION_CONFIG: Mapping[str, Any] = {
    "name": CITATION_NAME,
    "type": "CATEGORICAL",
    "description": "VeriTrail's citation status of one claim of the final output (label): does "
    "a source the answer cites for it hold its evidence? The explanation names the cited nodes "
    "and the nodes holding its evidence (docs/citations.md).",
    "optimization_direction": "MAXIMIZE",
    "values": [{"label": s.value, "score": CITATION_SCORES[s.value]} for s in CitationStatus],
}
"""Created (once per server) when an export has citation marks."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What an export wrote."""

    trace_id: str
    marks: tuple[Mark, ...]
    ids: tuple[str, ...]
    """The ids Phoenix (or Langfuse) gave the annotations (scores), in mark order."""


def annotation_body(mark: Mark) -> dict[str, Any]:
    """One mark as Phoenix's `SpanAnnotationData`."""
    return {
        "span_id": mark.span_id,
        "name": mark.name,
        "annotator_kind": "LLM",
        "identifier": mark.identifier,
        "result": {"label": mark.label, "score": mark.score, "explanation": mark.explanation},
        "metadata": dict(mark.metadata),
    }


def write_marks(
    client: PhoenixClient, marks: Sequence[Mark], *, project: str | None = None
) -> tuple[str, ...]:
    """Create the configs if missing (and assign them to `project` when given), then insert or
    update every mark's annotation."""
    used = {m.name for m in marks}
    for config in (*CONFIGS, *((CITATION_CONFIG,) if CITATION_NAME in used else ())):
        key = (str(config["name"]), project)
        if key in client.configs_ready:
            continue
        client.ensure_annotation_config(config)
        if project:
            client.assign_annotation_config(project, key[0])
        client.configs_ready.add(key)
    return tuple(client.annotate_spans([annotation_body(m) for m in marks]))


def dag_project(meta: Mapping[str, Any]) -> str | None:
    """The Phoenix project a DAG was read from (``meta.phoenix.project``), if it was."""
    phoenix = meta.get("phoenix")
    project = phoenix.get("project") if isinstance(phoenix, Mapping) else None
    return str(project) if project else None


def export_to_phoenix(
    run: str | Path,
    endpoint: str | PhoenixClient,
    *,
    dag: str | Path | None = None,
    project: str | None = None,
) -> ExportResult:
    """Write a finished run's verdicts onto its trace's spans in Phoenix.

    `run` is a run directory (or its report file); `dag` overrides where its DAG is read from;
    `project` (default: the project the DAG was read from, if any) gets the annotation configs
    assigned.
    Raises `ExportInputError` (no report, or a DAG without span ids), `PhoenixAuthError`,
    `PhoenixUnreachable` or `PhoenixError` (e.g. the spans are not on that server).
    """
    loaded = load_run(run, dag)
    marks = marks_for_run(loaded.report, loaded.dag)
    target = project or dag_project(loaded.dag.meta)
    if isinstance(endpoint, PhoenixClient):
        ids = write_marks(endpoint, marks, project=target)
    else:
        with PhoenixClient(endpoint) as client:
            ids = write_marks(client, marks, project=target)
    return ExportResult(str(loaded.dag.meta["trace_id"]), tuple(marks), ids)


__all__ = [
    "CITATION_CONFIG",
    "CONFIGS",
    "ExportResult",
    "annotation_body",
    "dag_project",
    "export_to_phoenix",
    "write_marks",
]
