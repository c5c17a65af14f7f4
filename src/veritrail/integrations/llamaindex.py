"""`DagEventHandler`: record the generation DAG of a LlamaIndex run as it happens.

    from veritrail.integrations.llamaindex import DagEventHandler

    handler = DagEventHandler().attach()   # root dispatcher: its events and its spans
    response = query_engine.query("What ...?")          # or: await agent.run("...")
    handler.save("dag.json")
    handler.detach()

What is recorded, from LlamaIndex's instrumentation module:

* events: ``QueryStartEvent`` / ``QueryEndEvent`` (a query: its query string is an input, its
  response the output; the outermost query is the trace), ``RetrievalEndEvent`` (retrieved
  nodes are documents), ``LLMCompletionStartEvent`` / ``LLMCompletionEndEvent`` and
  ``LLMChatStartEvent`` / ``LLMChatEndEvent`` (one generation each, paired by their span id);
* spans (through `span_handler`, which `attach` adds): every tool call (``BaseTool.call`` /
  ``acall``: a tool span whose output, ``ToolOutput.content``, is a root, as in the trace
  importer), every workflow run (``<Workflow>.run``: agents — ``FunctionAgent``,
  ``ReActAgent``, ``AgentWorkflow`` — are agent spans, other workflows chains; the start
  event's texts are inputs, the result the output), and the parent of every span, so events
  and spans nest as they ran, concurrent ones included.

Added with ``get_dispatcher().add_event_handler(handler)`` alone (as before), queries,
retrievals and LLM calls are recorded, not tools or workflow runs. The DAG is built with the
rules of ``veritrail from-trace`` (docs/adapters.md, "Traces"). Needs
``pip install 'veritrail[llamaindex]'`` (llama-index-core).

A run that raised (its outermost query or workflow run was dropped with an error) or has not
finished has no answer, and the DAG built from it would end at whatever generation came last:
`result()`, `dag()` and `save()` raise `FailedRunError` (a `TraceError`) naming the run and its
error. Pass ``allow_failed=True`` to get that partial DAG anyway: ``dag.meta["failed_run"]``
records the run, its error and the terminal it ended at, and `result().unmatched` says so first.
Added as an event handler alone, the handler sees no errors: a query that raised shows as one
that has not finished, and a later query would nest inside it, so call `reset()` after a run
that raised. `save(path)` writes the file `path` (``.jsonl``: JSON Lines); a
directory, or a file that cannot be written, raises `DagSaveError` (an `OSError`).
"""

from __future__ import annotations

from typing import Any

try:
    from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
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
    from llama_index.core.instrumentation.span import SimpleSpan
    from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
    from llama_index.core.tools.types import BaseTool
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "veritrail.integrations.llamaindex needs llama-index-core: "
        "pip install 'veritrail[llamaindex]'"
    ) from exc

from ..adapters.trace.build import MatchSettings
from ..adapters.trace.model import Kind, text_leaves
from ._collector import DagSaveError, FailedRunError, RecordedRuns, SpanCollector


def _query_text(q: Any) -> str:
    if isinstance(q, str):
        return q
    return str(getattr(q, "query_str", "") or "")


def _message_text(m: Any) -> str:
    # Every message counts, system ones too (a RAG prompt's context often sits there).
    content = getattr(m, "content", None)
    return content if isinstance(content, str) else ""


def _value_texts(v: Any, depth: int = 0) -> list[str]:
    """Texts in a workflow's start or stop value: strings, chat messages (not system ones),
    responses, events and lists or dicts of them; other objects (memory, contexts) give none."""
    if depth > 4 or v is None:
        return []
    if isinstance(v, str):
        return [v]
    if isinstance(v, list | tuple):
        return [t for x in v for t in _value_texts(x, depth + 1)]
    if isinstance(v, dict):
        return list(text_leaves(v))
    role = getattr(v, "role", None)
    if role is not None and hasattr(v, "content"):  # a ChatMessage
        if str(getattr(role, "value", role)).lower() in ("system", "developer"):
            return []
        return [v.content] if isinstance(v.content, str) else []
    for attr in ("response", "result"):
        # AgentOutput.response, StopEvent.result, Response.response
        if hasattr(v, attr):
            return _value_texts(getattr(v, attr), depth + 1)
    fields = getattr(type(v), "model_fields", None)
    if isinstance(fields, dict) and any(c.__name__ == "Event" for c in type(v).__mro__):
        # A workflow event: its fields and its free-form data. Other objects (memory, contexts,
        # models) hold configuration and ids, not texts entering the run.
        out = [t for name in fields for t in _value_texts(getattr(v, name, None), depth + 1)]
        data = getattr(v, "_data", None)
        if isinstance(data, dict):
            out += [t for x in data.values() for t in _value_texts(x, depth + 1)]
        return out
    return []


