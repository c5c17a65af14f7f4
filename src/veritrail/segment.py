"""Sentence segmentation (SPEC §4.2): deterministic, offline, computed once per node per run.

Text is first cut into blocks at line structure that prose splitters get wrong: Markdown
headings, bullet and numbered list items, and blank-line paragraphs each start a new block, and a
line with no closing punctuation followed by a line break ends a block. Each block is then split
by nupunkt (a Punkt implementation with bundled parameters, so no download at run time), which
handles abbreviations, initials, decimals and quotes. Sentence indices are 0-based within a node.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from functools import lru_cache

from .dag import Dag

_BULLET = re.compile(r"^\s*(?:[-*•‣◦▪]|\d{1,3}[.)]|[a-zA-Z][.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s+\S")
_CLOSERS = ('.', '!', '?', ':', ';', '"', "'", '”', '’', ')', ']', '…')


@lru_cache(maxsize=1)
def _punkt() -> Callable[[str], list[str]]:
    # Imported lazily: loading the bundled Punkt parameters costs ~0.1 s, paid only when needed.
    from nupunkt import sent_tokenize

    return sent_tokenize  # type: ignore[no-any-return]


def _blocks(text: str) -> list[str]:
    blocks: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            blocks.append(" ".join(cur))
            cur.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            flush()
            continue
        if _HEADING.match(line) or _BULLET.match(line):
            flush()
            cur.append(line)
            if _HEADING.match(line):
                flush()
            continue
        cur.append(line)
        if not line.endswith(_CLOSERS) and len(line) < 80 and len(cur) == 1:
            # A short unpunctuated line on its own (a title, a label) is its own unit.
            flush()
    flush()
    return blocks


def split_sentences(text: str) -> list[str]:
    """Split `text` into sentences; whitespace-only pieces are dropped, text is otherwise kept."""
    out: list[str] = []
    tok = _punkt()
    for block in _blocks(text):
        for s in tok(block):
            s = s.strip()
            if s:
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
        if got is None:
            got = tuple(self._split(self._dag.node(node_id).text))
            if not got:  # text that is all punctuation still gets one sentence
                got = (self._dag.node(node_id).text.strip(),)
            with self._lock:
                got = self._cache.setdefault(node_id, got)
        return got

    @property
    def segmented(self) -> int:
        """How many nodes have been segmented so far."""
        return len(self._cache)
