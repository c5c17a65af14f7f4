"""A chat transcript → generation DAG: `veritrail check --conversation FILE` (docs/adapters.md,
"Agents and conversations").

The file holds OpenAI chat messages (a list, or an object with a ``messages`` list, as a chat
completion request has them): ``system``/``developer``, ``user``, ``assistant`` (text and/or
``tool_calls``; the older ``function_call``), ``tool`` (and the older ``function``) messages.
No tracing is needed: the order of the messages is the order of the steps.

* **Roots**: what entered the conversation from outside: system messages, user turns, and each
  tool call written as a statement with its result (`trace.calls.tool_call_text`: the call is
  evidence of what the assistant did, the result of what the tool said). A call no tool message
  answers is a root of its own ("no result is recorded").
* **Generations**: every assistant message with text. Each read the whole conversation before
  it; its sources are the previous assistant message and the nodes after it, so what came
  earlier reaches it through the previous message (the edges implied by the others are left
  out: a claim read in an assistant message is then checked against that message's own
  sources, never judged on its text beside them). Each is a stage of its own, and a claim's
  error stage names the assistant message (the LLM call) that first stated the unsupported
  content; ``meta.stage_names`` says which message and what came just before it. A fact the
  user gave several assistant messages back, which no message since repeated, is reached by
  the loop's widening after Not Fully Supported verdicts: up to ``--q`` levels back.
* **Final output** (the terminal): the last assistant message. Messages after it are not read.

Node ids name the message: ``m2-user``, ``m4-tool-book_flight``, ``m5-assistant`` (N is the
message's position in the file, from 1). Texts are redacted like reports before the DAG is made.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..dag import Dag, DagValidationError
from ..errors import InputProblem
from ..redaction import redact_obj
from ..textio import InputError, read_input_json
from .trace.calls import call_statement, tool_call_text


class ConversationError(InputProblem, ValueError):
    """The conversation file cannot be read, or gives no DAG (the message says why)."""


class _Function(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: Any = None


class _ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str | None = None
    function: _Function


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str = "text"
    text: str | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[_Part | str] | None = None
    name: str | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: str | None = None
    function_call: _Function | None = None

    def text(self) -> str:
        """The message's text: the string, or its text parts (images and audio are not read)."""
        if isinstance(self.content, str):
            return self.content.strip()
        parts = [
            p if isinstance(p, str) else (p.text or "")
            for p in self.content or []
            if isinstance(p, str) or p.type in ("text", "input_text", "output_text")
        ]
        return "\n\n".join(p.strip() for p in parts if p.strip())


class _Conversation(BaseModel):
    model_config = ConfigDict(extra="allow")
    messages: list[_Message]


@dataclass(frozen=True, slots=True)
class _Call:
    """A tool call an assistant message made, waiting for the tool message that answers it."""

    message: int
    id: str | None
    name: str
    statement: str


@dataclass
class _Walk:
    """The nodes found so far, in order (the conversation's one pass over its messages)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    pending: list[_Call] = field(default_factory=list)
    stage_after: dict[str, str] = field(default_factory=dict)
    """Generation id → what came just before it, in words."""
    last_event: str = "the start of the conversation"
    last_generation: str | None = None

    def since_last(self) -> list[str]:
        """A generation's sources: the previous assistant message, and what came after it."""
        ids = [r["id"] for r in self.records]
        start = ids.index(self.last_generation) if self.last_generation is not None else 0
        return ids[start:]

    def add(self, nid: str, text: str, sources: list[str]) -> str:
        ids = {r["id"] for r in self.records}
        base, k = nid, 1
        while nid in ids:  # two calls of one tool in one message
            k += 1
            nid = f"{base}-{k}"
        self.records.append({"id": nid, "text": text, "sources": sources})
        return nid

    def flush(self) -> None:
        """Calls no tool message answered: each a root that says so."""
        for c in self.pending:
            self.add(f"m{c.message}-call-{_slug(c.name)}", tool_call_text(c.statement, None), [])
        self.pending.clear()


_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def _slug(name: str) -> str:
    return _SLUG.sub("_", name).strip("_")[:40] or "tool"


