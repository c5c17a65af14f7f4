"""Trace spans → generation DAG (docs/adapters.md, "Traces").

Span parent links record who called whom, not whose output fed whom, so edges come from the
texts: `u → v` when `u`'s text is part of the input of the generation that produced `v`.

* **Roots** are the texts that enter the trace from outside: the input of the trace (its
  top-level spans) and of every chain or agent (each string leaf its own root), retrieved
  documents, and tool outputs. A chain input that contains the output of a generation that had
  finished by then is derived text, not a root; so is one that is part of a text already
  recorded (a trimmed document); a chain-input leaf shorter than `MatchSettings.min_root_words`
  words is ignored (ids, flags, one-word parameters).
* Each **LLM generation** is a node holding its output text. **Identical texts are one node**
  (after whitespace normalisation): a chain that passes an output on unchanged adds nothing.
  Spans that generate no text (prompt templates, parsers, plain chains, embeddings, kinds the
  importer does not know) never become nodes.
* **Edges**: for a generation `v`, every node available before `v` started (roots seen so far,
  generations that had ended) is tested against `v`'s input (all its messages, system ones too):
  first exact or whitespace-normalised containment on word boundaries, then sentence-level fuzzy
  matching — a sentence of `u` of at least `min_fuzzy_words` words whose best-aligned window of
  the input scores at least `threshold` (rapidfuzz ``partial_ratio``, 0–100, case-folded) —
  which catches templated or trimmed inputs (word indexes find the nodes that may match, so the
  work grows linearly with the trace, and a prefilter skips sentences too altered to match:
  `_Index`, `_Matcher`). A node found only inside the occurrence of another
  matched node is not linked (its text reached `v` through that node); when it is not an
  ancestor of that node, or when two matches overlap without nesting, the link is reported as
  ambiguous. A generation whose input matches nothing gets its whole prompt as a root.
* **Terminal**: the trace's final output (the output of the top-level span that ended last):
  the generation node it equals, or a new ``output`` node made of it, linked like a generation
  to the generation nodes it contains. Without a final output, the generation that ended last.
  Only the terminal and its ancestors are kept; stages are the longest path from a root.
* Spans whose parent ids go round in a circle are refused (`check_parents`); the node texts are
  redacted like reports (`redaction.redact_obj`) before the DAG is made, so no file written from
  it holds a secret.
"""

from __future__ import annotations

import itertools
import operator
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...dag import Dag, DagValidationError
from ...redaction import redact_obj
from .model import Kind, TraceError, TraceSpan

DEFAULT_THRESHOLD = 90.0
"""Default fuzzy-match score (see docs/adapters.md for how it was chosen)."""

STATS: dict[str, int] = {}
"""Counters of the imports in this process since it was last cleared (``fuzzy_calls``: rapidfuzz
comparisons run; ``pairs_skipped``: node × generation pairs never compared, the nodes recorded
so far that the indexes did not return (`_Index`); ``prefilter_skips``: sentences of the nodes
compared that the prefilter ruled out), read by benchmarks/bench_trace.py and the tests."""


@dataclass(frozen=True, slots=True)
class MatchSettings:
    """How texts are matched into generation inputs."""

    threshold: float = DEFAULT_THRESHOLD
    """Minimum rapidfuzz ``partial_ratio`` (0–100) for a sentence to count as present."""
    min_fuzzy_words: int = 4
    """Sentences shorter than this are never fuzzy-matched (too easy to find by chance)."""
    min_root_words: int = 2
    """Chain-input leaves with fewer words are not roots (ids, flags, one-word parameters)."""
    fuzzy: bool = True
    """False: containment only."""
    prefilter: bool = True
    """Rule out, by their distinctive words, the node × generation pairs that cannot match and
    the sentences too altered to reach the threshold (`_Matcher`; docs/adapters.md, "Speed").
    False (``--no-prefilter``) compares everything."""

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 100:
            raise ValueError("threshold must be in (0, 100]")
        if self.min_fuzzy_words < 1 or self.min_root_words < 1:
            raise ValueError("word minimums must be >= 1")


