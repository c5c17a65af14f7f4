"""OpenTelemetry spans that follow the OpenInference semantic conventions.

Two encodings are read:

* **OTLP JSON**, as the OpenTelemetry collector's file exporter writes it (one
  ``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}`` request per line, or one document):
  attributes are ``{"key": ..., "value": {"stringValue": ...}}``, times are
  ``startTimeUnixNano`` strings, ids are hex (or base64, as protobuf's own JSON mapping writes
  them; both are only compared with each other);
* **opentelemetry-sdk span JSON**: what ``ReadableSpan.to_json()`` returns (``context.span_id``,
  ``parent_id``, ISO ``start_time``, flat ``attributes``), one object per line, a list, or
  pretty-printed objects one after another.

Attributes read (OpenInference): ``openinference.span.kind``; ``input.value`` /
``output.value`` (parsed when their ``*.mime_type`` is JSON or they look like JSON);
``llm.input_messages.N.message.content`` (and ``.message.contents.M.message_content.text``),
``llm.output_messages.N.message.content``, ``llm.prompts`` / ``llm.prompts.N.prompt.text``;
``retrieval.documents.N.document.content``; ``reranker.output_documents.N.document.content``.
A span without an OpenInference kind is read with the OpenTelemetry GenAI conventions
(``gen_ai.*``, OpenLLMetry's ``traceloop.*``: `veritrail.adapters.trace.genai`) when its
attributes state a kind; otherwise it is kept as kind OTHER (it never becomes a node).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from .calls import call_statement
from .genai import genai_call, genai_kind, genai_texts, genai_turns
from .model import Kind, TraceError, TraceSpan, parse_embedded, text_leaves, unique

_INDEXED = re.compile(r"^(?P<prefix>[a-z_.]+?)\.(?P<i>\d+)\.(?P<rest>.+)$")
_NOT_JSON = object()


def _indexed(attrs: Mapping[str, Any], prefix: str, field: str) -> list[str]:
    """Values of ``prefix.N.field`` in index order (flattened OpenInference lists)."""
    found: list[tuple[int, int, str]] = []
    for k, v in attrs.items():
        if not k.startswith(prefix + "."):
            continue
        m = _INDEXED.match(k)
        if m is None or m.group("prefix") != prefix or not isinstance(v, str):
            continue
        rest = m.group("rest")
        if rest == field:
            found.append((int(m.group("i")), -1, v))
        elif field == "message.content" and rest.startswith("message.contents."):
            # Multimodal content: message.contents.M.message_content.text
            sub = re.match(r"message\.contents\.(\d+)\.message_content\.text$", rest)
            if sub:
                found.append((int(m.group("i")), int(sub.group(1)), v))
    found.sort(key=lambda x: (x[0], x[1]))
    return [v for *_, v in found]


def _generation_texts(value: Any) -> list[str]:
    """The generated texts in an LLM span's ``output.value`` when no output messages are given."""
    if isinstance(value, str):
        s = value.strip()
        if s[:1] == "{":
            doc = parse_embedded(s, None)
            if isinstance(doc, dict):
                if isinstance(doc.get("messages"), list) and not (
                    "generations" in doc or "choices" in doc
                ):
                    # A chat prompt made ready, not a generation: LlamaIndex's
                    # `_prepare_chat_with_tools` is an LLM span whose output is the messages.
                    return []
                gens = doc.get("generations")
                if isinstance(gens, list):  # LangChain's LLMResult
                    out = []
                    for group in gens:
                        for g in group if isinstance(group, list) else [group]:
                            if isinstance(g, dict) and isinstance(g.get("text"), str):
                                out.append(g["text"])
                    return out
                choices = doc.get("choices")
                if isinstance(choices, list):  # an OpenAI chat completion
                    out = []
                    for c in choices:
                        if isinstance(c, dict):
                            msg = c.get("message") or {}
                            t = msg.get("content") if isinstance(msg, dict) else c.get("text")
                            if isinstance(t, str):
                                out.append(t)
                    return out
        return list(text_leaves(value))
    return list(text_leaves(value))


