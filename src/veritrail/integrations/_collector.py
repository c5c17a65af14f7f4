"""The span bookkeeping both framework handlers share (thread-safe, in memory).

Besides the spans, the collector remembers which spans raised and which have not ended, so
that a run that failed (or is still going) is never handed out as if it had finished: the DAG
the trace rules build from it ends at whatever generation came last, an intermediate output
that nothing marks as such. `result()`, `dag()` and `save()` raise `FailedRunError` for such a
run unless `allow_failed=True`, which returns that partial DAG flagged (`meta["failed_run"]`
and a note in `TraceImport.unmatched`). Errors name the handler's arguments (`trace_id=`), not
the command line's (`--trace-id`), and never a file: the spans were recorded, not read.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapters.trace.build import MatchSettings, SpanNote, TraceImport, build_dag
from ..adapters.trace.model import Kind, TraceError, TraceSpan, unique
from ..dag import Dag, save_dag
from ..errors import InputProblem
from ..redaction import redact

NOT_FINISHED = "had not finished when the DAG was built"
"""The `failed_run` error of a run whose top-level span never ended."""


class FailedRunError(TraceError):
    """The recorded run raised (or has not finished): its DAG would end at an intermediate
    output, not at the run's answer. The message names the run (its `trace_id`), its top-level
    span and the error; pass ``allow_failed=True`` to get the partial DAG, flagged."""

    def __init__(self, message: str, *, trace_id: str, span_name: str, error: str) -> None:
        super().__init__(message)
        self.trace_id = trace_id
        """The failed run's trace id (what ``trace_id=`` takes)."""
        self.span_name = span_name
        """The name of its top-level span (the chain, query or workflow that failed)."""
        self.error = error
        """The error it raised (``Type: message``, redacted), or `NOT_FINISHED`."""


class DagSaveError(InputProblem, OSError):
    """`save(path)` could not write the DAG: `path` is a directory, its folder is missing, or
    the file cannot be written (also an `OSError`, which the plain write raised before)."""


def _what(error: str) -> str:
    return "has not finished" if error == NOT_FINISHED else f"raised {error}"


