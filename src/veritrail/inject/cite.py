"""The citation kinds of `veritrail inject`: a final output's markers changed, its content not.

A DAG whose final output carries citation markers (`citations.find_markers` with ``auto``:
``[1]``, ``[^1]``, ``【1】``, markdown links, ``(Source: name)``) resolving to its sources
(`citations.SourceIndex`) gives two kinds of variant:

* ``wrong-citation``: one sentence citing one source has its marker changed to name another
  source of the DAG, one that does not support the sentence (`does_not_support`: it holds at
  most a third of the sentence's content words, fewer than the source it cited). The sentence's
  content is untouched, so it stays supported by the source it cited: gold verdict Fully
  Supported, gold citation status *misattributed*.
* ``dropped-citation``: one cited sentence loses its markers: gold *uncited*.

The clean DAG's citations are taken as right: a sentence is assumed supported by the source it
cites. Claims are the sentences without their markers (`strip_markers`), so a claim's text is
the same in the clean DAG and in every variant that only moved its markers.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from ..citations import (
    AUTO,
    CitationRule,
    Marker,
    SourceIndex,
    find_markers,
    markers_by_sentence,
)
from ..dag import Dag
from ..method.segment import sentence_spans
from ..records import CitationStatus
from .perturb import Kind

_RULE = CitationRule(AUTO)
_LINK = re.compile(r"\[(?P<text>[^\]\n]*)\]\([^)\s]+(?:\s+\"[^\"]*\")?\)")
_NUMERIC = re.compile(r"(?P<open>\[|【)(?P<num>\d+)(?P<close>\]|】)")
_FOOTNOTE_DEF = re.compile(r"^\s*\[\^[^\]\s]+\]:")
_CONTENT_WORD = re.compile(r"[^\W\d_]{4,}")

MAX_WRONG_SUPPORT = 1 / 3
"""A source "does not support" a sentence when it holds at most this share of the sentence's
content words (and fewer than the source the sentence cited)."""

GOLD_STATUS = {
    Kind.WRONG_CITATION: CitationStatus.MISATTRIBUTED,
    Kind.DROPPED_CITATION: CitationStatus.UNCITED,
}
"""The gold citation status of each citation kind's claim."""


@dataclass(frozen=True, slots=True)
class CitedSentence:
    """A sentence of the final output with the markers that belong to it."""

    start: int
    end: int
    markers: tuple[Marker, ...]
    sources: tuple[str, ...]
    """The sources (`SourceIndex` names) its markers resolve to, in order."""


def strip_markers(sentence: str) -> str:
    """`sentence` without its citation markers (a markdown link keeps its text), spaces
    tidied: the claim a cited sentence makes."""
    markers = find_markers(sentence, _RULE)
    if not markers:
        return sentence
    out, pos = [], 0
    for m in markers:
        link = _LINK.fullmatch(m.text)
        if link is not None:
            out += [sentence[pos : m.start], link.group("text")]
        else:
            out.append(sentence[pos : m.start].rstrip(" \t"))
        pos = m.end
    out.append(sentence[pos:])
    text = "".join(out)
    text = re.sub(r"\(\s*\)", "", text)  # "(" + a removed link + ")"
    text = re.sub(r"[ \t]+([.,;:!?])", r"\1", text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def is_footnote_definition(sentence: str) -> bool:
    """A footnote's definition line (``[^2]: collection.txt``): no claim of the output."""
    return _FOOTNOTE_DEF.match(sentence) is not None


def _sources_of(marker: Marker, index: SourceIndex) -> tuple[str, ...]:
    owner = {nid: name for name, nodes in index.sources for nid in nodes}
    out: list[str] = []
    for ref in marker.refs:
        for nid in index.resolve(ref):
            name = owner.get(nid)
            if name is not None and name not in out:
                out.append(name)
    return tuple(out)


def cited_sentences(dag: Dag) -> tuple[CitedSentence, ...]:
    """The final output's sentences with at least one marker naming a source of the DAG (a
    marker opening a sentence belongs to the sentence before it, as `citations` reads it)."""
    text = dag.node(dag.terminal).text
    spans = sentence_spans(text)
    markers = find_markers(text, _RULE)
    if not spans or not markers:
        return ()
    index = SourceIndex.of(dag)
    owned = markers_by_sentence(text, spans, markers)
    out = []
    for i, ms in sorted(owned.items()):
        names: list[str] = []
        for m in ms:
            names.extend(n for n in _sources_of(m, index) if n not in names)
        if names:
            a, b = spans[i]
            out.append(CitedSentence(a, b, tuple(ms), tuple(names)))
    return tuple(out)


def has_citations(dag: Dag) -> bool:
    """Whether the final output has a marker naming one of the DAG's sources."""
    return bool(cited_sentences(dag))


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in _CONTENT_WORD.findall(text)}