def span_from_attributes(
    *,
    span_id: str,
    parent_id: str | None,
    trace_id: str,
    name: str,
    start: int,
    end: int,
    seq: int,
    attrs: Mapping[str, Any],
) -> TraceSpan:
    """A `TraceSpan` from one span's (flat) OpenInference attributes."""
    kind = Kind.parse(attrs.get("openinference.span.kind"))
    inputs: list[str] = []
    outputs: list[str] = []
    documents: list[str] = []
    call = ""
    turns: list[str] = []
    genai = genai_kind(attrs) if "openinference.span.kind" not in attrs else None
    if genai is not None:
        kind = genai
        inputs, outputs, documents = genai_texts(kind, attrs)
        call = genai_call(kind, attrs)
        turns = genai_turns(kind, attrs)
    elif kind is Kind.LLM:
        # Every message, system ones included: a RAG prompt often carries its context there.
        inputs = _indexed(attrs, "llm.input_messages", "message.content")
        if not inputs:
            inputs = _indexed(attrs, "llm.prompts", "prompt.text")
        if not inputs:
            prompts = attrs.get("llm.prompts")
            if isinstance(prompts, list):
                inputs = [p for p in prompts if isinstance(p, str)]
        if not inputs and attrs.get("input.value") is not None:
            inputs = _all_strings(attrs["input.value"])
        turns = _user_turns(attrs)
        outputs = _indexed(attrs, "llm.output_messages", "message.content")
        # Output messages recorded with no text (a turn that only calls tools) are the whole
        # output: `output.value` then holds a rendering of them (LlamaIndex's 'assistant: None').
        structured = any(k.startswith("llm.output_messages.") for k in attrs)
        if not outputs and not structured and attrs.get("output.value") is not None:
            outputs = _generation_texts(attrs["output.value"])
    elif kind in (Kind.CHAIN, Kind.AGENT, Kind.TOOL):
        if attrs.get("input.value") is not None:
            inputs = list(text_leaves(attrs["input.value"]))
        if attrs.get("output.value") is not None:
            outputs = (
                _state_reply(attrs["output.value"])
                or _tool_output(attrs["output.value"])
                or list(text_leaves(attrs["output.value"]))
            )
        if kind is Kind.TOOL and attrs.get("input.value") is not None:
            # The call the agent made: evidence of what it did, beside what the tool returned.
            tool = attrs.get("tool.name")
            call = call_statement(
                tool if isinstance(tool, str) and tool else name, attrs["input.value"]
            )
    elif kind is Kind.RETRIEVER:
        documents = _indexed(attrs, "retrieval.documents", "document.content")
        if attrs.get("input.value") is not None:
            inputs = list(text_leaves(attrs["input.value"]))
    elif kind is Kind.RERANKER:
        documents = _indexed(attrs, "reranker.output_documents", "document.content")
    return TraceSpan(
        id=span_id,
        parent_id=parent_id or None,
        trace_id=trace_id,
        name=name,
        kind=kind,
        start=start,
        end=end,
        seq=seq,
        inputs=unique(inputs),
        outputs=unique(outputs),
        documents=unique(documents),
        turns=unique(turns),
        call=call,
    )


_USER_ROLES = frozenset({"user", "human"})


def _state_reply(value: Any) -> list[str]:
    """The reply of an agent whose output is its whole chat state (LangGraph's
    ``{"messages": [...]}``): the last message's text, not the history it ends; [] otherwise."""
    doc = parse_embedded(value, None) if isinstance(value, str) else value
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return []
    messages = doc["messages"]
    if not messages or not isinstance(messages[-1], dict):
        return []
    return list(text_leaves(messages[-1]))


def _tool_output(value: Any) -> list[str]:
    """The result inside LlamaIndex's ``ToolOutput`` (``{"blocks": [{"text"}], "tool_name",
    "raw_input", "raw_output", ...}``): its blocks' text (else its ``content``), not the name and
    arguments beside it; [] for any other value."""
    doc = parse_embedded(value, None) if isinstance(value, str) else value
    if not isinstance(doc, dict) or not {"tool_name", "raw_output"} <= set(doc):
        return []
    blocks = doc.get("blocks")
    texts = [
        b["text"]
        for b in (blocks if isinstance(blocks, list) else [])
        if isinstance(b, dict) and isinstance(b.get("text"), str)
    ]
    if not texts and isinstance(doc.get("content"), str):
        texts = [doc["content"]]
    return texts


