"""A tool call as evidence: the call written as a statement, with its result (docs/adapters.md,
"Agents and conversations").

An agent's answer states what it did ("I booked LH 400 for 3 May") as well as what its tools
returned, so the node of a tool call holds both: ``Tool call book(flight="LH 400",
date="2026-05-03") returned:`` and the result. The trace importer (a tool span's name and
arguments) and the conversation reader (an assistant message's ``tool_calls`` and the tool
message that answers it) write it the same way, with `call_statement` and `tool_call_text`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .model import parse_embedded

_NAME = re.compile(r"^[A-Za-z_][\w.-]*$")


def parse_arguments(raw: Any) -> Any:
    """A call's arguments: a JSON text (as OpenAI and OpenInference record them) parsed, anything
    else as it is."""
    if isinstance(raw, str):
        s = raw.strip()
        if s[:1] in ("{", "["):
            return parse_embedded(s, raw)
    return raw


def _value(v: Any) -> str:
    # JSON for every value: strings quoted (escapes kept), numbers, lists, objects compact.
    try:
        return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return json.dumps(str(v), ensure_ascii=False)


def call_statement(name: str, arguments: Any) -> str:
    """``name(key="value", n=2)`` for keyword arguments (an object), ``name("a", 2)`` for a list,
    ``name({"args": [...], "kwargs": {...}})`` shapes as Python wrote them, ``name("text")`` for
    arguments that are not JSON, ``name()`` for none."""
    args = parse_arguments(arguments)
    parts: list[str]
    if args is None or args == "" or args == {}:
        parts = []
    elif (
        isinstance(args, Mapping)
        and set(args) <= {"args", "kwargs"}
        and isinstance(args.get("args", []), list)
        and isinstance(args.get("kwargs", {}), Mapping)
    ):
        # Python's (*args, **kwargs), as OpenLLMetry records a decorated function's input.
        parts = [_value(a) for a in args.get("args", [])]
        parts += [_keyword(k, v) for k, v in dict(args.get("kwargs", {})).items()]
    elif isinstance(args, Mapping):
        parts = [_keyword(k, v) for k, v in args.items()]
    elif isinstance(args, Sequence) and not isinstance(args, str):
        parts = [_value(a) for a in args]
    else:
        parts = [_value(args)]
    return f"{name.strip() or 'tool'}({', '.join(parts)})"


def _keyword(key: Any, v: Any) -> str:
    k = str(key)
    return f"{k if _NAME.match(k) else _value(k)}={_value(v)}"


def tool_call_text(statement: str, result: str | None) -> str:
    """The text of a tool call's node: the call, then its result (or that none is recorded)."""
    if result is None:
        return f"Tool call {statement} was made; no result is recorded."
    if not result.strip():
        return f"Tool call {statement} returned nothing."
    return f"Tool call {statement} returned:\n{result.strip()}"


__all__ = ["call_statement", "parse_arguments", "tool_call_text"]
