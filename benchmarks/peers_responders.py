"""The loopback server's answers for each tool of `bench_peers.py`, one responder per tool.

Each follows that tool's own prompt and output parser (read from its installed source: RAGAS
0.4.3's statement generator and NLI statement prompts, DeepEval 4.3.1's truths, claims, verdicts
and reason templates) and replies with JSON its parser accepts. The rule is the same for all,
that of the word-overlap demonstration model (`veritrail.lm.overlap`): every sentence is one
claim/statement, and a claim is supported when every one of its content words occurs in the
context. veritrail's own prompts are answered by `veritrail.lm.overlap.responder` itself.

`Counted` wraps a responder to count what the server wrote back (completion characters); the
request side (prompt and schema characters) is read from the server's recorded requests.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from typing import Any

from veritrail.lm.overlap import content_words
from veritrail.lm.overlap import responder as veritrail_responder
from veritrail.testing.fake_openai_server import Fault

_SENT = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """`text` cut after . ! or ? followed by space."""
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def supported(claim: str, context: str) -> bool:
    """Every content word of `claim` occurs in `context` (the overlap model's verdict rule)."""
    return content_words(claim) <= content_words(context)


def message_text(message: Any) -> str:
    """A chat message's text: its content string, or its text parts joined (the SDKs' list form)."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return "" if content is None else str(content)


def _user_text(request: dict[str, Any]) -> str:
    return "\n".join(
        message_text(m)
        for m in request.get("messages") or []
        if isinstance(m, dict) and m.get("role") != "assistant"
    )


def _between(text: str, head: str, tail: str) -> str:
    i = text.rfind(head)
    if i < 0:
        return ""
    j = text.find(tail, i + len(head))
    return text[i + len(head) : j if j >= 0 else None].strip()


def _list_of_str(text: str) -> list[str]:
    """A list of strings written as JSON or as a Python literal (how templates render lists)."""
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, list):
            return [str(v) for v in value]
    return [line.strip("- ").strip() for line in text.splitlines() if line.strip()]


# -- DeepEval 4.3.1: metrics/faithfulness/templates/*.txt ---------------------------------------


def deepeval_responder(request: dict[str, Any]) -> str:
    """Truths (the context's sentences), claims (the answer's), one verdict per claim
    (`yes` when supported, else `no` with a reason), and the reason."""
    user = _user_text(request)
    if '"truths" key' in user:
        return json.dumps({"truths": sentences(_between(user, "\nText:\n", "\n\nJSON:"))})
    if '"claims" key' in user:
        return json.dumps({"claims": sentences(_between(user, "\nAI Output:\n", "\n\nJSON:"))})
    if "'verdicts' key" in user:
        context = _between(user, "\nRetrieval Contexts:\n", "\n\nClaims:\n")
        claims = _list_of_str(_between(user, "\nClaims:\n", "\n\nJSON:"))
        verdicts = [
            {"verdict": "yes"}
            if supported(c, context)
            else {"verdict": "no", "reason": "The context states otherwise."}
            for c in claims
        ]
        return json.dumps({"verdicts": verdicts})
    if "'reason' key" in user:
        score = _between(user, "\nFaithfulness Score:\n", "\n")
        return json.dumps({"reason": f"The score is {score} because of the contradictions."})
    raise ValueError(f"unrecognised DeepEval prompt: {user[:200]!r}")


# -- RAGAS 0.4.3: metrics/collections/faithfulness (statement generator + NLI) ------------------


def ragas_responder(request: dict[str, Any]) -> str:
    """Statements (the answer's sentences) and one NLI verdict per statement (1 when supported)."""
    user = _user_text(request)
    if '"statements"' in user and '"answer"' in user and '"context"' not in user:
        payload = _last_json(user)
        answer = str(payload.get("answer", "")) if isinstance(payload, dict) else ""
        return json.dumps({"statements": sentences(answer)})
    if '"context"' in user and '"statements"' in user:
        payload = _last_json(user)
        if not isinstance(payload, dict):
            raise ValueError("RAGAS NLI prompt without its input object")
        context = str(payload.get("context", ""))
        out = [
            {
                "statement": s,
                "reason": "Stated in the context." if supported(s, context) else "Not stated.",
                "verdict": 1 if supported(s, context) else 0,
            }
            for s in (str(x) for x in payload.get("statements", []))
        ]
        return json.dumps({"statements": out})
    raise ValueError(f"unrecognised RAGAS prompt: {user[:200]!r}")


def _last_json(text: str) -> Any:
    """The last JSON object in `text` (RAGAS prompts end with the input as a JSON object)."""
    decoder = json.JSONDecoder()
    last: Any = None
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        last = value
        i = text.find("{", end)
    return last


def tally(requests: list[dict[str, Any]]) -> tuple[int, int]:
    """Characters of prompt (every message's text) and of schema (`response_format` and `tools`
    as sent) over `requests`, the server's recorded request bodies."""
    prompt = sum(len(message_text(m)) for r in requests for m in r.get("messages") or [])
    schema = sum(
        len(json.dumps(r[key]))
        for r in requests
        for key in ("response_format", "tools")
        if r.get(key)
    )
    return prompt, schema


RESPONDERS = {
    "veritrail": veritrail_responder,
    "ragas": ragas_responder,
    "deepeval": deepeval_responder,
}


class Counted:
    """A responder that also counts the characters it wrote back."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.completion_chars = 0
        self.replies = 0
        self.unrecognised = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str | Fault:
        try:
            text = self.inner(request)
        except ValueError:
            with self._lock:
                self.unrecognised += 1
            text = "{}"  # a reply the tool will reject: counted, and shown in the results
        with self._lock:
            self.completion_chars += len(text)
            self.replies += 1
        return text
