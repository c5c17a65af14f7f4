"""Where each claim, its unsupported part and its evidence lie in the DAG's texts (report
version 4's ``offsets``, docs/report.md#offsets), so another UI can highlight them.

A span is ``[start, end)`` in Unicode code points of the node's text as the DAG holds it (Python
``text[start:end]``), with ``start_utf16`` / ``end_utf16`` for JavaScript, whose strings index
UTF-16 code units (a character beyond U+FFFF, such as an emoji, counts two there).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .method.segment import Span, sentence_offsets
from .records import ClaimResult, Verdict

if TYPE_CHECKING:
    from .dag import Dag

LocatedBy = Literal["verbatim", "sentences", "none"]

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def utf16_mapper(text: str) -> Callable[[int], int]:
    """A code-point offset of `text` -> the same position in UTF-16 code units."""
    astral = [m.start() for m in _ASTRAL.finditer(text)] if not text.isascii() else []
    if not astral:
        return lambda i: i
    # Each character beyond the BMP before position i adds one code unit (a surrogate pair).
    return lambda i: i + bisect_left(astral, i)


@dataclass(frozen=True)
class _Text:
    """A node's text with its sentence spans (None: JSON) and its UTF-16 mapping."""

    text: str
    sentences: list[Span] | None
    utf16: Callable[[int], int]

    @classmethod
    def of(cls, text: str) -> _Text:
        return cls(text, sentence_offsets(text), utf16_mapper(text))

    def span(self, a: int, b: int, sentence: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "start": a,
            "end": b,
            "start_utf16": self.utf16(a),
            "end_utf16": self.utf16(b),
        }
        if sentence is not None:
            out["sentence_index"] = sentence
        return out

    def sentence(self, i: int) -> dict[str, Any] | None:
        if self.sentences is None or not 0 <= i < len(self.sentences):
            return None
        a, b = self.sentences[i]
        return self.span(a, b, i)


def _verbatim(claim: str, text: str, within: Sequence[Span]) -> Span | None:
    """Where the claim's text is in `text` as written (whitespace may differ: a line break in
    the output for a space in the claim), inside `within` when given; a final period of the
    claim may be missing in the text (a clause cut from a longer sentence)."""
    words = claim.split()
    if not words:
        return None
    tries = [words]
    if words[-1].endswith(".") and len(words[-1]) > 1:
        tries.append([*words[:-1], words[-1][:-1]])
    for ws in tries:
        pattern = re.compile(r"\s+".join(re.escape(w) for w in ws))
        for lo, hi in within or [(0, len(text))]:
            m = pattern.search(text, lo, hi)
            if m is not None:
                return m.start(), m.end()
    return None


class OffsetIndex:
    """Offsets for the claims of one report: each node is segmented once, when first asked."""

    def __init__(self, dag: Dag) -> None:
        self._dag = dag
        self._texts: dict[str, _Text] = {}
        self.terminal = self._text(dag.terminal)

    def _text(self, node_id: str) -> _Text:
        got = self._texts.get(node_id)
        if got is None:
            got = self._texts[node_id] = _Text.of(self._dag.node(node_id).text)
        return got

    def terminal_spans(self) -> list[dict[str, Any]] | None:
        """The spans of the final output's sentences (`dag.terminal_sentences`, index for
        index); None when the final output is a JSON document."""
        t = self.terminal
        return None if t.sentences is None else [t.span(a, b) for a, b in t.sentences]

    def claim(self, r: ClaimResult) -> dict[str, Any]:
        """The claim's ``offsets`` object (docs/report.md#offsets)."""
        t = self.terminal
        located_by: LocatedBy = "none"
        sentences: list[dict[str, Any]] = []
        exact: Span | None = None
        if t.sentences is not None:
            if r.claim.sentence_indices:  # extracted from these sentences of the output
                sentences = [
                    s for i in r.claim.sentence_indices if (s := t.sentence(i)) is not None
                ]
                exact = _verbatim(r.claim.text, t.text, [(s["start"], s["end"]) for s in sentences])
                located_by = "sentences"
            else:  # a claim given as text: only found as written (no guess at a rewording)
                exact = _verbatim(r.claim.text, t.text, ())
                if exact is not None:
                    a, b = exact
                    sentences = [
                        s
                        for i, (p, q) in enumerate(t.sentences)
                        if p < b and q > a and (s := t.sentence(i)) is not None
                    ]
        if exact is not None:
            located_by = "verbatim"
            owner = [s["sentence_index"] for s in sentences if s["start"] <= exact[0] < s["end"]]
            spans = [t.span(*exact, owner[0] if owner else None)]
        else:
            spans = list(sentences)  # decomposed or reworded: its source sentences stand for it
        return {
            "located_by": located_by,
            "verbatim": exact is not None,
            "spans": spans,
            "sentences": sentences,
            "unsupported": list(sentences) if r.verdict is Verdict.NOT_FULLY_SUPPORTED else [],
            "evidence": self._evidence(r),
        }

    def _evidence(self, r: ClaimResult) -> list[dict[str, Any]]:
        """Each evidence sentence of any iteration once, in the order first selected."""
        out: list[dict[str, Any]] = []
        seen: set[tuple[str, int]] = set()
        for it in r.iterations:
            for e in it.evidence:
                key = (e.node_id, e.sentence_index)
                if key in seen or e.node_id not in self._dag:
                    continue
                seen.add(key)
                got = self._text(e.node_id).sentence(e.sentence_index)
                if got is not None:
                    out.append({"node_id": e.node_id, **got})
        return out


__all__ = ["OffsetIndex", "utf16_mapper"]