@dataclass(frozen=True, slots=True)
class Link:
    """One edge and how it was found."""

    source: str
    target: str
    how: str
    """``exact``, ``normalized`` (whitespace) or ``fuzzy``."""
    score: float
    """100 for containment; the best sentence score for fuzzy links."""
    sentences: str = ""
    """For fuzzy links: ``matched/eligible`` sentences of the source."""


@dataclass(frozen=True, slots=True)
class Ambiguity:
    """A link the importer could not decide for sure."""

    target: str
    sources: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class SpanNote:
    """What became of a span that did not simply give a node."""

    span_id: str
    name: str
    kind: str
    note: str


@dataclass(frozen=True, slots=True)
class TraceImport:
    """The result of an import: the DAG and what `--explain` shows."""

    dag: Dag
    trace_id: str
    links: tuple[Link, ...]
    ambiguous: tuple[Ambiguity, ...]
    unmatched: tuple[SpanNote, ...]
    no_text: Mapping[str, int]
    """Spans that generate no text, counted by kind (they never become nodes)."""
    unused_roots: tuple[str, ...]
    """Root candidates that no kept generation used (dropped from the DAG), as text previews."""


# -- text normalisation and matching -----------------------------------------------------------

_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    """NFKC and every whitespace run as one space, stripped: the key of identical texts."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def _occurrences(hay: str, needle: str) -> list[tuple[int, int]]:
    """Occurrences of `needle` in `hay` that start and end on word boundaries."""
    out: list[tuple[int, int]] = []
    if not needle:
        return out
    i = hay.find(needle)
    while i >= 0:
        j = i + len(needle)
        left = i == 0 or not (hay[i - 1].isalnum() and needle[0].isalnum())
        right = j == len(hay) or not (hay[j].isalnum() and needle[-1].isalnum())
        if left and right:
            out.append((i, j))
        i = hay.find(needle, i + 1)
    return out


def _inside(a: int, b: int, c: int, d: int, loose: bool) -> bool:
    """Whether [a, b) lies in [c, d); a fuzzy alignment may spill over by a few characters, so
    `loose` accepts one that is at least 80% inside."""
    if a >= c and b <= d:
        return True
    return loose and b > a and (min(b, d) - max(a, c)) >= 0.8 * (b - a)


def _words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def _preview(text: str, n: int = 60) -> str:
    s = normalize(text)
    return s if len(s) <= n else s[: n - 1] + "…"


@dataclass
class _Node:
    id: str
    text: str
    norm: str
    origin: str
    """``input``, ``document``, ``tool``, ``prompt``, ``generation`` or ``output``."""
    avail: tuple[int, int]
    """(time, seq) from which later generations may read it."""
    sources: list[str] = field(default_factory=list)
    spans: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    rank: int = 0
    """Creation order: candidates found through the indexes are tested in this order."""


_WORD = re.compile(r"[^\W_]+")
"""Words for the prefilter: runs of the characters `str.isalnum` accepts, the same notion of a
word boundary `_occurrences` uses, so a contained text's words are always words of the input."""
PREFILTER_MIN_LEN = 4
"""Words shorter than this are not looked up by the prefilter (function words: no evidence)."""
PREFILTER_SHARE = 0.5
"""The prefilter skips a sentence when fewer than this share of its distinct distinctive words
occur anywhere in the input."""
PREFILTER_COMMON = 0.02
"""Words found in more than this share of the trace's texts (and in more than 5) are common words
(function words, the topic's vocabulary): the prefilter ignores them."""


def _document_frequencies(texts: Iterable[str]) -> tuple[dict[str, int], int]:
    """(case-folded word -> how many of `texts` hold it, how many texts), words of any length."""
    df: Counter[str] = Counter()
    n = 0
    for t in texts:
        n += 1
        df.update(set(_WORD.findall(t.casefold())))
    return df, n


def _common_words(df: Mapping[str, int], n: int) -> frozenset[str]:
    """Words (4+ characters) in more than `PREFILTER_COMMON` of `n` texts and more than 5."""
    limit = max(5, PREFILTER_COMMON * n)
    return frozenset(w for w, c in df.items() if c > limit and len(w) >= PREFILTER_MIN_LEN)


ANCHORS = 4
"""With the prefilter, a sentence is fuzzy-compared only when the input holds `ANCHOR_HITS` of its
this many rarest word pairs (`_Matcher`)."""
ANCHOR_HITS = 2


