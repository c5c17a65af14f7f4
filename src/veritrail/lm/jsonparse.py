"""Tolerant JSON extraction from model replies.

Two stages. **Strict** first: a fenced block, the whole reply, or the first balanced `{...}` /
`[...]` span, read by `json.loads` (with trailing commas dropped). Only when none of these parses is
the reply **repaired** with the `json-repair` library (a well-kept, widely used repairer of the
JSON small models write: truncated objects, single quotes, unquoted keys, missing commas, prose
around the object). A repaired value is accepted only when it is an object or an array: a reply
that repairs to nothing, to a bare string (prose) or to null is still unreadable. Repair never
makes a value valid: the caller's validation (ids that must exist, labels that must match
exactly) runs on the repaired value just as on a strict one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from json_repair import repair_json

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


class JsonReplyError(ValueError):
    """No JSON value could be read from a reply."""


def _candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _FENCE.finditer(text)]
    out.append(text)
    # The first balanced {...} or [...] span, for replies that wrap JSON in prose.
    brace = text.find("{")
    for opener, closer in (("{", "}"), ("[", "]")):
        start = text.find(opener)
        if opener == "[" and brace != -1 and brace < start:
            # A list inside an object that did not parse is never the answer: the object is,
            # and the repair stage gets to read it.
            break
        while start != -1:
            depth, in_str, esc = 0, False, False
            for i in range(start, len(text)):
                ch = text[i]
                if in_str:
                    if esc:
                        esc = False
                    elif ch == "\\":
                        esc = True
                    elif ch == '"':
                        in_str = False
                elif ch == '"':
                    in_str = True
                elif ch == opener:
                    depth += 1
                elif ch == closer:
                    depth -= 1
                    if depth == 0:
                        out.append(text[start : i + 1])
                        break
            start = text.find(opener, start + 1) if not out or out[-1][0] != opener else -1
    return out


def parse_strict(text: str) -> Any:
    """The first JSON value found in `text` without repair; raise `JsonReplyError` if none."""
    for cand in _candidates(text):
        cand = cand.strip()
        if not cand:
            continue
        for attempt in (cand, _TRAILING_COMMA.sub(r"\1", cand)):
            try:
                return json.loads(attempt)
            except json.JSONDecodeError:
                continue
    raise JsonReplyError("empty reply" if not text.strip() else "no JSON value in reply")


def repair(text: str) -> dict[str, Any] | list[Any]:
    """`text` repaired into a JSON object or array by `json-repair`; `JsonReplyError` when the
    repair yields anything else (nothing, a string, a number, null)."""
    if not text.strip():
        raise JsonReplyError("empty reply")
    try:
        value = repair_json(text, return_objects=True)
    except (ValueError, RecursionError) as exc:  # the library's own failure on odd input
        raise JsonReplyError(f"no JSON value in reply (repair failed: {exc})") from None
    if isinstance(value, dict | list):
        return value
    raise JsonReplyError("no JSON value in reply")


def parse_json_reply(text: str) -> Any:
    """The JSON value in `text`: strict first, else repaired (see module docs); raise
    `JsonReplyError` if there is none."""
    try:
        return parse_strict(text)
    except JsonReplyError:
        return repair(text)
