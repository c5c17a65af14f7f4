"""The importer's own view of a trace: spans reduced to the texts that matter for the DAG.

Every reader (OTLP JSON, opentelemetry-sdk span JSON, Langfuse) and every live handler
(LangChain, LlamaIndex) turns what it sees into `TraceSpan` values; `build.build_dag` then works
on those alone, so one pipeline gives the same DAG whichever way it was captured.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ...errors import InputProblem
from ...textio import MAX_DEPTH, depth_exceeds, lone_surrogate


class TraceError(InputProblem, ValueError):
    """The trace cannot be read, or gives no valid generation DAG (the message says why)."""


def parse_embedded(text: str, default: Any) -> Any:
    """A JSON text held in a span attribute (``input.value``, a message list), parsed; `default`
    when it is not JSON.

    The text was a string of the trace file, so the file's rules never saw inside it: a value
    nested more than `MAX_DEPTH` levels (or too deep for the parser) is refused here, with a
    `TraceError`, before anything walks it recursively, and so is a lone surrogate escape
    (a DAG holding it could not be written).
    """
    try:
        value = json.loads(text)
    except RecursionError:
        value = _TOO_DEEP
    except ValueError:
        return default
    if value is _TOO_DEEP or depth_exceeds(value, MAX_DEPTH):
        raise TraceError(
            f"a JSON text inside a span attribute is nested too deeply (more than {MAX_DEPTH} "
            f"levels of arrays/objects): {text[:40]!r}..."
        )
    lone = lone_surrogate(text)  # the file's own rule (veritrail.textio), one level down
    if lone is not None:
        raise TraceError(
            f"a JSON text inside a span attribute holds the lone surrogate {lone[1]} (at "
            f"character {lone[0] + 1} of {text[:40]!r}...): half of a UTF-16 pair, not a character"
        )
    return value


_TOO_DEEP = object()


class Kind(StrEnum):
    """What a span did, in OpenInference's terms (other conventions are mapped onto these)."""

    LLM = "LLM"
    CHAIN = "CHAIN"
    AGENT = "AGENT"
    RETRIEVER = "RETRIEVER"
    RERANKER = "RERANKER"
    TOOL = "TOOL"
    EMBEDDING = "EMBEDDING"
    PROMPT = "PROMPT"
    GUARDRAIL = "GUARDRAIL"
    EVALUATOR = "EVALUATOR"
    OTHER = "OTHER"
    """Events and kinds the importer does not know. Like EMBEDDING, PROMPT (templates),
    GUARDRAIL and EVALUATOR spans, they never become nodes."""

    @classmethod
    def parse(cls, value: Any) -> Kind:
        """The kind named by `value` (case-insensitive); `OTHER` for anything unknown."""
        try:
            return cls(str(value or "").strip().upper())
        except ValueError:
            return cls.OTHER


@dataclass(frozen=True, slots=True)
class TraceSpan:
    """One span, with its texts already extracted.

    `start`/`end` only need to order spans within one trace (nanoseconds, or a counter for the
    live handlers); `seq` breaks ties (the order spans were finished in).
    """

    id: str
    parent_id: str | None
    trace_id: str
    name: str
    kind: Kind
    start: int
    end: int
    seq: int
    inputs: tuple[str, ...] = ()
    """Texts given to the span: an LLM's prompt messages, a chain's or tool's input leaves."""
    outputs: tuple[str, ...] = ()
    """Texts it returned: an LLM's generation(s), a chain's or tool's output leaves."""
    documents: tuple[str, ...] = ()
    """Retrieved (or reranked) documents."""
    turns: tuple[str, ...] = ()
    """An LLM span's user turns: the user messages of its prompt, in order. The earlier ones (a
    conversation's history), and the last too when the span is the trace's top, become roots
    (`builder.Builder`)."""
    call: str = ""
    """A tool span's call as a statement (``book(flight="LH 400")``: `calls.call_statement`) when
    the trace recorded its name and arguments; its node then holds the call and its result."""


# Keys of serialized objects that never hold pipeline text (ids, metadata, tool-call plumbing).
_SKIP_KEYS = frozenset(
    {
        "id",
        "ids",
        "lc",
        "type",
        "name",
        "run_id",
        "role",
        "additional_kwargs",
        "response_metadata",
        "usage_metadata",
        "metadata",
        "tool_calls",
        "tool_call",
        "invalid_tool_calls",
        "tool_call_id",
        "generation_info",
        "llm_output",
        "run",
        "score",
        "embedding",
        "mimetype",
        "mime_type",
        "excluded_embed_metadata_keys",
        "excluded_llm_metadata_keys",
        "relationships",
        "start_char_idx",
        "end_char_idx",
        "class_name",
        "text_template",
        "metadata_template",
        "metadata_seperator",
        "metadata_separator",
        "hash",
        "model",
        "usage",
    }
)
_SYSTEM_ROLES = frozenset({"system", "developer"})


def text_leaves(value: Any, *, parse_json: bool = True) -> Iterator[str]:
    """The pipeline texts inside a span's input or output value, in order.

    Strings are leaves (a string that is a JSON object or array is parsed first when
    `parse_json`); lists give each item; chat messages (LangChain's serialized and
    ``messages_to_dict`` forms, OpenAI-style ``{"role", "content"}``) give their content unless
    they are system messages; documents give their ``page_content`` / ``text``; other objects
    give their values except the bookkeeping keys in `_SKIP_KEYS`. Numbers, booleans and nulls
    are not text.
    """
    if isinstance(value, str):
        s = value.strip()
        if parse_json and s[:1] in ("{", "[") and s[-1:] in ("}", "]"):
            parsed = parse_embedded(s, None)
            if isinstance(parsed, dict | list):
                yield from text_leaves(parsed, parse_json=False)
                return
        if s:
            yield value
        return
    if isinstance(value, list | tuple):
        for item in value:
            yield from text_leaves(item, parse_json=parse_json)
        return
    if not isinstance(value, dict):
        return
    # LangChain's serialized form: {"lc": 1, "type": "constructor", "id": [..., "HumanMessage"],
    # "kwargs": {...}}: the class name says what it is, the kwargs hold the text.
    if value.get("lc") is not None and isinstance(value.get("kwargs"), dict):
        cls_path = value.get("id")
        cls_name = str(cls_path[-1]) if isinstance(cls_path, list) and cls_path else ""
        if cls_name.startswith("SystemMessage"):
            return
        yield from text_leaves(value["kwargs"], parse_json=parse_json)
        return
    # messages_to_dict form: {"type": "ai", "data": {"content": ...}}
    if isinstance(value.get("data"), dict) and "content" in value["data"] and "type" in value:
        if str(value["type"]).lower() in _SYSTEM_ROLES:
            return
        yield from text_leaves(value["data"]["content"], parse_json=parse_json)
        return
    role = value.get("role", value.get("type"))
    if "content" in value and (role is not None or len(value) <= 2):
        if str(role).lower() in _SYSTEM_ROLES:
            return
        yield from text_leaves(value["content"], parse_json=parse_json)
        return
    for key in ("page_content", "text"):
        if isinstance(value.get(key), str):
            yield from text_leaves(value[key], parse_json=parse_json)
            return
    for k, v in value.items():
        if k not in _SKIP_KEYS:
            yield from text_leaves(v, parse_json=parse_json)


def unique(texts: Any) -> tuple[str, ...]:
    """Non-blank texts, first occurrence kept."""
    return tuple(dict.fromkeys(t for t in texts if isinstance(t, str) and t.strip()))


__all__ = ["Kind", "TraceError", "TraceSpan", "parse_embedded", "text_leaves", "unique"]
