"""Sentence segmentation (SPEC §4.2): deterministic, offline, computed once per node per run.

Text is first cut into blocks at line structure that prose splitters get wrong:

* blank lines end a block; Markdown headings (``# ...``), horizontal rules and table rows are
  blocks of their own; each bullet or numbered list item starts a block;
* a line without closing punctuation ends its block when the next line looks like a new start
  (begins with a capital, quote or bracket) and the line itself looks like a title (it
  starts like a sentence, no sentence ends inside it, it does not end with a comma or dash, and
  it is short or mostly Title Case without commas) — so ``Chapter One`` above
  ``It was ...`` is its own sentence while hard-wrapped prose (``... the United States and`` /
  ``most other parts ...``) stays joined;
* inside a list item, a line that is not indented past the item's marker and starts like a new
  sentence ends the item (``1. Numbered`` / ``Chapter One`` are two sentences).

Each block is then split by nupunkt (a Punkt implementation with bundled parameters, so there is
no download at run time), which handles abbreviations, initials, decimals and quotes; its
abbreviation list is pruned of ordinary words (see `_ABBREVIATIONS`). Nothing is
dropped: the sentences of a text hold all of its non-whitespace characters, in order. Line breaks
inside a sentence become single spaces. Sentence indices are 0-based within a node.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .dag import Dag

Span = tuple[int, int]

_BULLET = re.compile(r"(?:[-*+•‣◦▪–]|\d{1,3}[.)]|[a-z][.)]|[A-Z]\)|\(\w{1,3}\))\s+\S")
_HEADING = re.compile(r"#{1,6}(?:\s|$)")
_RULE = re.compile(r"(?:[-*_=~]\s*){3,}$")
_CLOSERS = (".", "!", "?", ":", ";", '"', "'", "”", "’", ")", "]", "…")
_MARKUP = "*_`~"
_STARTERS = "\"'“‘([*_¿¡"
_TITLE_LEN = 40
_JOINERS = (",", "-", "–", "—", "/", "&", "+")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_INNER_END = re.compile(
    r"[.!?][\"'”’)\]]*\s"
)  # a sentence ends inside the line: prose, not a title
# Every character `str.splitlines` breaks on, so blocks can be flattened without moving offsets.
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


# nupunkt's bundled model was trained on legal text: its abbreviation list holds thousands of
# ordinary words ("ago", "bus", "chase", "south", "all"), so "two years ago. Then" would stay one
# sentence. We keep the entries that cannot be ordinary words (with a period or digit inside:
# "e.g", "u.s", "p.m"; single letters, for initials) and this list of common abbreviations.
_ABBREVIATION_LIST = """mr mrs ms dr prof rev hon gen col lt sgt capt cmdr adm maj gov sen rep pres supt messrs mme
    mlle sr jr esq st ave blvd rd mt ft dept univ assn assoc bros co corp inc ltd llc plc etc vs
    viz cf al approx est ca fig figs no nos vol vols pp pg ed eds trans ibid para ref refs govt
    intl natl misc proc conf hr hrs yr yrs mo mos wk oz lb lbs sq cu tel ext attn encl jan feb
    mar apr jun jul aug sep sept oct nov dec mon tue tues thu thur thurs fri"""
_ABBREVIATIONS = frozenset(_ABBREVIATION_LIST.split())


@lru_cache(maxsize=1)
def _punkt() -> Callable[[str], list[Span]]:
    # Imported lazily: loading the bundled Punkt parameters is paid only when text is segmented.
    from nupunkt import load_default_model

    tok = load_default_model()  # a fresh instance: nupunkt's own shared tokenizer is untouched
    params = tok._params
    params.abbrev_types = {
        a for a in params.abbrev_types if not a.isalpha() or len(a) == 1 or a in _ABBREVIATIONS
    }
    params.invalidate_patterns()
    params.freeze_sets()

    def spans(text: str) -> list[Span]:
        return list(tok.span_tokenize(text))

    return spans


def _starts_sentence(line: str) -> bool:
    c = line[0]
    return c.isupper() or c.isdigit() or c in _STARTERS


def _looks_like_title(line: str) -> bool:
    """A line with no closing punctuation that reads like a title, not like a wrapped line."""
    bare = line.rstrip(_MARKUP)
    if (
        not bare
        or bare.endswith(_CLOSERS + _JOINERS)
        or not _starts_sentence(line)
        or _INNER_END.search(bare)
    ):
        return False
    if len(line) < _TITLE_LEN:
        return True
    if "," in bare or ";" in bare:
        return False
    # Long lines must be mostly Title Case (or ALL CAPS) in their longer words.
    words = [w for w in _WORD.findall(bare) if len(w) >= 4]
    return not words or sum(w[0].isupper() for w in words) >= 0.6 * len(words)


def _blocks(text: str) -> list[Span]:
    """(start, end) offsets of the blocks, each starting and ending on non-whitespace."""
    blocks: list[Span] = []
    start = end = -1  # current block; -1 = none open
    item_indent = -1  # marker indentation when the open block is a list item
    last = ""  # the open block's last line, stripped

    pos = 0
    for raw in text.splitlines(keepends=True):
        line_start = pos
        pos += len(raw)
        line = raw.strip()
        if not line:
            if start >= 0:
                blocks.append((start, end))
                start = -1
            continue
        indent = len(raw) - len(raw.lstrip())
        a = line_start + indent
        b = a + len(line)
        alone = bool(_HEADING.match(line) or _RULE.match(line) or line.startswith("|"))
        item = not alone and bool(_BULLET.match(line))
        if start >= 0 and not alone and not item:
            opens = _starts_sentence(line) and not line[0].isdigit()
            if item_indent >= 0:
                new = indent <= item_indent and opens
            else:
                new = opens and _looks_like_title(last)
        else:
            new = True
        if new and start >= 0:
            blocks.append((start, end))
            start = -1
        if start < 0:
            start = a
            item_indent = indent if item else -1
        end = b
        last = line
        if alone:
            blocks.append((start, end))
            start = -1
    if start >= 0:
        blocks.append((start, end))
    return blocks


def sentence_spans(text: str) -> list[Span]:
    """(start, end) character offsets of the sentences of `text`, in order, without overlaps.

    Each span starts and ends on a non-whitespace character; everything outside the spans is
    whitespace.
    """
    tok = _punkt()
    out: list[Span] = []
    for a, b in _blocks(text):
        flat = _LINE_BREAK.sub(" ", text[a:b])  # one space per break, so offsets still match
        for s, e in tok(flat):
            piece = flat[s:e]
            lead = len(piece) - len(piece.lstrip())
            trail = len(piece) - len(piece.rstrip())
            if e - s > lead:
                out.append((a + s + lead, a + e - trail))
    return out


def split_sentences(text: str) -> list[str]:
    """Split `text` into sentences (line breaks inside a sentence become single spaces)."""
    out: list[str] = []
    for a, b in sentence_spans(text):
        s = text[a:b]
        if _LINE_BREAK.search(s):
            s = " ".join(part.strip() for part in s.splitlines() if part.strip())
        out.append(s)
    return out


class SentenceIndex:
    """Per-run cache of node sentences: each node is segmented at most once, only when read.

    Shared by every claim of a run (claims never copy node text); safe to use from threads.
    """

    def __init__(self, dag: Dag, splitter: Callable[[str], list[str]] = split_sentences) -> None:
        self._dag = dag
        self._split = splitter
        self._cache: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def sentences(self, node_id: str) -> tuple[str, ...]:
        """The node's sentences (0-based indices)."""
        got = self._cache.get(node_id)
        if got is not None:
            return got
        with self._lock:  # one segmentation per node even when threads ask at the same time
            got = self._cache.get(node_id)
            if got is None:
                text = self._dag.node(node_id).text
                got = tuple(self._split(text)) or (text.strip(),)
                self._cache[node_id] = got
        return got

    @property
    def segmented(self) -> int:
        """How many nodes have been segmented so far."""
        return len(self._cache)