def _user_turns(attrs: Mapping[str, Any]) -> list[str]:
    """The user messages of an LLM span's ``llm.input_messages``, in order."""
    turns: list[tuple[int, str]] = []
    for k, v in attrs.items():
        m = _INDEXED.match(k)
        if (
            m is None
            or m.group("prefix") != "llm.input_messages"
            or m.group("rest") != "message.role"
            or str(v).lower() not in _USER_ROLES
        ):
            continue
        i = m.group("i")
        text = "\n\n".join(
            _indexed(
                {a: b for a, b in attrs.items() if a.startswith(f"llm.input_messages.{i}.")},
                "llm.input_messages",
                "message.content",
            )
        )
        if text.strip():
            turns.append((int(i), text))
    turns.sort()
    return [t for _, t in turns]


def _all_strings(value: Any) -> list[str]:
    # An LLM's raw input: every message text, system included (see span_from_attributes).
    if isinstance(value, str):
        doc = parse_embedded(value, _NOT_JSON)
        if doc is _NOT_JSON:
            return [value]
        value = doc
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            if isinstance(v.get("kwargs"), dict) and "content" in v["kwargs"]:
                walk(v["kwargs"]["content"])
            elif "content" in v:
                walk(v["content"])
            elif "text" in v:
                walk(v["text"])
            else:
                for k, x in v.items():
                    if k not in ("id", "lc", "type", "role", "name", "additional_kwargs"):
                        walk(x)

    walk(value)
    return out


# -- OTLP JSON ----------------------------------------------------------------------------------


