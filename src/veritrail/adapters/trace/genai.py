"""OpenTelemetry GenAI semantic conventions (``gen_ai.*``), as OpenLLMetry and others write them.

Read only for spans without an OpenInference kind (OpenInference wins when both are present).
A span's kind is decided from attributes that say so without guessing:

* ``gen_ai.operation.name``: ``chat``, ``text_completion``, ``generate_content`` → LLM;
  ``invoke_agent``, ``create_agent`` → agent; ``execute_tool`` → tool; ``retrieval`` →
  retriever; ``invoke_workflow`` → chain; ``embeddings`` → embedding; any other value → other;
* without it, OpenLLMetry's ``llm.request.type`` (``chat``, ``completion`` → LLM; ``embedding``,
  ``rerank`` → other) or, when neither is set, message content itself
  (``gen_ai.prompt.N.content`` / ``gen_ai.completion.N.content`` or ``gen_ai.input.messages`` /
  ``gen_ai.output.messages``) → LLM;
* OpenLLMetry's own ``traceloop.span.kind``: ``workflow``, ``task`` → chain; ``agent`` → agent;
  ``tool`` → tool, with their ``traceloop.entity.input`` / ``traceloop.entity.output``.

Texts: an LLM's input is ``gen_ai.system_instructions`` and ``gen_ai.input.messages`` (the JSON
message list: text parts, and tool-call responses), or the indexed ``gen_ai.prompt.N.content``
(OpenLLMetry; a JSON list of content blocks gives its text blocks); its output is the text parts
of ``gen_ai.output.messages`` or ``gen_ai.completion.N.content``. A tool's output is
``gen_ai.tool.call.result`` (else ``traceloop.entity.output``); a retriever's documents are the
``content`` of ``gen_ai.retrieval.documents``; agents and chains give their messages or
``traceloop.entity.input`` / ``output``. Content recorded as span events (the older
``gen_ai.content.prompt`` events) is not read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .calls import call_statement
from .model import Kind, parse_embedded, text_leaves

_OPERATIONS = {
    "chat": Kind.LLM,
    "text_completion": Kind.LLM,
    "generate_content": Kind.LLM,
    "invoke_agent": Kind.AGENT,
    "create_agent": Kind.AGENT,
    "execute_tool": Kind.TOOL,
    "retrieval": Kind.RETRIEVER,
    "invoke_workflow": Kind.CHAIN,
    "embeddings": Kind.EMBEDDING,
}
_REQUEST_TYPES = {"chat": Kind.LLM, "completion": Kind.LLM}
_TRACELOOP_KINDS = {
    "workflow": Kind.CHAIN,
    "task": Kind.CHAIN,
    "agent": Kind.AGENT,
    "tool": Kind.TOOL,
}
_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.content$")
_SYSTEM_ROLES = frozenset({"system", "developer"})


def _json(value: Any) -> Any:
    """A JSON attribute value: parsed when it is a JSON string, as is when already structured."""
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("[", "{"):
            return parse_embedded(s, value)
    return value


def _entity(value: Any) -> Any:
    """``traceloop.entity.input`` / ``output``: always JSON-encoded (a string output is a JSON
    string literal); a value that does not parse is kept as written."""
    if isinstance(value, str):
        return parse_embedded(value, value)
    return value


def _content_text(value: Any) -> list[str]:
    """OpenLLMetry's message content: a string, or a JSON list of content blocks."""
    parsed = _json(value)
    if isinstance(parsed, list) and all(isinstance(b, dict) for b in parsed):
        out: list[str] = []
        for b in parsed:
            t = b.get("text", b.get("content"))
            if isinstance(t, str) and b.get("type", "text") == "text":
                out.append(t)
        return out
    return [value] if isinstance(value, str) else list(text_leaves(value))


def _indexed(attrs: Mapping[str, Any], which: str, *, skip_system: bool = False) -> list[str]:
    found: list[tuple[int, list[str]]] = []
    for k, v in attrs.items():
        m = _INDEXED.match(k)
        if m is None or m.group(1) != which:
            continue
        i = m.group(2)
        role = str(attrs.get(f"gen_ai.{which}.{i}.role", "")).lower()
        if skip_system and role in _SYSTEM_ROLES:
            continue
        found.append((int(i), _content_text(v)))
    found.sort(key=lambda x: x[0])
    return [t for _, texts in found for t in texts]


def _parts(messages: Any, *, output: bool, skip_system: bool = False) -> list[str]:
    """Texts of a ``gen_ai.input.messages`` / ``gen_ai.output.messages`` value."""
    parsed = _json(messages)
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return [parsed] if isinstance(parsed, str) and parsed.strip() else []
    out: list[str] = []
    for msg in parsed:
        if isinstance(msg, str):
            out.append(msg)
            continue
        if not isinstance(msg, dict):
            continue
        if skip_system and str(msg.get("role", "")).lower() in _SYSTEM_ROLES:
            continue
        parts = msg.get("parts")
        if not isinstance(parts, list):
            # Not the parts form: a plain {"role", "content"} message.
            out += list(text_leaves(msg.get("content"), parse_json=False))
            continue
        for p in parts:
            if not isinstance(p, dict):
                continue
            kind = p.get("type")
            if kind == "text" and isinstance(p.get("content"), str):
                out.append(p["content"])
            elif kind == "tool_call_response" and not output:
                # A tool's result given back to the model: text that fed this generation.
                out += list(text_leaves(p.get("response")))
    return out