def _pairs(words: Sequence[str]) -> set[str]:
    """Consecutive word pairs ("a b") of a word sequence; a single word stands for itself."""
    if len(words) < 2:
        return set(words)
    return {f"{a} {b}" for a, b in itertools.pairwise(words)}


def _keys(text: str) -> set[str]:
    """What `text` can be looked up by: its words and its consecutive word pairs."""
    words = _WORD.findall(text)
    return set(words) | _pairs(words)


class _Sentence(NamedTuple):
    # Plain tuples: a trace of long documents holds hundreds of thousands of sentences, and a
    # small frozenset takes four times the memory of a tuple.
    text: str
    """Normalised and case-folded."""
    words: tuple[str, ...]
    """Its distinct distinctive words (empty without the prefilter)."""
    number: int
    """Its number among all sentences (`_Index.fuzzy_candidates` answers with these)."""


class _Matcher:
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
      an import quadratic; two rare pairs are seldom shared by chance. `_Index` files the
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
            words = _WORD.findall(folded_input)
            self._input = (
                folded_input,
                frozenset(w for w in words if len(w) >= PREFILTER_MIN_LEN and w not in self.common),
                frozenset(_pairs(words) | set(words)),
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
        self, node: _Node, anchors: list[tuple[int, list[str]]] | None = None
    ) -> list[_Sentence]:
        """The node's fuzzy-matchable sentences (normalised, case-folded), with their
        distinctive words. The first call splits them; with the prefilter it appends each
        one's (number, anchor pairs) to `anchors` (they are not kept: `_Index` files them)."""
        got = self._sentences.get(node.id)
        if got is not None:
            return got
        from ...method.segment import split_sentences

        got = []
        for x in split_sentences(node.text):
            if _words(x) < self.s.min_fuzzy_words:
                continue
            folded = normalize(x).casefold()
            number = self._numbered
            self._numbered += 1
            if not self.s.prefilter:
                got.append(_Sentence(folded, (), number))
                continue
            words = _WORD.findall(folded)
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
        node: _Node,
        raw_input: str,
        norm_input: str,
        folded_input: str,
        anchored: Container[int] = (),
    ) -> tuple[str, float, str, list[tuple[int, int]]] | None:
        """(how, score, sentences, intervals in the normalised input) or None. With the
        prefilter, `anchored` holds the numbers of the sentences whose anchors are in the input
        (`_Index.fuzzy_candidates`); the others are not compared."""
        occ = _occurrences(norm_input, node.norm)
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


