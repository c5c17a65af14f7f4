"""The word-overlap demonstration "model": it answers every prompt of claim extraction and
verification by word overlap. It serves `--model demo/overlap` in-process (`lm.demo`) and the
loopback `FakeOpenAIServer` (`veritrail.testing.overlap`), so the API, `veritrail check`,
`assert_supported`, the docs' snippets and the README's commands run end to end over real HTTP
without a key, a download or the network. **Not a model**: its verdicts only say whether the
claim's content words occur in the evidence, for trying and testing the plumbing.

Rules: every sentence of an answer is one claim (no rewrites); evidence = the numbered
sentences sharing at least half of the claim's content words; the verdict is Fully Supported when
every content word of the claim occurs in the evidence, else Not Fully Supported. G2LDetect: the
tree has one leaf per sentence, a path is supported when the references hold every content word
of its leaf. Any other prompt (a pipeline's generation step): the first sentence it was given.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..records import Verdict

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "and",
        "or",
        "in",
        "on",
        "at",
        "to",
        "by",
        "was",
        "were",
        "is",
        "are",
        "it",
        "its",
        "his",
        "her",
        "their",
        "with",
        "for",
        "from",
        "as",
        "that",
        "this",
        "be",
        "been",
        "has",
        "had",
        "have",
        "which",
        "who",
    ]
)


def content_words(text: str) -> set[str]:
    """The lower-cased words of `text` that are not stop words."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _fenced(prompt: str, label: str) -> str | None:
    m = re.search(rf"<<< {label}\n(.*?)\n>>> end {label}", prompt, re.S)
    return m.group(1) if m else None


def _section(prompt: str, head: str, nxt: str) -> str:
    i = prompt.find(head)
    if i < 0:
        return ""
    j = prompt.find(nxt, i + len(head))
    return prompt[i + len(head) : j if j >= 0 else None]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


def _numbered_lines(block: str | None) -> list[tuple[int, str]]:
    return [(int(i), t) for i, t in re.findall(r"^\[(\d+)\] (.*)$", block or "", re.M)]


def _batched_extraction(request: dict[str, Any], user: str) -> str | None:
    """Claim extraction's batched stages (`method.extraction_batch`), by schema name or, when the
    endpoint got no schema, by the prompt's fences: every sentence kept whole, as one claim."""
    fmt = (request.get("response_format") or {}).get("json_schema") or {}
    name = fmt.get("name") or ""
    parts = _fenced(user, "checkable parts")
    statements = _fenced(user, "statements")
    if name == "claim_disambiguation_batch" or (not name and parts is not None):
        entries = [{"id": i, "status": "clear", "text": t} for i, t in _numbered_lines(parts)]
        return json.dumps({"sentences": entries})
    if name == "claim_decomposition_batch" or (not name and statements is not None):
        return json.dumps(
            {"sentences": [{"id": i, "parts": [t]} for i, t in _numbered_lines(statements)]}
        )
    asked = re.search(r"^Sentences to answer: ([0-9, ]+)", user, re.M)
    if name == "claim_selection_batch" or (not name and asked is not None):
        wanted = {int(i) for i in re.findall(r"\d+", asked.group(1))} if asked else set()
        given = _numbered_lines(_fenced(user, "text"))
        entries = [{"id": i, "text": t} for i, t in given if i in wanted]
        return json.dumps({"sentences": entries})
    return None


