"""Tolerant JSON extraction from model replies, which never completes a cut reply.

Three stages. **Strict** first: a fenced block, the whole reply, or the first balanced `{...}` /
`[...]` span, read by `json.loads` (with trailing commas dropped). Then the **cut check**: a reply
that does not parse strictly as a whole and whose text *ends inside a JSON value* is unreadable
(`CutReplyError`), unless a complete value stands before the unfinished one (read strictly from
the text before it). Only a reply that is not cut is **repaired** with the `json-repair` library
(a well-kept, widely used repairer of the JSON small models write: single quotes, unquoted keys,
missing commas between complete values, trailing commas, prose around the object). A repaired
value is accepted only when it is an object or an array: a reply that repairs to nothing, to a
bare string (prose) or to null is still unreadable. Repair never makes a value valid: the
caller's validation (ids that must exist, labels that must match exactly) runs on the repaired
value just as on a strict one.

**The cut rule** (`open_value_at`). The reply is scanned from its start: outside any value
(prose) only `{` and `[` matter, and each opens a value; inside a value, double-quoted strings
are followed (with backslash escapes) and `{`/`[` count one level deeper, `}`/`]` one level
shallower. The reply is cut when the text ends inside a string or with a level still open. Why:
closing a cut string or container *invents* content -- a reply stopped at `{"claims": ["It w`
repairs to the claim "It w", a reasoning stopped mid-sentence to half a reasoning -- whereas the
repairs above only change spelling around complete values. A model that ran out of tokens is
re-asked (`lm.model.Model.generate_json`, which also treats a reply that ended for length,
`finish_reason == "length"`, as unreadable whatever its text), never completed. The rule errs
on the safe side: a reply whose prose opens a `{` it never closes reads as cut, and is re-asked.
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


class CutReplyError(JsonReplyError):
    """The reply stops inside a JSON value (a string or container left open): completing it would
    invent content, so it is unreadable (see the module docs)."""


CUT_MESSAGE = "reply cut off inside its JSON value (an unfinished string, object or array)"
"""The error of a cut reply, as the re-ask shows it to the model and the claim's issues list it."""


def open_value_at(text: str) -> int | None:
    """The index where the JSON value left open at the end of `text` starts (the `{` or `[` of
    the outermost unfinished value), or None when every value in `text` is finished.

    Outside values (prose) quotes are not strings: an apostrophe or a quoted word in prose must
    not swallow the rest of the reply. See the module docs for the rule and why."""
    depth, in_str, esc, start = 0, False, False, 0
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch in "{[":
            if depth == 0:
                start = i
            depth += 1
        elif depth == 0:
            continue  # prose between values
        elif ch in "}]":
            depth -= 1
        elif ch == '"':
            in_str = True
    return start if depth > 0 else None


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


def _whole(text: str) -> Any:
    """`text` as one JSON value (trailing commas dropped), or `JsonReplyError`."""
    cand = text.strip()
    for attempt in (cand, _TRAILING_COMMA.sub(r"\1", cand)):
        try:
            return json.loads(attempt)
        except json.JSONDecodeError:
            continue
    raise JsonReplyError("no JSON value in reply")


def parse_json_reply(text: str) -> Any:
    """The JSON value in `text`: strict first, then the cut check, else repaired (see module
    docs); raise `JsonReplyError` if there is none, `CutReplyError` when the reply is cut."""
    try:
        # A reply that is one JSON value is complete whatever its strings hold (a bare string
        # "a { b" would otherwise read as cut).
        return _whole(text)
    except JsonReplyError:
        pass
    cut = open_value_at(text)
    if cut is not None:
        try:
            # Only what stands before the unfinished value: a balanced span found *inside* it
            # (a nested object, or braces inside one of its strings) is a fragment of it.
            return parse_strict(text[:cut])
        except JsonReplyError:
            raise CutReplyError(CUT_MESSAGE) from None
    try:
        return parse_strict(text)
    except JsonReplyError:
        return repair(text)
