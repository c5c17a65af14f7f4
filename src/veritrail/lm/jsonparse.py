"""Tolerant JSON extraction from model replies (fences, prose around the object, trailing commas)."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


class JsonReplyError(ValueError):
    """No JSON value could be read from a reply."""


def _candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _FENCE.finditer(text)]
    out.append(text)
    # The first balanced {...} or [...] span, for replies that wrap JSON in prose.
    for opener, closer in (("{", "}"), ("[", "]")):
        start = text.find(opener)
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


def parse_json_reply(text: str) -> Any:
    """Return the first JSON value found in `text`; raise `JsonReplyError` if there is none."""
    for cand in _candidates(text):
        cand = cand.strip()
        if not cand:
            continue
        for attempt in (cand, _TRAILING_COMMA.sub(r"\1", cand)):
            try:
                return json.loads(attempt)
            except json.JSONDecodeError:
                continue
    raise JsonReplyError(f"no JSON value in reply: {text[:200]!r}")