def support_share(sentence: str, source_text: str) -> float:
    """The share of the sentence's content words (4+ letters) found in the source's text."""
    want = _content_words(strip_markers(sentence))
    if not want:
        return 0.0
    return len(want & _content_words(source_text)) / len(want)


def does_not_support(sentence: str, cited_text: str, other_text: str) -> bool:
    """Whether `other_text` can stand as a source that does not support `sentence` (which
    `cited_text` supports): at most `MAX_WRONG_SUPPORT` of its content words, and fewer than
    the cited source holds."""
    other = support_share(sentence, other_text)
    return other <= MAX_WRONG_SUPPORT and other < support_share(sentence, cited_text)


def _source_texts(dag: Dag, index: SourceIndex) -> dict[str, str]:
    return {name: "\n".join(dag.node(n).text for n in nodes) for name, nodes in index.sources}


def wrong_citation(dag: Dag, cs: CitedSentence, rng: random.Random) -> tuple[int, int, str] | None:
    """(start, end, new marker text) replacing the one marker of `cs` with a marker naming a
    source that does not support it; None when the sentence has several markers or sources, or
    no other source qualifies."""
    if len(cs.markers) != 1 or len(cs.sources) != 1:
        return None
    marker = cs.markers[0]
    text = dag.node(dag.terminal).text
    sentence = text[cs.start : cs.end]
    index = SourceIndex.of(dag)
    texts = _source_texts(dag, index)
    cited = cs.sources[0]
    # A marker naming each source: a number in the marker's own style, or a marker the output
    # already uses for that source (footnotes, names, links).
    spelled: dict[str, str] = {}
    numeric = _NUMERIC.fullmatch(marker.text)
    if numeric is not None:
        for k, (name, _) in enumerate(index.sources, start=1):
            spelled[name] = f"{numeric['open']}{k}{numeric['close']}"
    for m in find_markers(text, _RULE):
        names = _sources_of(m, index)
        if len(names) == 1 and names[0] not in spelled:
            spelled[names[0]] = m.text
    options = [
        name
        for name, _ in index.sources
        if name != cited
        and name in spelled
        and does_not_support(sentence, texts[cited], texts[name])
    ]
    if not options:
        return None
    return marker.start, marker.end, spelled[rng.choice(options)]


def dropped_citation(dag: Dag, cs: CitedSentence) -> list[tuple[int, int, str]]:
    """The edits removing every marker of `cs` (with the spaces before each)."""
    text = dag.node(dag.terminal).text
    edits = []
    for m in cs.markers:
        start = m.start
        while start > 0 and text[start - 1] in " \t":
            start -= 1
        edits.append((start, m.end, ""))
    return edits


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, replacement) applied (non-overlapping spans)."""
    out = text
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    return out


__all__ = [
    "GOLD_STATUS",
    "MAX_WRONG_SUPPORT",
    "CitedSentence",
    "apply_edits",
    "cited_sentences",
    "does_not_support",
    "dropped_citation",
    "has_citations",
    "is_footnote_definition",
    "strip_markers",
    "support_share",
    "wrong_citation",
]