def error_text(error: BaseException) -> str:
    """``Type: message`` of an exception a framework reported, secrets removed (a provider's
    error may quote a URL with its key); the exception itself is not kept (its traceback would
    keep the run's frames alive)."""
    msg = str(error).strip()
    return redact(f"{type(error).__name__}: {msg}" if msg else type(error).__name__)


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

    def __init__(
        self,
        *,
        settings: MatchSettings | None = None,
        source: str = "live",
        how_to_record: str = "",
    ) -> None:
        self.settings = settings
        self.source = source
        self.how_to_record = how_to_record
        """How the handler is given to a run (said when nothing was recorded)."""
        self._open: dict[str, _Open] = {}
        self._done: list[TraceSpan] = []
        self._errors: dict[str, str] = {}
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
        error: BaseException | None = None,
    ) -> None:
        """A span finished, or raised `error` (then it has no output); unknown ids are ignored
        (a handler attached mid-run)."""
        with self._lock:
            op = self._open.pop(span_id, None)
            if op is None:
                return
            if error is not None:
                self._errors[span_id] = error_text(error)
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
            self._errors.clear()

    def _select(self, spans: list[TraceSpan], trace_id: str | None) -> str:
        """The trace to build: `trace_id`, or the only run with an LLM generation. The rule of
        `adapters.trace.build.select_trace`, with messages in the handler's terms."""
        by_trace: dict[str, list[TraceSpan]] = {}
        for s in spans:
            by_trace.setdefault(s.trace_id, []).append(s)
        if trace_id is not None:
            tid = trace_id if trace_id in by_trace else trace_id.lower().removeprefix("0x")
            if tid not in by_trace:
                known = ", ".join(sorted(by_trace)[:10]) or "none"
                raise TraceError(
                    f"no recorded run has trace_id {trace_id!r} (recorded runs: {known})"
                )
            return tid
        if not spans:
            raise TraceError(f"the handler has recorded nothing: {self.how_to_record}")
        with_llm = sorted(t for t, ss in by_trace.items() if any(s.kind is Kind.LLM for s in ss))
        if not with_llm:
            # A run that failed before its first generation: say so, it is the real reason.
            failed = [(t, f) for t, ss in by_trace.items() if (f := self._failure(t, ss))]
            why = "".join(f"; the run {t} ({f[1]}) {_what(f[3])}" for t, f in failed[:3])
            raise TraceError(
                f"the handler recorded {len(spans)} span{'' if len(spans) == 1 else 's'} "
                "and no LLM generation: "
                f"nothing to build a DAG from{why}"
            )
        if len(with_llm) > 1:
            raise TraceError(
                f"the handler recorded {len(with_llm)} runs with generations "
                f"({', '.join(with_llm[:10])}): pass trace_id= one of them, "
                "or call reset() between runs"
            )
        return with_llm[0]

    def _failure(self, tid: str, spans: list[TraceSpan]) -> tuple[str, str, str, str] | None:
        """(span id, name, kind, error) of the run `tid`'s top-level span when it raised or has
        not ended; None when the run finished. Spans inside it that raised do not count: the
        run went on without them (a fallback, an agent retrying a tool)."""
        with self._lock:
            still_open = [o for o in self._open.values() if o.trace_id == tid]
            errors = dict(self._errors)
        ids = {s.id for s in spans} | {o.id for o in still_open}
        for o in still_open:
            if o.parent_id is None or o.parent_id not in ids:
                return o.id, o.name, str(o.kind), NOT_FINISHED
        for s in spans:
            if s.id in errors and (s.parent_id is None or s.parent_id not in ids):
                return s.id, s.name, str(s.kind), errors[s.id]
        return None

    def _open_as_ended(self, tid: str, seq: int) -> list[TraceSpan]:
        """The open spans of run `tid` as spans that end now, without output (not recorded:
        the run may still end them)."""
        with self._lock:
            return [
                TraceSpan(
                    id=o.id,
                    parent_id=o.parent_id,
                    trace_id=o.trace_id,
                    name=o.name,
                    kind=o.kind,
                    start=o.start,
                    end=next(self._clock),
                    seq=seq + i,
                    inputs=o.inputs,
                    outputs=(),
                    documents=(),
                )
                for i, o in enumerate(o for o in self._open.values() if o.trace_id == tid)
            ]

    def result(self, *, trace_id: str | None = None, allow_failed: bool = False) -> TraceImport:
        """The DAG and its explanation (`veritrail.adapters.trace.TraceImport`).

        With several recorded runs, pass the `trace_id` (the top-level run's id) of one. A run
        that raised or has not finished raises `FailedRunError`; with `allow_failed=True` its
        partial DAG is returned, flagged in ``dag.meta["failed_run"]`` and in `unmatched`.
        Spans inside the run that raised are listed in `unmatched` either way.
        """
        spans = self.spans()
        tid = self._select(spans, trace_id)
        mine = [s for s in spans if s.trace_id == tid]
        failed = self._failure(tid, mine)
        if failed is not None and not allow_failed:
            span_id, name, _kind, error = failed
            raise FailedRunError(
                f"the recorded run {tid} ({name}) {_what(error)}: its DAG would end at an "
                "intermediate output, not at the run's answer. Build it from a run that "
                "finished, or pass allow_failed=True to get the partial DAG, flagged in "
                'meta["failed_run"]',
                trace_id=tid,
                span_name=name,
                error=error,
            )
        if failed is not None and failed[3] == NOT_FINISHED:
            # The spans still open are part of the partial run (the unfinished query's input
            # is one of its roots): built as if they had ended now, with no output.
            spans += self._open_as_ended(tid, len(spans))
        imp = build_dag(
            spans, trace_id=tid, settings=self.settings, meta={"trace_format": self.source}
        )
        with self._lock:
            errors = dict(self._errors)
        notes = [
            SpanNote(s.id, s.name, str(s.kind), f"raised {errors[s.id]}: closed without output")
            for s in mine
            if s.id in errors and (failed is None or s.id != failed[0])
        ]
        if failed is not None:
            span_id, name, kind, error = failed
            imp.dag.meta["failed_run"] = {
                "trace_id": tid,
                "span_id": span_id,
                "name": name,
                "error": error,
                "terminal": imp.dag.terminal,
            }
            notes.insert(
                0,
                SpanNote(
                    span_id,
                    name,
                    kind,
                    f"the run {_what(error)}: partial DAG, its terminal {imp.dag.terminal} is an "
                    "intermediate output",
                ),
            )
        if not notes:
            return imp
        return dataclasses.replace(imp, unmatched=(*notes, *imp.unmatched))

    def dag(self, *, trace_id: str | None = None, allow_failed: bool = False) -> Dag:
        """The recorded run's generation DAG (raises `TraceError` with the reason if none,
        `FailedRunError` if the run raised, unless `allow_failed`)."""
        return self.result(trace_id=trace_id, allow_failed=allow_failed).dag

    def save(
        self, path: str | Path, *, trace_id: str | None = None, allow_failed: bool = False
    ) -> Dag:
        """Write the DAG (JSON, or JSON Lines for ``.jsonl``) and return it; `path` is the file
        to write (`DagSaveError` for a directory or a file that cannot be written)."""
        p = Path(path)
        if p.is_dir():
            # Not guessed as "<dir>/dag.json": the name decides JSON or JSON Lines, and a file
            # written where the caller did not say could overwrite one they meant to keep.
            raise DagSaveError(
                f"cannot save the DAG to {p}: it is a directory; give the file to write, "
                f"e.g. {p / 'dag.json'}"
            )
        dag = self.dag(trace_id=trace_id, allow_failed=allow_failed)
        try:
            save_dag(dag, p)
        except OSError as exc:
            raise DagSaveError(f"cannot save the DAG to {p}: {exc.strerror or exc}") from None
        return dag


class RecordedRuns:
    """What both live handlers answer about the runs they recorded, over their `SpanCollector`
    (`self._c`): one set of methods for LangChain's and LlamaIndex's handler alike."""

    _c: SpanCollector

    def spans(self) -> list[TraceSpan]:
        """The spans recorded so far."""
        return self._c.spans()

    def result(self, *, trace_id: str | None = None, allow_failed: bool = False) -> TraceImport:
        """The DAG with the importer's explanation (links, unmatched spans, ambiguities).

        Raises `veritrail.adapters.trace.TraceError` when nothing gives a DAG, and its subclass
        `FailedRunError` when the run raised or has not finished, unless `allow_failed` (then
        the partial DAG, flagged in ``dag.meta["failed_run"]`` and first in `unmatched`).
        """
        return self._c.result(trace_id=trace_id, allow_failed=allow_failed)

    def dag(self, *, trace_id: str | None = None, allow_failed: bool = False) -> Dag:
        """The recorded run's DAG (errors and `allow_failed` as in `result`)."""
        return self._c.dag(trace_id=trace_id, allow_failed=allow_failed)

    def save(
        self, path: str | Path, *, trace_id: str | None = None, allow_failed: bool = False
    ) -> Dag:
        """Write the recorded run's DAG to the file `path` and return it (errors and
        `allow_failed` as in `result`; `DagSaveError` when `path` is a directory or cannot be
        written)."""
        return self._c.save(path, trace_id=trace_id, allow_failed=allow_failed)
