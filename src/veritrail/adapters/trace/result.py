"""What a trace import returns: the DAG and the explanation `--explain` shows (each link and how
it was found, the links it could not decide, the spans that gave no node)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...dag import Dag


@dataclass(frozen=True, slots=True)
class Link:
    """One edge and how it was found."""

    source: str
    target: str
    how: str
    """``exact``, ``normalized`` (whitespace), ``fuzzy``, or ``result`` (a tool call's node
    whose result the input holds: `matching.Node.results`)."""
    score: float
    """100 for containment; the best sentence score for fuzzy links."""
    sentences: str = ""
    """For fuzzy links: ``matched/eligible`` sentences of the source."""


@dataclass(frozen=True, slots=True)
class Ambiguity:
    """A link the importer could not decide for sure."""

    target: str
    sources: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class SpanNote:
    """What became of a span that did not simply give a node."""

    span_id: str
    name: str
    kind: str
    note: str


@dataclass(frozen=True, slots=True)
class TraceImport:
    """The result of an import: the DAG and what `--explain` shows."""

    dag: Dag
    trace_id: str
    links: tuple[Link, ...]
    ambiguous: tuple[Ambiguity, ...]
    unmatched: tuple[SpanNote, ...]
    no_text: Mapping[str, int]
    """Spans that generate no text, counted by kind (they never become nodes)."""
    unused_roots: tuple[str, ...]
    """Root candidates that no kept generation used (dropped from the DAG), as text previews."""


__all__ = ["Ambiguity", "Link", "SpanNote", "TraceImport"]
