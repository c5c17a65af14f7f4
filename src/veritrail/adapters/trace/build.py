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
  which catches templated or trimmed inputs (a word prefilter skips pairs and sentences that
  cannot, or are too altered to, match: `_Matcher`). A node found only inside the occurrence of another
  matched node is not linked (its text reached `v` through that node); when it is not an
  ancestor of that node, or when two matches overlap without nesting, the link is reported as
  ambiguous. A generation whose input matches nothing gets its whole prompt as a root.
* **Terminal**: the trace's final output (the output of the top-level span that ended last):
  the generation node it equals, or a new ``output`` node made of it, linked like a generation
  to the generation nodes it contains. Without a final output, the generation that ended last.
  Only the terminal and its ancestors are kept; stages are the longest path from a root.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...dag import Dag, DagValidationError
from .model import Kind, TraceError, TraceSpan

DEFAULT_THRESHOLD = 90.0
"""Default fuzzy-match score (see docs/adapters.md for how it was chosen)."""

STATS: dict[str, int] = {}
"""Counters of the imports in this process since it was last cleared (``fuzzy_calls``: rapidfuzz
comparisons run; ``pairs_skipped``: node × generation pairs the word index ruled out before any
comparison; ``prefilter_skips``: sentences of the remaining nodes the word share ruled out), read
by benchmarks/bench_trace.py."""


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


def _common_words(texts: Iterable[str]) -> frozenset[str]:
    """Words (4+ characters) in more than `PREFILTER_COMMON` of `texts` and more than 5 of them."""
    df: dict[str, int] = {}
    n = 0
    for t in texts:
        n += 1
        for w in {w for w in _WORD.findall(t.casefold()) if len(w) >= PREFILTER_MIN_LEN}:
            df[w] = df.get(w, 0) + 1
    limit = max(5, PREFILTER_COMMON * n)
    return frozenset(w for w, c in df.items() if c > limit)