def responder(request: dict[str, Any]) -> str:
    """The assistant content for one chat-completions request (see the module docstring)."""
    msgs = request.get("messages") or []
    # A re-ask repeats the original prompt first: answer that one.
    user = next((str(m["content"]) for m in msgs if m["role"] == "user"), "")
    if user.startswith("Text to organise:"):  # G2LDetect: one leaf per sentence
        leaves = [{"text": s, "children": []} for s in _sentences(_fenced(user, "text") or "")]
        return json.dumps({"tree": {"text": "The text", "children": leaves}})
    stmt = _fenced(user, "statement")
    if stmt is not None and user.startswith("Reference documents:"):  # G2LDetect: one path
        leaf = stmt.splitlines()[-1].split(". ", 1)[-1]
        missing = content_words(leaf) - content_words(
            _section(user, "Reference documents:", "\n\nStatement")
        )
        return json.dumps({"reason": f"missing: {sorted(missing)}", "supported": not missing})
    if stmt is not None:
        return json.dumps({"parts": [stmt]})
    batched = _batched_extraction(request, user)
    if batched is not None:
        return batched
    target = _fenced(user, "target sentence")
    if target is not None:
        if "<<< checkable part" in user:
            return json.dumps({"status": "clear", "text": target, "reason": "-"})
        return json.dumps(
            {"has_verifiable_content": True, "verifiable_text": target, "reason": "-"}
        )
    shared = _shared_reply(user)
    if shared is not None:
        return json.dumps({"claims": shared})
    claim = _fenced(user, "claim") or _section(user, "Claim:\n", "\n\nSub-claims").strip()
    if user.startswith("Excerpts"):
        return json.dumps(_evidence(user, claim))
    if "Evidence:\n" not in user:
        # Any other generation (the pipelines' map, summarise and merge steps): the first
        # sentence of the first text it was given.
        given = re.search(r"<<< [^\n]*\n(.*?)\n>>> end", user, re.S)
        return (_sentences(given.group(1) if given else user) or ["Nothing."])[0]
    return json.dumps(_verdict(_section(user, "Evidence:\n", "\n\nClaim:"), claim))


def _evidence(user: str, claim: str) -> dict[str, Any]:
    """Evidence selection: the numbered sentences sharing >= half of the claim's content words.
    The summary repeats them, so a verdict over an intermediate node's evidence (which reads the
    summary, not the node) sees their words, as a real model's summary would carry them."""
    words = content_words(claim)
    picked = [
        (int(i), s)
        for i, s in re.findall(r"^\[(\d+)\] (.*)$", user, re.M)
        if words and len(words & content_words(s)) * 2 >= len(words)
    ]
    return {
        "selected_ids": [i for i, _ in picked],
        "context_ids": [],
        "summary": " ".join(s for _, s in picked),
        "missing": "",
    }


def _reads(user: str, what: str, k: int) -> list[str] | None:
    """The numbers of the excerpts or evidence items claim c`k` of a shared prompt reads (its
    own line, or the line for every claim); None when the prompt lists none."""
    for who in (f"c{k}", "every claim"):
        own = re.search(rf"^{what} for {who}: ([0-9, ]*)$", user, re.M)
        if own:
            return re.findall(r"\d+", own.group(1))
    return None


def _excerpts(user: str, labels: list[str] | None) -> str:
    """The excerpts of an evidence prompt with these labels (all of the prompt when None)."""
    if labels is None:
        return user
    found = dict(re.findall(r"^<<< excerpt (\d+)\n(.*?)\n>>> end excerpt \1$", user, re.M | re.S))
    return "\n".join(found.get(label, "") for label in labels)


def _verdict(evidence_text: str, claim: str) -> dict[str, Any]:
    """Fully Supported iff every content word of the claim occurs in the evidence."""
    absent = sorted(content_words(claim) - content_words(evidence_text))
    verdict = (Verdict.NOT_FULLY_SUPPORTED if absent else Verdict.FULLY_SUPPORTED).value
    reason = f"The evidence does not mention: {', '.join(absent)}." if absent else "All stated."
    return {"reasoning": reason, "verdict": verdict}


def _shared_reply(user: str) -> list[dict[str, Any]] | None:
    """A shared prompt's entries (docs/method.md#shared-prompts): per claim c1..cN, exactly what
    the one-claim prompt of the same step gets; None when `user` is not a shared prompt."""
    out: list[dict[str, Any]] = []
    k = 1
    while (stmt := _fenced(user, f"statement c{k}")) is not None:  # decomposition
        out.append({"claim": f"c{k}", "parts": [stmt]})
        k += 1
    if out:
        return out
    if "<<< claim c1\n" not in user:
        return None
    evidence = _section(user, "Evidence:\n", "\n\nClaims")
    items = dict(
        re.findall(r"^<<< item (\d+) [^\n]*\n(.*?)\n>>> end item \1 ", evidence, re.M | re.S)
    )
    while (claim := _fenced(user, f"claim c{k}")) is not None:
        if user.startswith("Excerpts"):  # a shared evidence prompt: the claim's own excerpts
            got = _evidence(_excerpts(user, _reads(user, "Excerpts", k)), claim)
        else:  # a shared verdict: the claim is judged on its own items only
            listed = _reads(user, "Evidence items", k) or list(items)
            got = _verdict("\n".join(items.get(i, "") for i in listed), claim)
        out.append({"claim": f"c{k}", **got})
        k += 1
    return out