def _parse(doc: Any) -> list[_Message]:
    if isinstance(doc, list):
        doc = {"messages": doc}
    if not isinstance(doc, dict) or "messages" not in doc:
        raise ConversationError(
            'expected a list of chat messages, or an object with a "messages" list'
        )
    try:
        return _Conversation.model_validate(doc).messages
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = list(err["loc"])
        where = ""
        if len(loc) >= 2 and loc[0] == "messages" and isinstance(loc[1], int):
            rest = ".".join(str(x) for x in loc[2:] if not str(x).startswith(("str", "list[")))
            where = f"message {loc[1] + 1}" + (f", {rest}" if rest else "") + ": "
        raise ConversationError(f"{where}{err['msg']}") from None


def conversation_dag(doc: Any) -> Dag:
    """The generation DAG of a parsed conversation (see the module docstring for the rules);
    `ConversationError` when it has no assistant message with text at its end."""
    messages = _parse(doc)
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=None)
    if last is None:
        raise ConversationError("the conversation has no assistant message: nothing to check")
    if not messages[last].text():
        raise ConversationError(
            f"the last assistant message (message {last + 1}) has no text: nothing to check"
        )
    w = _Walk()
    for i, m in enumerate(messages[: last + 1]):
        n = i + 1
        text = m.text()
        if m.role in ("system", "developer", "user"):
            if text:
                w.add(f"m{n}-{m.role}", text, [])
                if m.role == "user":
                    w.last_event = f"user message {n}"
        elif m.role in ("tool", "function"):
            _answer(w, m, n, text)
        else:
            w.flush()
            if text:
                nid = w.add(f"m{n}-assistant", text, w.since_last())
                w.stage_after[nid] = w.last_event
                w.last_event = f"assistant message {n}"
                w.last_generation = nid
            calls = list(m.tool_calls or [])
            if m.function_call is not None:
                calls.append(_ToolCall(function=m.function_call))
            for c in calls:
                stmt = call_statement(c.function.name, c.function.arguments)
                w.pending.append(_Call(n, c.id, c.function.name, stmt))
    texts = redact_obj([r["text"] for r in w.records])
    for r, t in zip(w.records, texts, strict=True):
        r["text"] = t
    meta = {"source": "conversation", "made_by": "veritrail check --conversation"}
    try:
        dag = Dag.from_records(w.records, meta)
    except DagValidationError as exc:  # not expected: the records are built above
        raise ConversationError(str(exc)) from None
    names: dict[str, str] = {"1": "system messages, user turns, tool calls and their results"}
    for node in dag:
        if node.id in w.stage_after:
            final = " (the final output)" if node.id == dag.terminal else ""
            at = node.id.split("-")[0][1:]
            names[str(node.stage)] = (
                f"assistant message {at}{final}, after {w.stage_after[node.id]}"
            )
    dag.meta["stage_names"] = redact_obj(names)
    return dag


def _answer(w: _Walk, m: _Message, n: int, text: str) -> None:
    """A tool (or function) message: the call it answers and its result, as one root."""
    call = next((c for c in w.pending if m.tool_call_id and c.id == m.tool_call_id), None)
    if call is None and m.name:
        call = next((c for c in w.pending if c.name == m.name), None)
    if call is None and m.tool_call_id is None and len(w.pending) == 1:
        call = w.pending[0]
    if call is not None:
        w.pending.remove(call)
        w.add(f"m{n}-tool-{_slug(call.name)}", tool_call_text(call.statement, text), [])
        w.last_event = f"the {call.name} result (message {n})"
    elif text:
        label = f"-{_slug(m.name)}" if m.name else ""
        w.add(f"m{n}-tool{label}", text, [])
        w.last_event = f"the tool result of message {n}"


def read_conversation(path: str | Path) -> Dag:
    """The DAG of a conversation file (JSON, UTF-8; `veritrail.textio`'s rules for input files).
    `ConversationError` for a file that is not one."""
    try:
        doc = read_input_json(path, "conversation file")
    except InputError as exc:
        raise ConversationError(str(exc)) from None
    try:
        return conversation_dag(doc)
    except ConversationError as exc:
        raise ConversationError(f"conversation file {path}: {exc}") from None


__all__ = ["ConversationError", "conversation_dag", "read_conversation"]