class _Matcher:
    """Containment, then sentence-level fuzzy matching, of node texts in generation inputs.

    Fuzzy matching compares each sentence with the best-aligned window of the input, for every
    node against every generation: what an import costs. The prefilter (`MatchSettings.prefilter`)
    skips a sentence when fewer than half of its distinctive words occur anywhere in the input
    (`PREFILTER_SHARE`; distinctive: 4+ characters and not common in the trace): a sentence that
    scores 90 keeps ~90% of its characters in place, so most of its words intact
    (docs/adapters.md, "Speed"). Sentences without distinctive words are always compared.

    An inverted index (distinctive word → nodes) counts, for each generation, how many of each
    node's distinctive words its input holds, and skips the nodes below what any match needs:
    all of its words for containment (a contained text's words are words of the input), half of
    some sentence's for the fuzzy prefilter. Nodes without distinctive words are always tested.
    Skipping them changes nothing but the time.
    """

    def __init__(self, settings: MatchSettings, common: frozenset[str] = frozenset()) -> None:
        self.s = settings
        self.common = common
        self._sentences: dict[str, list[tuple[str, frozenset[str]]]] = {}
        self._index: dict[str, list[str]] = {}
        self._need: dict[str, int] = {}
        self._always: set[str] = set()
        self._indexed: set[str] = set()
        self._input: tuple[str, frozenset[str]] = ("", frozenset())

    def _input_words(self, folded_input: str) -> frozenset[str]:
        # One input is matched against every candidate in a row: tokenise it once.
        if self._input[0] is not folded_input:
            self._input = (folded_input, self._distinctive(folded_input))
        return self._input[1]

    def _distinctive(self, folded: str) -> frozenset[str]:
        return frozenset(
            w for w in _WORD.findall(folded) if len(w) >= PREFILTER_MIN_LEN and w not in self.common
        )

    def sentences(self, node: _Node) -> list[tuple[str, frozenset[str]]]:
        """The node's fuzzy-matchable sentences (normalised, case-folded), with their words."""
        got = self._sentences.get(node.id)
        if got is None:
            from ...method.segment import split_sentences

            got = []
            for x in split_sentences(node.text):
                if _words(x) >= self.s.min_fuzzy_words:
                    folded = normalize(x).casefold()
                    got.append((folded, self._distinctive(folded) if self.s.prefilter else _NONE))
            self._sentences[node.id] = got
        return got

    def _index_node(self, node: _Node) -> None:
        self._indexed.add(node.id)
        words = self._distinctive(node.norm.casefold())
        # The fewest of its words the input must hold for the node to match at all: all of them
        # for containment, half of some sentence's for the fuzzy prefilter.
        need = len(words)
        for _, sentence_words in self.sentences(node) if self.s.fuzzy else ():
            need = min(need, math.ceil(PREFILTER_SHARE * len(sentence_words)))
        if need == 0:
            self._always.add(node.id)
            return
        self._need[node.id] = need
        for w in words:
            self._index.setdefault(w, []).append(node.id)

    def candidates(self, nodes: Iterable[_Node], folded_input: str) -> set[str] | None:
        """Ids of the nodes that may match this input at all (None: no prefilter, all may)."""
        if not self.s.prefilter:
            return None
        for n in nodes:
            if n.id not in self._indexed:
                self._index_node(n)
        index = self._index
        shared = Counter(
            itertools.chain.from_iterable(
                index[w] for w in self._input_words(folded_input) if w in index
            )
        )
        need = self._need
        return self._always | {nid for nid, c in shared.items() if c >= need[nid]}

    def match(
        self, node: _Node, raw_input: str, norm_input: str, folded_input: str
    ) -> tuple[str, float, str, list[tuple[int, int]]] | None:
        """(how, score, sentences, intervals in the normalised input) or None."""
        occ = _occurrences(norm_input, node.norm)
        if occ:
            how = "exact" if node.text.strip() in raw_input else "normalized"
            return how, 100.0, "", occ
        if not self.s.fuzzy:
            return None
        sents = self.sentences(node)
        if not sents:
            return None
        in_words = self._input_words(folded_input) if self.s.prefilter else _NONE
        best = 0.0
        hits: list[tuple[int, int]] = []
        for sent, words in sents:
            if words and len(words & in_words) < PREFILTER_SHARE * len(words):
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
        self.matcher = _Matcher(
            settings,
            _common_words(t for s in spans for t in (*s.inputs, *s.outputs, *s.documents))
            if settings.fuzzy and settings.prefilter
            else frozenset(),
        )
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

    def _add_root(
        self, text: str, origin: str, prefix: str, s: TraceSpan, at: tuple[int, int]
    ) -> None:
        norm = normalize(text)
        if not norm:
            return
        if norm in self.by_norm:
            return  # identical texts are one node
        # Only inputs are checked against every node; documents and tool outputs only against
        # generations (thousands of retrieved documents would otherwise cost a quadratic loop).
        pool = self.nodes.values() if origin == "input" else [self.nodes[g] for g in self.gen_ids]
        for n in pool:
            if n.avail[0] > at[0]:
                continue
            # Derived text: an input that carries a finished generation's output.
            if n.origin == "generation" and _occurrences(norm, n.norm):
                return
            # Part of a text already recorded (a trimmed document, one field of an input): not
            # new text from outside; generations that read it are matched to the whole text.
            if origin == "input" and _occurrences(n.norm, norm):
                return
        nid = self._new_id(prefix)
        self.nodes[nid] = _Node(nid, text.strip(), norm, origin, at, spans=[s.id], names=[s.name])
        self.by_norm[norm] = nid

    def _link(
        self, target_span: TraceSpan, raw_input: str, candidates: Iterable[_Node]
    ) -> tuple[list[str], list[Link]]:
        norm_input = normalize(raw_input)
        folded = norm_input.casefold()
        found: dict[str, tuple[str, float, str, list[tuple[int, int]]]] = {}
        candidates = list(candidates)
        may = self.matcher.candidates(candidates, folded)
        if may is not None:
            n_all = len(candidates)
            candidates = [n for n in candidates if n.id in may]
            STATS["pairs_skipped"] = STATS.get("pairs_skipped", 0) + n_all - len(candidates)
        for n in candidates:
            m = self.matcher.match(n, raw_input, norm_input, folded)
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
            if nid not in self._ancestors(host):
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
        cands = [
            n
            for n in self.nodes.values()
            if n.avail < start or (n.origin != "generation" and n.avail[0] <= s.start)
        ]
        keep, links = self._link(s, raw_input, cands)
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
            self.nodes[nid] = node
            self.gen_ids.append(nid)
            self.by_norm[norm] = nid
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
        gen_ids = {n.id for n in self.nodes.values() if n.origin == "generation"}
        if not leaves:
            tid = max((self.nodes[g] for g in gen_ids), key=lambda n: n.avail).id
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
        keep, links = self._link(pseudo, whole, [self.nodes[g] for g in gen_ids])
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
        self.nodes[nid] = node
        self.links += [Link(k.source, nid, k.how, k.score, k.sentences) for k in links]
        return nid


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
    dag.meta["stage_names"] = {str(k): ", ".join(sorted(v)) for k, v in sorted(names.items())}
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
    "normalize",
    "select_trace",
]
