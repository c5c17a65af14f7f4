"""Indexes over the recorded texts, so that a text meets only the nodes it may match (`Index`)."""

from __future__ import annotations

from collections import Counter

from .matching import ANCHOR_HITS, Matcher, Node
from .text import WORD, lookup_keys


class Index:
    """Indexes over the node texts, so that a text meets only the nodes it may match.

    Testing every node against every later generation (and every new root against every node)
    made an import quadratic: 110 s for 10,000 generations in 100,000 spans (issue 29). Each
    index answers one question with a few dictionary look-ups per word of the text; the
    containment ones rule out only what cannot match (every answer is then checked in full as
    before):

    * **May be contained in a text** (`contained_in`): a text that occurs in another on word
      boundaries brings its words (`WORD`) and its pairs of consecutive words along, so each
      node is filed under one of them, its rarest pair (a one-word text: its word), and a text
      looks up its own words and pairs.
    * **May contain a text** (`containing`): every node is filed under every word it has; the
      text's rarest word's list holds every node that can contain it.
    * **May fuzzy-match an input** (`fuzzy_candidates`, with the prefilter): each sentence is
      filed under its anchor pairs (`Matcher`); the input's pairs count them.
    """

    def __init__(self, matcher: Matcher) -> None:
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
        """Sentences without a word pair to file them under (no word `WORD` sees)."""

    def add(self, node: Node) -> None:
        """File a new node in every index."""
        words = WORD.findall(node.norm)
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
        for k in lookup_keys(norm_text):
            got = key.get(k)
            if got:
                out += got
        return out

    def containing(self, norm_text: str) -> list[str] | None:
        """Ids of the nodes whose text may contain `norm_text`; None: any node may (the text has
        no word)."""
        lists = [self.every.get(w, []) for w in set(WORD.findall(norm_text))]
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


__all__ = ["Index"]