class _Index:
    """Indexes over the node texts, so that a text meets only the nodes it may match.

    Testing every node against every later generation (and every new root against every node)
    made an import quadratic: 110 s for 10,000 generations in 100,000 spans (issue 29). Each
    index answers one question with a few dictionary look-ups per word of the text; the
    containment ones rule out only what cannot match (every answer is then checked in full as
    before):

    * **May be contained in a text** (`contained_in`): a text that occurs in another on word
      boundaries brings its words (`_WORD`) and its pairs of consecutive words along, so each
      node is filed under one of them, its rarest pair (a one-word text: its word), and a text
      looks up its own words and pairs.
    * **May contain a text** (`containing`): every node is filed under every word it has; the
      text's rarest word's list holds every node that can contain it.
    * **May fuzzy-match an input** (`fuzzy_candidates`, with the prefilter): each sentence is
      filed under its anchor pairs (`_Matcher`); the input's pairs count them.
    """

    def __init__(self, matcher: _Matcher) -> None:
        self.matcher = matcher
        self.fuzzy = matcher.s.fuzzy and matcher.s.prefilter
        self.key: dict[str, list[str]] = {}
        self.wordless: list[str] = []
        self.every: dict[str, list[str]] = {}
        self.anchors: dict[str, int | list[int]] = {}
        """Anchor pair -> the number of the sentence filed under it, or a list of them."""
        self.sentence_node: list[str] = []
        """The node of each sentence, by number."""
        self.sentence_need: list[int] = []
        """How many of each sentence's anchors an input must hold, by number."""
        self.unanchored: set[int] = set()
        """Sentences without a word pair to file them under (no word `_WORD` sees)."""

    def add(self, node: _Node) -> None:
        """File a new node in every index."""
        words = _WORD.findall(node.norm)
        if words:
            key = self.matcher.rarest_pairs(words, 1)[0]
            self.key.setdefault(key, []).append(node.id)
        else:
            self.wordless.append(node.id)
        for w in set(words):
            self.every.setdefault(w, []).append(node.id)
        if not self.fuzzy:
            return
        filed: list[tuple[int, list[str]]] = []
        self.matcher.sentences(node, filed)
        anchors = self.anchors
        for number, pairs in filed:
            # Every node is filed when it is recorded, so sentences come here in number order.
            if number != len(self.sentence_node):  # pragma: no cover - a broken invariant
                raise RuntimeError(f"sentence {number} filed out of order")
            self.sentence_node.append(node.id)
            self.sentence_need.append(min(ANCHOR_HITS, len(pairs)))
            if not pairs:  # no word of letters or digits ("___ ___"): compared with every input
                self.unanchored.add(number)
            for a in pairs:
                # Most pairs belong to one sentence: its number alone, a list from the second.
                got = anchors.get(a)
                if got is None:
                    anchors[a] = number
                elif isinstance(got, int):
                    anchors[a] = [got, number]
                else:
                    got.append(number)

    def contained_in(self, norm_text: str) -> list[str]:
        """Ids of the nodes whose text may occur in `norm_text` (a normalised text)."""
        key = self.key
        out = list(self.wordless)
        for k in _keys(norm_text):
            got = key.get(k)
            if got:
                out += got
        return out

    def containing(self, norm_text: str) -> list[str] | None:
        """Ids of the nodes whose text may contain `norm_text`; None: any node may (the text has
        no word)."""
        lists = [self.every.get(w, []) for w in set(_WORD.findall(norm_text))]
        return min(lists, key=len) if lists else None

    def fuzzy_candidates(self, folded_input: str) -> set[int]:
        """Numbers of the sentences whose anchors this input holds (`ANCHOR_HITS` of them),
        counted in one pass over the input's pairs."""
        anchors = self.anchors
        hits: Counter[int] = Counter()
        for k in self.matcher.input_pairs(folded_input):
            got = anchors.get(k)
            if got is None:
                continue
            if isinstance(got, int):
                hits[got] += 1
            else:
                hits.update(got)
        need = self.sentence_need
        return {number for number, n in hits.items() if n >= need[number]} | self.unanchored


_NONE: frozenset[str] = frozenset()


def _rank(node: _Node) -> int:
    return node.rank


def _fuzz() -> Any:
    from rapidfuzz import fuzz

    return fuzz


# -- the builder ---------------------------------------------------------------------------------