def _system_instructions(value: Any) -> list[str]:
    parsed = _json(value)
    if isinstance(parsed, list):
        return [
            p["content"]
            for p in parsed
            if isinstance(p, dict) and p.get("type", "text") == "text"
            if isinstance(p.get("content"), str)
        ]
    return [parsed] if isinstance(parsed, str) else []


def genai_kind(attrs: Mapping[str, Any]) -> Kind | None:
    """The kind these GenAI / OpenLLMetry attributes state, or None when they state none."""
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op.strip():
        return _OPERATIONS.get(op.strip().lower(), Kind.OTHER)
    tl = attrs.get("traceloop.span.kind")
    if isinstance(tl, str) and tl.strip().lower() in _TRACELOOP_KINDS:
        return _TRACELOOP_KINDS[tl.strip().lower()]
    req = attrs.get("llm.request.type")
    if isinstance(req, str) and req.strip():
        return _REQUEST_TYPES.get(req.strip().lower(), Kind.OTHER)
    if any(_INDEXED.match(k) for k in attrs) or (
        "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs
    ):
        return Kind.LLM
    return None


def genai_texts(kind: Kind, attrs: Mapping[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(inputs, outputs, documents) of a span of `kind` from its GenAI / OpenLLMetry attributes."""
    inputs: list[str] = []
    outputs: list[str] = []
    documents: list[str] = []
    entity_in = _entity(attrs.get("traceloop.entity.input"))
    entity_out = _entity(attrs.get("traceloop.entity.output"))
    if kind is Kind.LLM:
        # Every message, system ones included (a RAG prompt often carries its context there).
        inputs = _system_instructions(attrs.get("gen_ai.system_instructions"))
        if "gen_ai.input.messages" in attrs:
            inputs += _parts(attrs["gen_ai.input.messages"], output=False)
        else:
            inputs += _indexed(attrs, "prompt")
        if "gen_ai.output.messages" in attrs:
            outputs = _parts(attrs["gen_ai.output.messages"], output=True)
        else:
            outputs = _indexed(attrs, "completion")
    elif kind in (Kind.CHAIN, Kind.AGENT):
        # System instructions of an agent are its configuration, not data entering the trace.
        if "gen_ai.input.messages" in attrs:
            inputs = _parts(attrs["gen_ai.input.messages"], output=False, skip_system=True)
        elif any(k.startswith("gen_ai.prompt.") for k in attrs):
            inputs = _indexed(attrs, "prompt", skip_system=True)
        elif entity_in is not None:
            inputs = list(text_leaves(entity_in))
        if "gen_ai.output.messages" in attrs:
            outputs = _parts(attrs["gen_ai.output.messages"], output=True)
        elif any(k.startswith("gen_ai.completion.") for k in attrs):
            outputs = _indexed(attrs, "completion")
        elif entity_out is not None:
            outputs = list(text_leaves(entity_out))
    elif kind is Kind.TOOL:
        result = attrs.get("gen_ai.tool.call.result")
        result = entity_out if result is None else result
        if result is not None:
            outputs = list(text_leaves(result))
        args = attrs.get("gen_ai.tool.call.arguments")
        args = entity_in if args is None else args
        if args is not None:
            inputs = list(text_leaves(args))
    elif kind is Kind.RETRIEVER:
        docs = _json(attrs.get("gen_ai.retrieval.documents"))
        if isinstance(docs, list):
            for d in docs:
                if isinstance(d, dict):
                    t = d.get("content", d.get("text"))
                    if isinstance(t, str):
                        documents.append(t)
                elif isinstance(d, str):
                    documents.append(d)
        q = attrs.get("gen_ai.retrieval.query.text")
        if isinstance(q, str):
            inputs = [q]
    return inputs, outputs, documents


def genai_call(kind: Kind, attrs: Mapping[str, Any]) -> str:
    """A tool span's call as a statement (``gen_ai.tool.name`` and ``gen_ai.tool.call.arguments``,
    or OpenLLMetry's ``traceloop.entity.name`` and ``traceloop.entity.input``); "" for other
    kinds or when the name or the arguments were not recorded."""
    if kind is not Kind.TOOL:
        return ""
    name = attrs.get("gen_ai.tool.name")
    args = attrs.get("gen_ai.tool.call.arguments")
    if not isinstance(name, str) or not name.strip() or args is None:
        name = attrs.get("traceloop.entity.name")
        args = _entity(attrs.get("traceloop.entity.input"))
    if not isinstance(name, str) or not name.strip() or args is None:
        return ""
    return call_statement(name, args)


def genai_turns(kind: Kind, attrs: Mapping[str, Any]) -> list[str]:
    """An LLM span's user turns: the texts of the user messages of its prompt
    (``gen_ai.input.messages``, or the indexed ``gen_ai.prompt.N``), in order."""
    if kind is not Kind.LLM:
        return []
    turns: list[str] = []
    if "gen_ai.input.messages" in attrs:
        parsed = _json(attrs["gen_ai.input.messages"])
        for msg in parsed if isinstance(parsed, list) else []:
            if isinstance(msg, dict) and str(msg.get("role", "")).lower() == "user":
                turns.append("\n\n".join(_parts([msg], output=False)))
    else:
        for k in sorted(
            (k for k in attrs if (m := _INDEXED.match(k)) and m.group(1) == "prompt"),
            key=lambda k: int(k.split(".")[2]),
        ):
            i = k.split(".")[2]
            if str(attrs.get(f"gen_ai.prompt.{i}.role", "")).lower() == "user":
                turns.append("\n\n".join(_content_text(attrs[k])))
    return [t for t in turns if t.strip()]


__all__ = ["genai_call", "genai_kind", "genai_texts", "genai_turns"]