def _tool_output_text(result: Any) -> list[str]:
    content = getattr(result, "content", None)
    if isinstance(content, str):
        return [content]
    return _value_texts(getattr(result, "raw_output", result))


def _is_workflow_run(span_id: str, instance: Any) -> bool:
    # Workflow runs are spans named "<WorkflowClass>.run-<uuid>"; its steps are other spans.
    if instance is None or not hasattr(instance, "run"):
        return False
    return span_id.partition("-")[0].rsplit(".", 1)[-1] == "run" and _is_workflow(instance)


def _is_workflow(instance: Any) -> bool:
    return any(c.__name__ == "Workflow" for c in type(instance).__mro__)


def _is_agent(instance: Any) -> bool:
    names = {c.__name__ for c in type(instance).__mro__}
    return bool(names & {"BaseWorkflowAgent", "AgentWorkflow", "BaseAgent", "BaseAgentRunner"})


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


class _SpanHandler(BaseSpanHandler[SimpleSpan]):
    """Forwards span enters and exits to its `DagEventHandler` (see `DagEventHandler.span_handler`)."""

    _owner: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name for this handler."""
        return "VeritrailDagSpanHandler"

    def new_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        """Note the span's parent; open a tool or workflow span."""
        self._owner._span_enter(id_, bound_args, instance, parent_span_id)
        return SimpleSpan(id_=id_, parent_id=parent_span_id)

    def prepare_to_exit_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        """Close a tool or workflow span with its result."""
        self._owner._span_exit(id_, result)
        with self.lock:
            return self.open_spans.get(id_)

    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        """A span that raised: closed without output, the error kept."""
        self._owner._span_exit(id_, None, err)
        with self.lock:
            return self.open_spans.get(id_)