def _any_value(v: Any) -> Any:
    """Decode an OTLP ``AnyValue`` object (`TraceError` for one of the wrong shape)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        # protobuf's JSON mapping writes int64 as a decimal string; a number is accepted too.
        raw = v["intValue"]
        if isinstance(raw, int | str) and not isinstance(raw, bool):
            try:
                return int(raw)
            except ValueError:
                pass
        elif isinstance(raw, float) and raw.is_integer():
            return int(raw)
        raise TraceError(f"intValue {raw!r:.40} is not an integer")
    if "doubleValue" in v:
        raw = v["doubleValue"]
        # A string is how protobuf's JSON mapping writes NaN and the infinities.
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise TraceError(f"doubleValue must be a number, not {raw!r:.40}")
        try:
            return float(raw)
        except ValueError:
            raise TraceError(f"doubleValue {raw!r:.40} is not a number") from None
    if "arrayValue" in v:
        return [_any_value(x) for x in _values(v["arrayValue"], "arrayValue")]
    if "kvlistValue" in v:
        out: dict[str, Any] = {}
        for kv in _values(v["kvlistValue"], "kvlistValue"):
            if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
                raise TraceError(
                    f'a kvlistValue item must be an object with a string "key", not {kv!r:.40}'
                )
            out[kv["key"]] = _any_value(kv.get("value"))
        return out
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _values(container: Any, what: str) -> list[Any]:
    """The ``values`` list of an OTLP ``ArrayValue`` / ``KeyValueList`` (null: empty)."""
    if container is None:
        return []
    values = container.get("values") if isinstance(container, dict) else container
    if values is None:
        return []
    if not isinstance(container, dict) or not isinstance(values, list):
        raise TraceError(f'{what} must be an object with a "values" list, not {container!r:.40}')
    return values


def _objects(value: Any, what: str) -> list[dict[str, Any]]:
    """A list of objects from the OTLP structure (a missing or null list: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TraceError(f"{what} must be a list, not {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise TraceError(f"{what}[{i}] must be an object, not {type(item).__name__}")
    return value


def _otlp_id(v: Any) -> str:
    """An OTLP id as lower-case hex (the file exporter writes hex, protobuf's JSON base64)."""
    s = str(v or "")
    if not s:
        return ""
    if re.fullmatch(r"[0-9a-fA-F]+", s) and len(s) in (16, 32):
        return s.lower()
    try:
        return base64.b64decode(s, validate=True).hex()
    except ValueError:
        return s


def is_otlp(doc: Any) -> bool:
    """True for an OTLP JSON export request."""
    return isinstance(doc, dict) and isinstance(doc.get("resourceSpans"), list)


def read_otlp(docs: Iterable[Any]) -> list[TraceSpan]:
    """Spans of OTLP JSON export requests (``resourceSpans`` → ``scopeSpans`` → ``spans``).

    Every level is checked for its type: a `TraceError` names the first item that is not what
    OTLP writes (a string where an object belongs, an attribute list that is a number, ...)."""
    out: list[TraceSpan] = []
    for doc in docs:
        if not is_otlp(doc):
            raise TraceError('expected OTLP JSON objects with a "resourceSpans" list')
        for rs in _objects(doc["resourceSpans"], "resourceSpans"):
            scopes = rs.get("scopeSpans")
            scope_key = "scopeSpans"
            if scopes is None:  # the name before OTLP 0.19
                scopes, scope_key = (
                    rs.get("instrumentationLibrarySpans"),
                    "instrumentationLibrarySpans",
                )
            for ss in _objects(scopes, scope_key):
                for sp in _objects(ss.get("spans"), "spans"):
                    name = sp.get("name")
                    try:
                        attrs = {
                            a["key"]: _any_value(a.get("value"))
                            for a in _attributes(sp.get("attributes"))
                        }
                        start = int(sp.get("startTimeUnixNano") or 0)
                        end = int(sp.get("endTimeUnixNano") or start)
                    except TraceError as exc:
                        raise TraceError(f"span {name!r:.60}: {exc}") from None
                    except (TypeError, ValueError) as exc:
                        raise TraceError(f"span {name!r:.60}: bad time: {exc}") from None
                    out.append(
                        span_from_attributes(
                            span_id=_otlp_id(sp.get("spanId")),
                            parent_id=_otlp_id(sp.get("parentSpanId")) or None,
                            trace_id=_otlp_id(sp.get("traceId")),
                            name=str(name or ""),
                            start=start,
                            end=end,
                            seq=len(out),
                            attrs=attrs,
                        )
                    )
    return out


def _attributes(value: Any) -> list[dict[str, Any]]:
    """A span's ``attributes``: a list of ``{"key", "value"}`` objects (null: none)."""
    items = _objects(value, "attributes")
    for a in items:
        if not isinstance(a.get("key"), str):
            raise TraceError(f'an attribute needs a string "key", not {a.get("key")!r:.40}')
    return items


# -- opentelemetry-sdk span JSON ----------------------------------------------------------------


def is_sdk_span(doc: Any) -> bool:
    """True for one ``ReadableSpan.to_json()`` object."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("context"), dict)
        and "span_id" in doc["context"]
        and "name" in doc
    )


def _iso_ns(value: Any) -> int:
    s = str(value or "")
    if not s:
        return 0
    m = re.match(r"^(.*?)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$", s)
    if m is None:
        raise TraceError(f"bad time {s!r}")
    base, frac, tz = m.group(1), m.group(2) or "", m.group(3) or "+00:00"
    try:
        seconds = int(datetime.fromisoformat(base + ("+00:00" if tz == "Z" else tz)).timestamp())
    except (ValueError, OverflowError, OSError):
        raise TraceError(f"bad time {s!r:.60}") from None
    return seconds * 1_000_000_000 + int((frac + "000000000")[:9])


def _hex(v: Any) -> str:
    s = str(v or "")
    return s[2:].lower() if s.lower().startswith("0x") else s.lower()


def read_sdk_spans(docs: Iterable[Any]) -> list[TraceSpan]:
    """Spans of opentelemetry-sdk ``to_json()`` objects."""
    out: list[TraceSpan] = []
    for doc in docs:
        if not is_sdk_span(doc):
            raise TraceError("expected opentelemetry-sdk span objects (with context.span_id)")
        attrs = doc.get("attributes") or {}
        if not isinstance(attrs, dict):
            raise TraceError(f"span {doc.get('name')!r}: attributes must be an object")
        start = _iso_ns(doc.get("start_time"))
        out.append(
            span_from_attributes(
                span_id=_hex(doc["context"].get("span_id")),
                parent_id=_hex(doc.get("parent_id")) or None,
                trace_id=_hex(doc["context"].get("trace_id")),
                name=str(doc.get("name") or ""),
                start=start,
                end=_iso_ns(doc.get("end_time")) or start,
                seq=len(out),
                attrs=attrs,
            )
        )
    return out


__all__ = ["is_otlp", "is_sdk_span", "read_otlp", "read_sdk_spans", "span_from_attributes"]
