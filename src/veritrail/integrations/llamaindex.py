"""`DagEventHandler`: record the generation DAG of a LlamaIndex run as it happens.

    from llama_index.core.instrumentation import get_dispatcher
    from veritrail.integrations.llamaindex import DagEventHandler

    handler = DagEventHandler()
    get_dispatcher().add_event_handler(handler)   # the root dispatcher sees every event
    response = query_engine.query("What ...?")
    handler.save("dag.json")

Events used (LlamaIndex's instrumentation module): ``QueryStartEvent`` / ``QueryEndEvent`` (the
outermost query is the trace: its query string is an input, its response the final output; a
nested query is a chain), ``RetrievalEndEvent`` (retrieved nodes are documents),
``LLMCompletionStartEvent`` / ``LLMCompletionEndEvent`` and ``LLMChatStartEvent`` /
``LLMChatEndEvent`` (one generation each, paired by their ``span_id``). The DAG is built with the
rules of ``veritrail from-trace`` (docs/adapters.md, "Traces"). Needs
``pip install 'veritrail[llamaindex]'`` (llama-index-core).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events.llm import (
        LLMChatEndEvent,
        LLMChatStartEvent,
        LLMCompletionEndEvent,
        LLMCompletionStartEvent,
    )
    from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
    from llama_index.core.instrumentation.events.retrieval import (
        RetrievalEndEvent,
        RetrievalStartEvent,
    )
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "veritrail.integrations.llamaindex needs llama-index-core: "
        "pip install 'veritrail[llamaindex]'"
    ) from exc

from ..adapters.trace.build import MatchSettings, TraceImport
from ..adapters.trace.model import Kind, TraceSpan
from ..dag import Dag
from ._collector import SpanCollector


def _query_text(q: Any) -> str:
    if isinstance(q, str):
        return q
    return str(getattr(q, "query_str", "") or "")


def _message_text(m: Any) -> str:
    # Every message counts, system ones too (a RAG prompt's context often sits there).
    content = getattr(m, "content", None)
    return content if isinstance(content, str) else ""


def _response_text(r: Any) -> str:
    if r is None:
        return ""
    for attr in ("response", "text"):
        v = getattr(r, attr, None)
        if isinstance(v, str):
            return v
    msg = getattr(r, "message", None)
    if msg is not None:
        return _message_text(msg)
    return r if isinstance(r, str) else ""


class DagEventHandler(BaseEventHandler):
    """A LlamaIndex event handler that records the run's generation DAG.

    Add it to the root dispatcher (``get_dispatcher().add_event_handler(handler)``), run the
    query, then `dag()`, `save(path)` or `result()`. Each outermost query is its own trace; with
    several, pass the `trace_id` (the query's span id) or call `reset()` between queries.
    """

    _c: SpanCollector = PrivateAttr()
    _stack: list[str] = PrivateAttr(default_factory=list)

    def __init__(self, *, settings: MatchSettings | None = None, **data: Any) -> None:
        super().__init__(**data)
        self._c = SpanCollector(settings=settings, source="llamaindex")
        self._stack = []

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name for this handler."""
        return "VeritrailDagEventHandler"

    def _parent(self) -> str | None:
        return self._stack[-1] if self._stack else None

    def handle(self, event: Any, **kwargs: Any) -> None:
        """Record one instrumentation event (others are ignored)."""
        sid = str(event.span_id or event.id_)
        if isinstance(event, QueryStartEvent):
            self._c.start(sid, self._parent(), "query", Kind.CHAIN, [_query_text(event.query)])
            self._stack.append(sid)
        elif isinstance(event, QueryEndEvent):
            self._c.end(sid, [_response_text(event.response)])
            if sid in self._stack:
                self._stack.remove(sid)
        elif isinstance(event, RetrievalStartEvent):
            self._c.start(
                sid,
                self._parent(),
                "retrieve",
                Kind.RETRIEVER,
                [_query_text(event.str_or_query_bundle)],
            )
        elif isinstance(event, RetrievalEndEvent):
            self._c.end(sid, documents=[n.node.get_content() for n in event.nodes])
        elif isinstance(event, LLMCompletionStartEvent):
            self._c.start(sid, self._parent(), _model_name(event), Kind.LLM, [event.prompt])
        elif isinstance(event, LLMCompletionEndEvent):
            self._c.end(sid, [_response_text(event.response)])
        elif isinstance(event, LLMChatStartEvent):
            self._c.start(
                sid,
                self._parent(),
                _model_name(event),
                Kind.LLM,
                [_message_text(m) for m in event.messages],
            )
        elif isinstance(event, LLMChatEndEvent):
            self._c.end(sid, [_response_text(event.response)])

    def spans(self) -> list[TraceSpan]:
        """The spans recorded so far."""
        return self._c.spans()

    def reset(self) -> None:
        """Forget every recorded query."""
        self._c.reset()
        self._stack.clear()

    def result(self, *, trace_id: str | None = None) -> TraceImport:
        """The DAG with the importer's explanation (links, unmatched spans, ambiguities)."""
        return self._c.result(trace_id=trace_id)

    def dag(self, *, trace_id: str | None = None) -> Dag:
        """The recorded query's DAG (raises `veritrail.adapters.trace.TraceError` if none)."""
        return self._c.dag(trace_id=trace_id)

    def save(self, path: str | Path, *, trace_id: str | None = None) -> Dag:
        """Write the recorded query's DAG and return it."""
        return self._c.save(path, trace_id=trace_id)


def _model_name(event: Any) -> str:
    md = getattr(event, "model_dict", None)
    if isinstance(md, dict) and md.get("class_name"):
        return str(md["class_name"])
    return "llm"


__all__ = ["DagEventHandler"]