def select_trace(spans: Sequence[TraceSpan], trace_id: str | None) -> tuple[str, list[TraceSpan]]:
    """The spans of one trace: `trace_id`, or the only trace that has an LLM span."""
    by_trace: dict[str, list[TraceSpan]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    if trace_id is not None:
        tid = trace_id if trace_id in by_trace else trace_id.lower().removeprefix("0x")
        if tid not in by_trace:
            raise TraceError(
                f"no trace {trace_id!r} in the file (traces: {', '.join(sorted(by_trace)[:10])})"
            )
        return tid, by_trace[tid]
    with_llm = [t for t, ss in by_trace.items() if any(s.kind is Kind.LLM for s in ss)]
    if not with_llm:
        raise TraceError(
            f"the file holds {len(spans)} spans and no LLM generation: nothing to build a DAG from"
        )
    if len(with_llm) > 1:
        raise TraceError(
            f"the file holds {len(with_llm)} traces with generations ("
            + ", ".join(sorted(with_llm)[:10])
            + "): choose one with --trace-id"
        )
    return with_llm[0], by_trace[with_llm[0]]


class _Builder:
    def __init__(self, spans: list[TraceSpan], settings: MatchSettings) -> None:
        self.spans = spans
        self.settings = settings
        df, n_texts = _document_frequencies(
            t for s in spans for t in (*s.inputs, *s.outputs, *s.documents)
        )
        self.matcher = _Matcher(
            settings,
            _common_words(df, n_texts) if settings.fuzzy and settings.prefilter else frozenset(),
            df,
        )
        self.index = _Index(self.matcher)
        self.nodes: dict[str, _Node] = {}
        self.by_norm: dict[str, str] = {}
        self.counters: dict[str, int] = {}
        self.links: list[Link] = []
        self.ambiguous: list[Ambiguity] = []
        self.notes: list[SpanNote] = []
        self.no_text: dict[str, int] = {}
        self.gen_of_span: dict[str, str] = {}
        self.gen_ids: list[str] = []

    def _new_id(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0) + 1
        self.counters[prefix] = n
        return f"{prefix}-{n}"

    def _note(self, s: TraceSpan, note: str) -> None:
        self.notes.append(SpanNote(s.id, s.name, str(s.kind), note))

    def _record(self, node: _Node) -> None:
        """Add a new node: its id, its text's key, the indexes."""
        node.rank = len(self.nodes)
        self.nodes[node.id] = node
        self.by_norm[node.norm] = node.id
        self.index.add(node)

    def _add_root(
        self, text: str, origin: str, prefix: str, s: TraceSpan, at: tuple[int, int]
    ) -> None:
        norm = normalize(text)
        if not norm:
            return
        if norm in self.by_norm:
            return  # identical texts are one node
        nodes = self.nodes
        # Derived text: a text that carries the output of a generation that had finished.
        for nid in self.index.contained_in(norm):
            n = nodes[nid]
            if n.origin == "generation" and n.avail[0] <= at[0] and _occurrences(norm, n.norm):
                return
        # Part of a text already recorded (a trimmed document, one field of an input): not new
        # text from outside; generations that read it are matched to the whole text. Only
        # inputs are checked: a document or a tool output is text from outside as it is.
        if origin == "input":
            hosts = self.index.containing(norm)
            for n in nodes.values() if hosts is None else (nodes[h] for h in hosts):
                if n.avail[0] <= at[0] and _occurrences(n.norm, norm):
                    return
        nid = self._new_id(prefix)
        self._record(_Node(nid, text.strip(), norm, origin, at, spans=[s.id], names=[s.name]))

    def _candidates(
        self, readable: Callable[[_Node], bool], norm_input: str, folded: str
    ) -> tuple[list[_Node], set[int]]:
        """The nodes `readable` accepts that may match this input, in creation order (every one
        without the prefilter, else those `_Index` finds), and the sentences the input anchors."""
        if not self.settings.prefilter:
            return [n for n in self.nodes.values() if readable(n)], set()
        index = self.index
        ids = set(index.contained_in(norm_input))
        anchored = index.fuzzy_candidates(folded) if index.fuzzy else set()
        ids.update(index.sentence_node[number] for number in anchored)
        nodes = self.nodes
        out = sorted((n for n in map(nodes.__getitem__, ids) if readable(n)), key=_rank)
        STATS["pairs_skipped"] = STATS.get("pairs_skipped", 0) + len(nodes) - len(out)
        return out, anchored

    def _link(
        self, target_span: TraceSpan, raw_input: str, readable: Callable[[_Node], bool]
    ) -> tuple[list[str], list[Link]]:
        norm_input = normalize(raw_input)
        folded = norm_input.casefold()
        found: dict[str, tuple[str, float, str, list[tuple[int, int]]]] = {}
        candidates, anchored = self._candidates(readable, norm_input, folded)
        for n in candidates:
            m = self.matcher.match(n, raw_input, norm_input, folded, anchored)
            if m is not None:
                found[n.id] = m
        # A node found only inside another matched node's occurrence reached the generation
        # through that node: no direct edge.
        keep: list[str] = []
        subsumed: dict[str, str] = {}
        for nid, (how, _, _, iv) in found.items():
            host = None
            for oid, (ohow, _, _, oiv) in found.items():
                if oid == nid or ohow == "fuzzy":
                    continue
                if all(any(_inside(a, b, c, d, how == "fuzzy") for c, d in oiv) for a, b in iv):
                    host = oid
                    break
            if host is None:
                keep.append(nid)
            else:
                subsumed[nid] = host
        links = [Link(nid, "", found[nid][0], found[nid][1], found[nid][2]) for nid in keep]
        for nid, host in subsumed.items():
            if not self._derives(host, nid):
                self.ambiguous.append(
                    Ambiguity(
                        f"span {target_span.name} ({target_span.id})",
                        (nid, host),
                        f"{nid}'s text appears in the input only inside {host}'s, which does "
                        f"not derive from it; linked to {host} only",
                    )
                )
        for i, a in enumerate(keep):
            for b in keep[i + 1 :]:
                if any(
                    x < d and c < y and not (x >= c and y <= d) and not (c >= x and d <= y)
                    for x, y in found[a][3]
                    for c, d in found[b][3]
                ):
                    self.ambiguous.append(
                        Ambiguity(
                            f"span {target_span.name} ({target_span.id})",
                            (a, b),
                            "their matches overlap in the input; both linked",
                        )
                    )
        return keep, links

    def _derives(self, nid: str, ancestor: str) -> bool:
        """Whether `ancestor` is an ancestor of `nid` (a direct source is checked first: the
        usual case, and a walk of the whole ancestry per link would be quadratic)."""
        sources = self.nodes[nid].sources
        if ancestor in sources:
            return True
        seen = {nid}
        stack = list(sources)
        while stack:
            cur = stack.pop()
            if cur == ancestor:
                return True
            if cur not in seen:
                seen.add(cur)
                stack.extend(self.nodes[cur].sources)
        return False

    def _ancestors(self, nid: str) -> set[str]:
        seen = {nid}
        stack = [nid]
        while stack:
            for s in self.nodes[stack.pop()].sources:
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return seen

    def _generation(self, s: TraceSpan) -> None:
        out_text = "\n\n".join(t.strip() for t in s.outputs if t.strip())
        if not out_text:
            self._note(s, "LLM span with no output text: no node")
            return
        raw_input = "\n\n".join(s.inputs)
        start = (s.start, s.seq)

        def readable(n: _Node) -> bool:
            # Finished before this generation started (texts from outside: by then).
            return n.avail < start or (n.origin != "generation" and n.avail[0] <= s.start)

        keep, links = self._link(s, raw_input, readable)
        if not keep:
            if not raw_input.strip():
                self._note(s, "LLM span without input text and nothing to link: skipped")
                return
            self._add_root(raw_input, "prompt", "prompt", s, (s.start, -1))
            pid = self.by_norm.get(normalize(raw_input))
            if pid is None:  # pragma: no cover - _add_root refused it as derived text
                self._note(s, "LLM input matched no recorded text: skipped")
                return
            self._note(s, f"its input matched no recorded text: the whole prompt became root {pid}")
            keep, links = [pid], [Link(pid, "", "exact", 100.0)]
        norm = normalize(out_text)
        existing = self.by_norm.get(norm)
        if existing is not None:
            node = self.nodes[existing]
            if node.origin != "generation":
                self._note(s, f"its output repeats {node.origin} text {existing}: no new node")
                self.gen_of_span[s.id] = existing
                return
            self._note(s, f"its output repeats generation {existing}: merged into it")
        else:
            nid = self._new_id("gen")
            node = _Node(nid, out_text, norm, "generation", (s.end, s.seq))
            self._record(node)
            self.gen_ids.append(nid)
        node.spans.append(s.id)
        node.names.append(s.name)
        for src in keep:
            if src not in node.sources and src != node.id:
                node.sources.append(src)
        self.links += [Link(k.source, node.id, k.how, k.score, k.sentences) for k in links]
        self.gen_of_span[s.id] = node.id

    def build(self) -> tuple[str, list[str]]:
        """Process the spans in time order; returns (terminal id, top-level span ids)."""
        ids = {s.id for s in self.spans}
        top = [s for s in self.spans if s.parent_id is None or s.parent_id not in ids]
        top_ids = {s.id for s in top}
        # (time, phase, seq): ends before starts at the same instant, so a generation that ended
        # when a chain started is there for the derived-text check.
        events: list[tuple[int, int, int, str, TraceSpan]] = []
        for s in self.spans:
            events.append((s.start, 1, s.seq, "start", s))
            events.append((s.end, 0, s.seq, "end", s))
        events.sort(key=lambda e: (e[0], e[1], e[2]))
        for t, _, _, what, s in events:
            if what == "start":
                if s.kind in (Kind.CHAIN, Kind.AGENT) or (
                    s.id in top_ids and s.kind is not Kind.LLM
                ):
                    for leaf in s.inputs:
                        if s.id in top_ids or _words(leaf) >= self.settings.min_root_words:
                            self._add_root(leaf, "input", "input", s, (t, -1))
                continue
            if s.kind is Kind.LLM:
                self._generation(s)
            elif s.kind in (Kind.RETRIEVER, Kind.RERANKER):
                for d in s.documents:
                    self._add_root(d, "document", "doc", s, (t, s.seq))
            elif s.kind is Kind.TOOL:
                for o in s.outputs:
                    self._add_root(o, "tool", "tool", s, (t, s.seq))
            elif s.kind not in (Kind.CHAIN, Kind.AGENT):
                self.no_text[str(s.kind)] = self.no_text.get(str(s.kind), 0) + 1
        gens = [n for n in self.nodes.values() if n.origin == "generation"]
        if not gens:
            raise TraceError("the trace has no LLM generation with output text: no DAG")
        return self._terminal(top), [s.id for s in top]

    def _terminal(self, top: list[TraceSpan]) -> str:
        last = max(top, key=lambda s: (s.end, s.seq))
        leaves = [t for t in last.outputs if normalize(t)]
        gen_ids = set(self.gen_ids)
        if not leaves:
            tid = max((self.nodes[g] for g in self.gen_ids), key=lambda n: n.avail).id
            self.notes.append(
                SpanNote(
                    last.id,
                    last.name,
                    str(last.kind),
                    f"no final output: terminal is the last generation {tid}",
                )
            )
            return tid
        hits = [self.by_norm.get(normalize(t)) for t in leaves]
        gen_hits = list(dict.fromkeys(h for h in hits if h in gen_ids))
        whole = "\n\n".join(t.strip() for t in leaves)
        if len(gen_hits) == 1 and all(h is not None for h in hits):
            return gen_hits[0]
        existing = self.by_norm.get(normalize(whole))
        if existing in gen_ids:
            return str(existing)
        # The final output is text of its own (joined, post-processed): a node linked like a
        # generation to the generation nodes it contains.
        pseudo = TraceSpan(
            last.id, None, last.trace_id, last.name, Kind.LLM, last.end, last.end, last.seq + 1
        )
        keep, links = self._link(pseudo, whole, lambda n: n.origin == "generation")
        if not keep:
            if existing is not None:
                raise TraceError(
                    f"the trace's final output is the {self.nodes[existing].origin} text {existing}, "
                    "not derived from any LLM generation"
                )
            raise TraceError(
                f"the trace's final output ({_preview(whole)!r}) contains no LLM generation's "
                "text: cannot tell which generation produced it"
            )
        nid = "output"
        node = _Node(nid, whole, normalize(whole), "output", (last.end, last.seq + 1), list(keep))
        node.spans.append(last.id)
        node.names.append(last.name)
        self._record(node)
        self.links += [Link(k.source, nid, k.how, k.score, k.sentences) for k in links]
        return nid


def check_parents(spans: Sequence[TraceSpan]) -> None:
    """`TraceError` when the parent ids of `spans` (one trace) go round in a circle: a span that
    is its own parent, or a cycle. A trace has a tree of spans; a loop means the ids are
    corrupt, and leaves no top-level span to take the final output from. Linear: each span is
    walked once."""
    parent = {s.id: s.parent_id for s in spans}
    name = {s.id: s.name for s in spans}
    done: set[str] = set()
    for s in spans:
        path: list[str] = []
        on_path: set[str] = set()
        cur: str | None = s.id
        while cur is not None and cur in parent and cur not in done:
            if cur in on_path:
                loop = path[path.index(cur) :]
                if len(loop) == 1:
                    raise TraceError(f"span {name[cur]!r:.60} ({cur}) is its own parent")
                shown = " -> ".join(loop[:10]) + (" -> ..." if len(loop) > 10 else "")
                raise TraceError(
                    f"the spans' parent ids form a cycle of {len(loop)} spans "
                    f"(each the parent of the one before): {shown} -> {cur}"
                )
            path.append(cur)
            on_path.add(cur)
            cur = parent[cur]
        done.update(path)


def _check_encodable(records: Sequence[Mapping[str, Any]], nodes: Mapping[str, _Node]) -> None:
    """`TraceError` when a node's text cannot be written as UTF-8: a lone surrogate, which a
    trace file cannot hold (`veritrail.textio` refuses it) but a JSON text in an attribute
    (refused by `parse_embedded`) or a span built in Python can."""
    for r in records:
        text = r["text"]
        if text.isascii():
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            n = nodes[r["id"]]
            raise TraceError(
                f"the text of node {n.id} (span {n.names[0]!r:.60}) holds a lone surrogate "
                f"U+{ord(text[exc.start]):04X}: half of a UTF-16 pair, not a character"
            ) from None


def build_dag(
    spans: Sequence[TraceSpan],
    *,
    trace_id: str | None = None,
    settings: MatchSettings | None = None,
    meta: Mapping[str, Any] | None = None,
) -> TraceImport:
    """Build the generation DAG of one trace (see the module docstring for every rule).

    Raises `TraceError` with the reason when the spans give no valid DAG (no generation, several
    traces and no `trace_id`, a final output no generation leads to, a cycle, ...).
    """
    cfg = settings or MatchSettings()
    tid, mine = select_trace(spans, trace_id)
    check_parents(mine)
    b = _Builder(list(mine), cfg)
    terminal, _top = b.build()
    keep = b._ancestors(terminal)
    for s in mine:
        gid = b.gen_of_span.get(s.id)
        if s.kind is Kind.LLM and gid is not None and gid not in keep:
            b.notes.append(
                SpanNote(
                    s.id,
                    s.name,
                    str(s.kind),
                    f"generation {gid} does not lead to the final output: dropped",
                )
            )
    unused = tuple(
        f"{n.id}: {_preview(n.text)}"
        for n in b.nodes.values()
        if n.id not in keep and n.origin != "generation"
    )
    records = []
    for n in b.nodes.values():
        if n.id in keep:
            records.append({"id": n.id, "text": n.text, "sources": list(n.sources)})
    _check_encodable(records, b.nodes)
    info: dict[str, Any] = {
        "source": "trace",
        "trace_id": tid,
        "matching": {
            "containment": "exact, then whitespace-normalised, on word boundaries",
            "fuzzy": "rapidfuzz partial_ratio per sentence" if cfg.fuzzy else "off",
            "threshold": cfg.threshold,
            "min_fuzzy_words": cfg.min_fuzzy_words,
            "prefilter": (
                f"distinctive-word share >= {PREFILTER_SHARE}"
                if cfg.fuzzy and cfg.prefilter
                else "off"
            ),
        },
        "original_spans": {n.id: list(n.spans) for n in b.nodes.values() if n.id in keep},
        **(dict(meta) if meta else {}),
    }
    # The DAG holds the pipeline's texts, which may hold secrets (a key in a prompt, a URL with
    # a password in a tool output): the same redaction as reports, so no file written from it
    # holds them (docs/adapters.md, "Secrets").
    texts = redact_obj([r["text"] for r in records])
    for r, text in zip(records, texts, strict=True):
        r["text"] = text
    info = redact_obj(info)
    try:
        dag = Dag.from_records(records, info)
    except DagValidationError as exc:
        raise TraceError(
            "the trace gives no valid DAG: " + "; ".join(str(p) for p in exc.problems)
        ) from exc
    names: dict[int, set[str]] = {}
    label = {
        "input": "inputs",
        "document": "retrieved documents",
        "tool": "tool outputs",
        "prompt": "prompts",
        "output": "final output",
    }
    for node in dag:
        n = b.nodes[node.id]
        names.setdefault(node.stage, set()).update(
            n.names if n.origin == "generation" else [label[n.origin]]
        )
    dag.meta["stage_names"] = redact_obj(
        {str(k): ", ".join(sorted(v)) for k, v in sorted(names.items())}
    )
    kept_links = tuple(
        lk for lk in b.links if lk.target in keep and lk.source in dag.node(lk.target).sources
    )
    return TraceImport(
        dag=dag,
        trace_id=tid,
        links=kept_links,
        ambiguous=tuple(b.ambiguous),
        unmatched=tuple(b.notes),
        no_text=dict(sorted(b.no_text.items())),
        unused_roots=unused,
    )


__all__ = [
    "DEFAULT_THRESHOLD",
    "Ambiguity",
    "Link",
    "MatchSettings",
    "SpanNote",
    "TraceImport",
    "build_dag",
    "check_parents",
    "normalize",
    "select_trace",
]