class DagEventHandler(RecordedRuns, BaseEventHandler):
    """A LlamaIndex event handler that records the run's generation DAG.

    `attach()` adds it and its `span_handler` to the root dispatcher (so tools and agents are
    recorded too); run the query or agent, then `dag()`, `save(path)` or `result()`, and
    `detach()`. Each outermost query or workflow run is its own trace; with several, pass the
    `trace_id` (its span id) or call `reset()` between runs. Thread- and task-safe: parents come
    from LlamaIndex's own span tree once the span handler is attached.
    """

    _c: SpanCollector = PrivateAttr()
    _stack: list[str] = PrivateAttr(default_factory=list)
    _parents: dict[str, str | None] = PrivateAttr(default_factory=dict)
    _recorded: set[str] = PrivateAttr(default_factory=set)
    _span_handler: _SpanHandler = PrivateAttr()

    def __init__(self, *, settings: MatchSettings | None = None, **data: Any) -> None:
        super().__init__(**data)
        self._c = SpanCollector(
            settings=settings,
            source="llamaindex",
            how_to_record="call handler.attach() before the run",
        )
        self._stack = []
        self._parents = {}
        self._recorded = set()
        self._span_handler = _SpanHandler(
            open_spans={}, completed_spans=[], dropped_spans=[], current_span_ids={}
        )
        self._span_handler._owner = self

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name for this handler."""
        return "VeritrailDagEventHandler"

    @property
    def span_handler(self) -> BaseSpanHandler[SimpleSpan]:
        """The span handler that records tools, workflow runs and span parents (`attach` adds
        it; add it yourself with ``dispatcher.add_span_handler(handler.span_handler)``)."""
        return self._span_handler

    def attach(self, dispatcher: Any | None = None) -> DagEventHandler:
        """Add this handler and its span handler to `dispatcher` (default: the root one)."""
        d = dispatcher if dispatcher is not None else get_dispatcher()
        d.add_event_handler(self)
        d.add_span_handler(self._span_handler)
        return self

    def detach(self, dispatcher: Any | None = None) -> None:
        """Remove this handler and its span handler from `dispatcher` (default: the root one)."""
        d = dispatcher if dispatcher is not None else get_dispatcher()
        d.event_handlers = [h for h in d.event_handlers if h is not self]
        d.span_handlers = [h for h in d.span_handlers if h is not self._span_handler]

    def _parent(self, sid: str | None = None) -> str | None:
        """The nearest recorded ancestor of span `sid` (LlamaIndex's span tree when the span
        handler saw it; else the innermost open query)."""
        if sid is not None and sid in self._parents:
            p = self._parents[sid]
            seen = 0
            while p is not None and seen < 10_000:
                if p in self._recorded:
                    return p
                p = self._parents.get(p)
                seen += 1
            return None
        return self._stack[-1] if self._stack else None

    def _start(self, sid: str, name: str, kind: Kind, inputs: list[str]) -> None:
        self._c.start(sid, self._parent(sid), name, kind, inputs)
        self._recorded.add(sid)

    def _span_enter(self, sid: str, bound_args: Any, instance: Any, parent: str | None) -> None:
        self._parents[sid] = parent
        args = dict(getattr(bound_args, "arguments", {}) or {})
        if isinstance(instance, BaseTool):
            name = str(getattr(instance.metadata, "name", None) or "tool")
            self._start(sid, name, Kind.TOOL, _value_texts(args.get("kwargs", args)))
        elif _is_workflow_run(sid, instance):
            start = args.get("start_event")
            inputs = _value_texts(start if start is not None else args.get("kwargs", {}))
            kind = Kind.AGENT if _is_agent(instance) else Kind.CHAIN
            self._start(sid, type(instance).__name__, kind, inputs)

    def _span_exit(self, sid: str, result: Any, error: BaseException | None = None) -> None:
        if sid not in self._recorded or not self._c.is_open(sid):
            return
        kind = self._c.kind_of(sid)
        if error is not None:
            # Any recorded span that raised (a query, a tool, a workflow run): no output, and
            # the error kept, so a run that failed is never taken for one that finished.
            self._c.end(sid, error=error)
            if sid in self._stack:
                self._stack.remove(sid)
        elif kind is Kind.TOOL:
            self._c.end(sid, _tool_output_text(result) if result is not None else [])
        elif kind in (Kind.AGENT, Kind.CHAIN):
            self._c.end(sid, _value_texts(result) if result is not None else [])

    def handle(self, event: Any, **kwargs: Any) -> None:
        """Record one instrumentation event (others are ignored)."""
        sid = str(event.span_id or event.id_)
        if isinstance(event, QueryStartEvent):
            self._start(sid, "query", Kind.CHAIN, [_query_text(event.query)])
            self._stack.append(sid)
        elif isinstance(event, QueryEndEvent):
            self._c.end(sid, [_response_text(event.response)])
            if sid in self._stack:
                self._stack.remove(sid)
        elif isinstance(event, RetrievalStartEvent):
            self._start(sid, "retrieve", Kind.RETRIEVER, [_query_text(event.str_or_query_bundle)])
        elif isinstance(event, RetrievalEndEvent):
            self._c.end(sid, documents=[n.node.get_content() for n in event.nodes])
        elif isinstance(event, LLMCompletionStartEvent):
            self._start(sid, _model_name(event), Kind.LLM, [event.prompt])
        elif isinstance(event, LLMCompletionEndEvent):
            self._c.end(sid, [_response_text(event.response)])
        elif isinstance(event, LLMChatStartEvent):
            self._start(
                sid, _model_name(event), Kind.LLM, [_message_text(m) for m in event.messages]
            )
        elif isinstance(event, LLMChatEndEvent):
            self._c.end(sid, [_response_text(event.response)])

    def reset(self) -> None:
        """Forget every recorded run."""
        self._c.reset()
        self._stack.clear()
        self._parents.clear()
        self._recorded.clear()


def _model_name(event: Any) -> str:
    md = getattr(event, "model_dict", None)
    if isinstance(md, dict) and md.get("class_name"):
        return str(md["class_name"])
    return "llm"


__all__ = ["DagEventHandler", "DagSaveError", "FailedRunError"]
