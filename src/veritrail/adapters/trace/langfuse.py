"""Langfuse trace exports.

Read forms: a trace as the public API returns it (``GET /api/public/traces/{id}``: an object
with ``id``, ``input``, ``output`` and an ``observations`` list), a list of such traces, an
observations page (``{"data": [observation, ...]}``), or a bare list of observations. An
observation has ``id``, ``traceId``, ``type``, ``name``, ``startTime``, ``endTime``,
``parentObservationId``, ``input`` and ``output`` (any JSON).

Types map onto the importer's kinds: ``GENERATION`` → LLM; ``SPAN``, ``CHAIN`` → chain;
``AGENT`` → agent; ``RETRIEVER`` → retriever (its ``output`` holds the documents); ``TOOL`` →
tool; ``EMBEDDING``, ``EVENT``, ``EVALUATOR``, ``GUARDRAIL`` and unknown types → other. The
trace object's own ``input``/``output`` become a chain span that encloses every observation, so
the trace input gives roots and the trace output names the terminal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from .calls import call_statement
from .model import Kind, TraceError, TraceSpan, text_leaves, unique

_KINDS = {
    "GENERATION": Kind.LLM,
    "SPAN": Kind.CHAIN,
    "CHAIN": Kind.CHAIN,
    "AGENT": Kind.AGENT,
    "RETRIEVER": Kind.RETRIEVER,
    "TOOL": Kind.TOOL,
    "EMBEDDING": Kind.EMBEDDING,
}


def is_observation(doc: Any) -> bool:
    """True for one Langfuse observation object."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("type"), str)
        and "id" in doc
        and ("parentObservationId" in doc or "traceId" in doc or "startTime" in doc)
    )


def is_langfuse(doc: Any) -> bool:
    """True for a Langfuse trace, observations page, or observation."""
    if not isinstance(doc, dict):
        return False
    if isinstance(doc.get("observations"), list):
        return True
    data = doc.get("data")
    if isinstance(data, list) and data and all(is_observation(o) for o in data):
        return True
    return is_observation(doc)


def _ns(value: Any) -> int:
    if value is None or value == "":
        return 0
    s = str(value)
    try:
        # A time without a zone is local time: timestamp() may refuse it (year 1).
        micros = int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1_000_000)
    except (ValueError, OverflowError, OSError):
        raise TraceError(f"bad Langfuse time {s!r:.60}") from None
    return micros * 1000


def _llm_inputs(value: Any) -> list[str]:
    # A generation's input: chat messages (system included: RAG context often sits there) or a
    # prompt string.
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, list):
        for m in value:
            if isinstance(m, dict) and "content" in m:
                out += list(text_leaves(m["content"], parse_json=False))
            else:
                out += list(text_leaves(m, parse_json=False))
        return out
    return list(text_leaves(value))


def _user_turns(value: Any) -> list[str]:
    """The user messages of a generation's chat input, in order (`TraceSpan.turns`)."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list):
        return []
    return [
        "\n\n".join(text_leaves(m["content"], parse_json=False))
        for m in value
        if isinstance(m, dict)
        and str(m.get("role", "")).lower() in ("user", "human")
        and "content" in m
    ]


def _spans_of_trace(trace: dict[str, Any], seq0: int) -> list[TraceSpan]:
    obs = trace.get("observations") or []
    out: list[TraceSpan] = []
    trace_id = str(trace.get("id") or "")
    for o in obs:
        if not is_observation(o):
            raise TraceError("a Langfuse observation needs id and type")
        kind = _KINDS.get(str(o["type"]).upper(), Kind.OTHER)
        start = _ns(o.get("startTime"))
        end = _ns(o.get("endTime")) or start
        inputs: list[str] = []
        outputs: list[str] = []
        documents: list[str] = []
        turns: list[str] = []
        call = ""
        name = str(o.get("name") or o["type"])
        if kind is Kind.LLM:
            inputs = _llm_inputs(o.get("input"))
            turns = _user_turns(o.get("input"))
            outputs = list(text_leaves(o.get("output")))
        elif kind is Kind.RETRIEVER:
            documents = list(text_leaves(o.get("output")))
            inputs = list(text_leaves(o.get("input")))
        elif kind in (Kind.CHAIN, Kind.AGENT, Kind.TOOL):
            inputs = list(text_leaves(o.get("input")))
            outputs = list(text_leaves(o.get("output")))
            if kind is Kind.TOOL and o.get("input") is not None:
                call = call_statement(name, o["input"])  # what the agent did
        out.append(
            TraceSpan(
                id=str(o["id"]),
                parent_id=str(o["parentObservationId"]) if o.get("parentObservationId") else None,
                trace_id=str(o.get("traceId") or trace_id),
                name=name,
                kind=kind,
                start=start,
                end=end,
                seq=seq0 + len(out),
                inputs=unique(inputs),
                outputs=unique(outputs),
                documents=unique(documents),
                turns=unique(turns),
                call=call,
            )
        )
    if "input" in trace or "output" in trace:
        # The trace itself: an enclosing chain span whose input/output are the trace's.
        starts = [s.start for s in out] or [_ns(trace.get("timestamp"))]
        ends = [s.end for s in out] or starts
        root_id = f"trace:{trace_id}"
        out = [
            dataclasses.replace(
                s, parent_id=s.parent_id or root_id, trace_id=s.trace_id or trace_id
            )
            for s in out
        ]
        out.append(
            TraceSpan(
                id=root_id,
                parent_id=None,
                trace_id=trace_id or (out[0].trace_id if out else ""),
                name=str(trace.get("name") or "trace"),
                kind=Kind.CHAIN,
                start=min(starts),
                end=max(ends),
                seq=seq0 + len(out),
                inputs=unique(text_leaves(trace.get("input"))),
                outputs=unique(text_leaves(trace.get("output"))),
            )
        )
    return out


def read_langfuse(docs: Iterable[Any]) -> list[TraceSpan]:
    """Spans of Langfuse traces / observation lists (see the module docstring)."""
    out: list[TraceSpan] = []
    loose: list[dict[str, Any]] = []
    for doc in docs:
        if isinstance(doc, dict) and isinstance(doc.get("observations"), list):
            out += _spans_of_trace(doc, len(out))
        elif isinstance(doc, dict) and isinstance(doc.get("data"), list):
            loose += doc["data"]
        elif is_observation(doc):
            loose.append(doc)
        else:
            raise TraceError("expected Langfuse traces or observations")
    if loose:
        out += _spans_of_trace({"observations": loose}, len(out))
    return out


__all__ = ["is_langfuse", "is_observation", "read_langfuse"]
