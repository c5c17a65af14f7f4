"""Whether a recorded text reached a generation's input: containment, then sentence-level fuzzy
matching with a prefilter (`Matcher`), and the counters of that work (`STATS`)."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .settings import MatchSettings
from .text import WORD, normalize, occurrences, word_count, word_pairs

STATS: dict[str, int] = {}
"""Counters of the imports in this process since it was last cleared (``fuzzy_calls``: rapidfuzz
comparisons run; ``pairs_skipped``: node × generation pairs never compared, the nodes recorded
so far that the indexes did not return (`Index`); ``prefilter_skips``: sentences of the nodes
compared that the prefilter ruled out), read by benchmarks/bench_trace.py and the tests."""


@dataclass
class Node:
    """A text the builder recorded (a root, a generation's output, the final output), with what
    the matcher, the indexes and the DAG need of it. Mutable: a generation that repeats it adds
    its span, and the builder adds its sources as it links them."""

    id: str
    text: str
    norm: str
    origin: str
    """``input``, ``document``, ``tool`` (a tool's output, or a tool call and its result),
    ``prompt``, ``generation`` or ``output``."""
    avail: tuple[int, int]
    """(time, seq) from which later generations may read it."""
    sources: list[str] = field(default_factory=list)
    spans: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    rank: int = 0
    """Creation order: candidates found through the indexes are tested in this order."""
    results: tuple[str, ...] = ()
    """A tool call's node: its result texts, normalised. The prompts of later generations hold
    the result but seldom the call as this node words it, so a result found there links the
    node (`Builder._link`)."""


PREFILTER_MIN_LEN = 4
"""Words shorter than this are not looked up by the prefilter (function words: no evidence)."""
PREFILTER_SHARE = 0.5
"""The prefilter skips a sentence when fewer than this share of its distinct distinctive words
occur anywhere in the input."""
PREFILTER_COMMON = 0.02
"""Words found in more than this share of the trace's texts (and in more than 5) are common words
(function words, the topic's vocabulary): the prefilter ignores them."""


def document_frequencies(texts: Iterable[str]) -> tuple[dict[str, int], int]:
    """(case-folded word -> how many of `texts` hold it, how many texts), words of any length."""
    df: Counter[str] = Counter()
    n = 0
    for t in texts:
        n += 1
        df.update(set(WORD.findall(t.casefold())))
    return df, n


def common_words(df: Mapping[str, int], n: int) -> frozenset[str]:
    """Words (4+ characters) in more than `PREFILTER_COMMON` of `n` texts and more than 5."""
    limit = max(5, PREFILTER_COMMON * n)
    return frozenset(w for w, c in df.items() if c > limit and len(w) >= PREFILTER_MIN_LEN)


ANCHORS = 4
"""With the prefilter, a sentence is fuzzy-compared only when the input holds `ANCHOR_HITS` of its
this many rarest word pairs (`Matcher`)."""
ANCHOR_HITS = 2


class _Sentence(NamedTuple):
    # Plain tuples: a trace of long documents holds hundreds of thousands of sentences, and a
    # small frozenset takes four times the memory of a tuple.
    text: str
    """Normalised and case-folded."""
    words: tuple[str, ...]
    """Its distinct distinctive words (empty without the prefilter)."""
    number: int
    """Its number among all sentences (`Index.fuzzy_candidates` answers with these)."""


class Matcher:
    """Containment, then sentence-level fuzzy matching, of node texts in generation inputs.

    Fuzzy matching compares each sentence with the best-aligned window of the input. The
    prefilter (`MatchSettings.prefilter`) compares a sentence only when

    * at least half of its distinctive words occur anywhere in the input (`PREFILTER_SHARE`;
      distinctive: 4+ characters and not common in the trace; a sentence without any passes),
      and
    * the input holds `ANCHOR_HITS` (2) of its `ANCHORS` (4) rarest pairs of consecutive words
      (all of them when it has fewer; rarest: by how many of the trace's texts hold each word):
      a sentence that scores 90 keeps ~90% of its characters in place, so most of its words
      intact and next to each other (docs/adapters.md, "Speed"). The share of words alone let a
      trace's common vocabulary pass more unrelated sentences the longer the trace, which made
      an import quadratic; two rare pairs are seldom shared by chance. `Index` files the
      sentences under their anchors and tells `match` which sentences the input anchors.
    """

    def __init__(
        self,
        settings: MatchSettings,
        common: frozenset[str] = frozenset(),
        df: Mapping[str, int] | None = None,
    ) -> None:
        self.s = settings
        self.common = common
        self.df: Mapping[str, int] = df or {}
        self._sentences: dict[str, list[_Sentence]] = {}
        self._numbered = 0
        self._input: tuple[str, frozenset[str], frozenset[str]] = ("", _NONE, _NONE)

    def _input_keys(self, folded_input: str) -> tuple[frozenset[str], frozenset[str]]:
        # One input is matched against every candidate in a row: tokenise it once.
        if self._input[0] is not folded_input:
            words = WORD.findall(folded_input)
            self._input = (
                folded_input,
                frozenset(w for w in words if len(w) >= PREFILTER_MIN_LEN and w not in self.common),
                frozenset(word_pairs(words) | set(words)),
            )
        return self._input[1], self._input[2]

    def input_pairs(self, folded_input: str) -> frozenset[str]:
        """The words and consecutive word pairs of a case-folded input."""
        return self._input_keys(folded_input)[1]

    def rarest_pairs(self, words: Sequence[str], k: int, *, folded: bool = False) -> list[str]:
        """The `k` rarest distinct pairs ("a b") of consecutive `words` (a single word: itself),
        rarest first: by the product of the words' document frequencies (the pair's own, were
        the words independent), then by the words (never by set order). `folded`: the words are
        case-folded already."""
        if len(words) < 2:
            return list(words[:1])
        get = self.df.get
        f = [get(w, 0) for w in words] if folded else [get(w.casefold(), 0) for w in words]
        # zip stops at the last word, which starts no pair.
        ranked = sorted(set(zip(map(operator.mul, f, f[1:]), words, words[1:], strict=False)))
        return [f"{a} {b}" for _, a, b in ranked[:k]]

    def sentences(
        self, node: Node, anchors: list[tuple[int, list[str]]] | None = None
    ) -> list[_Sentence]:
        """The node's fuzzy-matchable sentences (normalised, case-folded), with their
        distinctive words. The first call splits them; with the prefilter it appends each
        one's (number, anchor pairs) to `anchors` (they are not kept: `Index` files them)."""
        got = self._sentences.get(node.id)
        if got is not None:
            return got
        from ...method.segment import split_sentences

        got = []
        for x in split_sentences(node.text):
            if word_count(x) < self.s.min_fuzzy_words:
                continue
            folded = normalize(x).casefold()
            number = self._numbered
            self._numbered += 1
            if not self.s.prefilter:
                got.append(_Sentence(folded, (), number))
                continue
            words = WORD.findall(folded)
            got.append(_Sentence(folded, self._distinctive(words), number))
            if anchors is not None:
                anchors.append((number, self.rarest_pairs(words, ANCHORS, folded=True)))
        self._sentences[node.id] = got
        return got

    def _distinctive(self, words: Iterable[str]) -> tuple[str, ...]:
        common = self.common
        return tuple({w for w in words if len(w) >= PREFILTER_MIN_LEN and w not in common})

    def match(
        self,
        node: Node,
        raw_input: str,
        norm_input: str,
        folded_input: str,
        anchored: Container[int] = (),
    ) -> tuple[str, float, str, list[tuple[int, int]]] | None:
        """(how, score, sentences, intervals in the normalised input) or None. With the
        prefilter, `anchored` holds the numbers of the sentences whose anchors are in the input
        (`Index.fuzzy_candidates`); the others are not compared."""
        occ = occurrences(norm_input, node.norm)
        if occ:
            how = "exact" if node.text.strip() in raw_input else "normalized"
            return how, 100.0, "", occ
        if not self.s.fuzzy:
            return None
        sents = self.sentences(node)
        if not sents:
            return None
        prefilter = self.s.prefilter
        in_words = self._input_keys(folded_input)[0] if prefilter else _NONE
        best = 0.0
        hits: list[tuple[int, int]] = []
        for sent, words, number in sents:
            if prefilter and (
                number not in anchored
                or sum(w in in_words for w in words) < PREFILTER_SHARE * len(words)
            ):
                STATS["prefilter_skips"] = STATS.get("prefilter_skips", 0) + 1
                continue
            STATS["fuzzy_calls"] = STATS.get("fuzzy_calls", 0) + 1
            al = _fuzz().partial_ratio_alignment(sent, folded_input, score_cutoff=self.s.threshold)
            if al is not None and al.score >= self.s.threshold:
                best = max(best, al.score)
                hits.append((al.dest_start, al.dest_end))
        if not hits:
            return None
        # Eligible: all of the node's sentences, skipped ones included (they are not present).
        return "fuzzy", round(best, 1), f"{len(hits)}/{len(sents)}", hits


_NONE: frozenset[str] = frozenset()


def _fuzz() -> Any:
    from rapidfuzz import fuzz

    return fuzz


__all__ = [
    "ANCHORS",
    "ANCHOR_HITS",
    "PREFILTER_COMMON",
    "PREFILTER_MIN_LEN",
    "PREFILTER_SHARE",
    "STATS",
    "Matcher",
    "Node",
    "common_words",
    "document_frequencies",
]
