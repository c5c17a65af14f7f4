"""The span bookkeeping both framework handlers share (thread-safe, in memory)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapters.trace.build import MatchSettings, TraceImport, build_dag
from ..adapters.trace.model import Kind, TraceSpan, unique
from ..dag import Dag, save_dag


@dataclass
class _Open:
    id: str
    parent_id: str | None
    trace_id: str
    name: str
    kind: Kind
    start: int
    inputs: tuple[str, ...]
    extra: dict[str, Any] = field(default_factory=dict)


class SpanCollector:
    """Opens and closes spans as a framework reports them; builds the DAG on demand.

    Times are a shared counter, not the clock: only the order of starts and ends matters to the
    DAG builder, and a counter never ties.
    """

    def __init__(self, *, settings: MatchSettings | None = None, source: str = "live") -> None:
        self.settings = settings
        self.source = source
        self._open: dict[str, _Open] = {}
        self._done: list[TraceSpan] = []
        self._clock = itertools.count(1)
        self._lock = threading.Lock()

    def start(
        self,
        span_id: str,
        parent_id: str | None,
        name: str,
        kind: Kind,
        inputs: Iterable[str] = (),
    ) -> None:
        """A span began (its inputs are known now)."""
        with self._lock:
            parent = self._open.get(parent_id) if parent_id else None
            if parent is not None:
                trace_id = parent.trace_id
            elif parent_id is not None:
                done = next((s for s in self._done if s.id == parent_id), None)
                trace_id = done.trace_id if done else parent_id
            else:
                trace_id = span_id
            self._open[span_id] = _Open(
                span_id, parent_id, trace_id, name, kind, next(self._clock), unique(inputs)
            )

    def end(
        self,
        span_id: str,
        outputs: Iterable[str] = (),
        documents: Iterable[str] = (),
        inputs: Iterable[str] | None = None,
    ) -> None:
        """A span finished; unknown ids are ignored (a handler attached mid-run)."""
        with self._lock:
            op = self._open.pop(span_id, None)
            if op is None:
                return
            self._done.append(
                TraceSpan(
                    id=op.id,
                    parent_id=op.parent_id,
                    trace_id=op.trace_id,
                    name=op.name,
                    kind=op.kind,
                    start=op.start,
                    end=next(self._clock),
                    seq=len(self._done),
                    inputs=op.inputs if inputs is None else unique(inputs),
                    outputs=unique(outputs),
                    documents=unique(documents),
                )
            )

    def is_open(self, span_id: str) -> bool:
        """Whether `span_id` was started and has not ended."""
        with self._lock:
            return span_id in self._open

    def kind_of(self, span_id: str) -> Kind | None:
        """The kind of the open span `span_id` (None if not open)."""
        with self._lock:
            op = self._open.get(span_id)
            return op.kind if op is not None else None

    def spans(self) -> list[TraceSpan]:
        """The finished spans so far, in the order they finished."""
        with self._lock:
            return list(self._done)

    def reset(self) -> None:
        """Forget everything recorded."""
        with self._lock:
            self._open.clear()
            self._done.clear()

    def result(self, *, trace_id: str | None = None) -> TraceImport:
        """The DAG and its explanation (`veritrail.adapters.trace.TraceImport`).

        With several recorded runs, pass the `trace_id` (the top-level run's id) of one.
        """
        return build_dag(
            self.spans(),
            trace_id=trace_id,
            settings=self.settings,
            meta={"trace_format": self.source},
        )

    def dag(self, *, trace_id: str | None = None) -> Dag:
        """The recorded run's generation DAG (raises `TraceError` with the reason if none)."""
        return self.result(trace_id=trace_id).dag

    def save(self, path: str | Path, *, trace_id: str | None = None) -> Dag:
        """Write the DAG (JSON, or JSON Lines for ``.jsonl``) and return it."""
        dag = self.dag(trace_id=trace_id)
        save_dag(dag, path)
        return dag
