"""The perturbations of `veritrail inject`: one sentence in, one unsupported sentence out.

Each kind is a pure function of the sentence, what the DAG's text offers (`Vocabulary`) and a
seeded `random.Random`; it returns the perturbed sentence or None when the kind does not apply to
that sentence (no name to swap, no number, no auxiliary verb to negate). No model is involved, so
the same inputs and seed give the same sentence on every machine.

* ``fabricated`` — a new sentence about a name the sentence (or its node) mentions, stating a
  fact made of words found nowhere in the DAG;
* ``entity-swap`` — a name of the sentence replaced by another name of the same DAG (so every
  word of the result occurs in the DAG's text: only the pairing is false);
* ``number`` — a number (digits or a number word up to twenty) replaced by a different one;
* ``negation`` — an auxiliary verb negated (``was`` → ``was not``), or an existing negation
  removed (``did not`` → ``did``).

The citation kinds (``wrong-citation``, ``dropped-citation``) change markers, not sentences:
`inject.cite` makes them.

The templates of ``fabricated`` are ours; none comes from a paper or a dataset.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """The kinds of injected hallucination."""

    FABRICATED = "fabricated"
    ENTITY_SWAP = "entity-swap"
    NUMBER = "number"
    NEGATION = "negation"
    WRONG_CITATION = "wrong-citation"
    DROPPED_CITATION = "dropped-citation"


CONTENT_KINDS = (Kind.FABRICATED, Kind.ENTITY_SWAP, Kind.NUMBER, Kind.NEGATION)
"""The kinds that plant unsupported content (gold Not Fully Supported, a stage and a node)."""

CITATION_KINDS = (Kind.WRONG_CITATION, Kind.DROPPED_CITATION)
"""The kinds that change only the final output's citation markers: ``wrong-citation`` (a
sentence's marker now names another source that does not support it: gold *misattributed*) and
``dropped-citation`` (a sentence's markers removed: gold *uncited*). They apply only to a DAG
whose final output carries markers (docs/inject.md)."""


# Capitalised words that begin sentences or clauses without naming anything: a capitalised
# run is a name only if its first word is not one of these and, for a single word, it is not at
# a sentence start.
_NOT_NAMES = frozenset(
    [
        "a",
        "an",
        "the",
        "he",
        "she",
        "it",
        "they",
        "we",
        "i",
        "you",
        "his",
        "her",
        "its",
        "their",
        "our",
        "my",
        "your",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "who",
        "whom",
        "which",
        "where",
        "when",
        "why",
        "how",
        "if",
        "then",
        "although",
        "though",
        "because",
        "despite",
        "meanwhile",
        "however",
        "finally",
        "ultimately",
        "eventually",
        "later",
        "also",
        "overall",
        "throughout",
        "during",
        "with",
        "without",
        "from",
        "to",
        "for",
        "by",
        "of",
        "through",
        "upon",
        "in",
        "on",
        "at",
        "but",
        "and",
        "or",
        "as",
        "while",
        "after",
        "before",
        "once",
        "since",
        "until",
        "so",
        "yet",
        "both",
        "each",
        "every",
        "all",
        "some",
        "many",
        "most",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "key",
        "chapter",
        "part",
        "book",
        "title",
        "data",
        "summary",
        "community",
        "report",
        # Months and weekdays are capitalised mid-sentence without naming anyone: a swap of
        # "Frankfurt" for "May" is no entity swap.
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
)

# "Soo-jin" is one name, not "Soo": a run followed by a hyphen and a lower-case letter is none.
_NAME = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)*\b(?!-[a-z])")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\"“(]\s*|\n\s*)$")


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What the DAG's text offers the perturbations: its names and its lower-cased words."""

    names: tuple[str, ...]
    """Names found in the DAG (sorted): capitalised word runs seen at least twice (single words
    mid-sentence only)."""
    words: frozenset[str]
    """Every lower-cased word of every node."""

    @classmethod
    def of_texts(cls, texts: Iterable[str]) -> Vocabulary:
        """The vocabulary of these texts (every node of a DAG)."""
        seen: dict[str, int] = {}
        words: set[str] = set()
        for text in texts:
            words.update(w.lower() for w in _WORD.findall(text))
            for m in _NAME.finditer(text):
                if _is_name(m.group(), text, m.start()):
                    seen[m.group()] = seen.get(m.group(), 0) + 1
        # Twice at least: a capitalised word met once mid-sentence is as often a quirk of the
        # text ("upon 'Change") as a name.
        names = sorted(n for n, count in seen.items() if count >= 2)
        return cls(tuple(names), frozenset(words))


_WORD = re.compile(r"[^\W_]+")


def _is_name(candidate: str, text: str, start: int) -> bool:
    first = candidate.split()[0].split("-")[0].lower()
    if first in _NOT_NAMES or len(candidate) < 3:
        return False
    if len(candidate.split()) > 1 or "-" in candidate:
        return True  # two capitalised words in a row name something, even opening a sentence
    before = text[max(0, start - 3) : start]
    return not before.endswith(("'", "’")) and not _SENTENCE_START.search(before)


def names_in(sentence: str, vocab: Vocabulary) -> list[str]:
    """The DAG's names that occur in `sentence` as whole words, in order of appearance."""
    known = set(vocab.names)
    return [m.group() for m in _NAME.finditer(sentence) if m.group() in known]


# -- fabricated ------------------------------------------------------------------------------------

# Facts no source of a test DAG is likely to state; {name} is a name of the DAG. A template is
# used only if none of its key words (what makes the fact) occurs in the DAG: a large DAG has
# "later" or "three" somewhere, but rarely "vineyard" and "Patagonia".
_FABRICATIONS: tuple[tuple[str, frozenset[str]], ...] = tuple(
    (template, frozenset(keys.split()))
    for template, keys in (
        ("{name} later sold a vineyard in Patagonia to a shipping firm.", "vineyard patagonia"),
        ("{name} once won a national championship in competitive fencing.", "fencing"),
        ("{name} kept a diary written entirely in Portuguese.", "diary portuguese"),
        ("{name} donated a lighthouse to the harbour town of Kilbride.", "lighthouse kilbride"),
        ("{name} spent three winters studying astronomy in Uppsala.", "astronomy uppsala"),
        ("{name} invested heavily in a tramway scheme in Montevideo.", "tramway montevideo"),
        ("{name} received a medal from the Royal Society of Beekeepers.", "beekeepers"),
        ("{name} learned to fly a seaplane over the fjords of Norway.", "seaplane fjords"),
        ("{name} bred racing pigeons on a rooftop in Marseille.", "pigeons marseille"),
        ("{name} wrote an opera about the volcanoes of Iceland.", "opera volcanoes"),
    )
)


def _fabricated(sentence: str, vocab: Vocabulary, rng: random.Random, context: str) -> str | None:
    names = names_in(sentence, vocab) or names_in(context, vocab) or list(vocab.names)
    name = rng.choice(names) if names else "The narrator"
    order = list(_FABRICATIONS)
    rng.shuffle(order)
    for template, keys in order:
        if not keys & vocab.words:
            return template.format(name=name)
    return None


# -- entity swap -----------------------------------------------------------------------------------


def _entity_swap(sentence: str, vocab: Vocabulary, rng: random.Random, context: str) -> str | None:
    present = names_in(sentence, vocab)
    if not present:
        return None
    target = rng.choice(sorted(set(present)))
    blocked = {n.lower() for n in present}
    parts = set(target.lower().split())

    def unrelated(n: str) -> bool:
        # "Anil" for "Anil Malek" is no swap: the replacement shares no word with the target.
        return n.lower() not in blocked and not parts & set(n.lower().split())

    same_size = [n for n in vocab.names if unrelated(n) and len(n.split()) == len(target.split())]
    choices = same_size or [n for n in vocab.names if unrelated(n)]
    if not choices:
        return None
    other = rng.choice(choices)
    out, n = re.subn(rf"\b{re.escape(target)}\b", other, sentence, count=1)
    return out if n and out != sentence else None


# -- number ----------------------------------------------------------------------------------------

_NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_NUMBER = re.compile(
    r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,])|(?<![\w.,])\d+(?![\w]|[.,]\d)|\b(?:"
    + "|".join(_NUMBER_WORDS[1:])
    + r")\b",
    re.IGNORECASE,
)


def _change_number(token: str, rng: random.Random) -> str:
    lower = token.lower()
    if lower in _NUMBER_WORDS:
        value = _NUMBER_WORDS.index(lower)
        options = [w for i, w in enumerate(_NUMBER_WORDS) if i >= 2 and i != value]
        new = rng.choice(options)
        return new.capitalize() if token[0].isupper() else new
    value = int(token.replace(",", ""))
    if 1500 <= value <= 2100 and "," not in token:  # a year: move it by a few years
        delta = rng.choice([d for d in range(-12, 13) if d])
    else:
        delta = rng.randint(1, max(3, value // 2 + 1)) * rng.choice((-1, 1))
        if value + delta < 1:
            delta = abs(delta)
    new_value = value + delta
    return f"{new_value:,}" if "," in token else str(new_value)


def _number(sentence: str, vocab: Vocabulary, rng: random.Random, context: str) -> str | None:
    found = list(_NUMBER.finditer(sentence))
    if not found:
        return None
    m = rng.choice(found)
    new = _change_number(m.group(), rng)
    if new.lower() == m.group().lower():
        return None
    return sentence[: m.start()] + new + sentence[m.end() :]


# -- negation --------------------------------------------------------------------------------------

_NEGATED = re.compile(
    r"\b(is|was|are|were|has|have|had|can|could|will|would|should|does|did|do|must)"
    r"(?: not\b|n't\b)|\b(cannot)\b|\b(won't)\b",
    re.IGNORECASE,
)
# "has/have/had" only before a participle: "had not painted" negates, "had not a name" garbles.
_AUXILIARY = re.compile(
    r"\b(?:is|was|are|were|can|could|will|would|should|does|did|must)\b(?! not\b)"
    r"|\b(?:has|have|had)\b(?= (?:been|\w+ed|\w+en)\b)",
)


def _negation(sentence: str, vocab: Vocabulary, rng: random.Random, context: str) -> str | None:
    negated = _NEGATED.search(sentence)
    if negated is not None:
        # Removing a negation states the opposite just as well as adding one.
        if negated.group(2):
            repl = negated.group(2)[:3]
        elif negated.group(3):
            repl = "will"
        else:
            repl = negated.group(1)
        return sentence[: negated.start()] + repl + sentence[negated.end() :]
    found = list(_AUXILIARY.finditer(sentence))
    if not found:
        return None
    m = rng.choice(found)
    return sentence[: m.end()] + " not" + sentence[m.end() :]


Perturbation = Callable[[str, Vocabulary, random.Random, str], "str | None"]

PERTURBATIONS: dict[Kind, Perturbation] = {
    Kind.FABRICATED: _fabricated,
    Kind.ENTITY_SWAP: _entity_swap,
    Kind.NUMBER: _number,
    Kind.NEGATION: _negation,
}
"""Each kind's perturbation: (sentence, vocabulary, rng, the sentence's node text) → the
perturbed sentence, or None when the kind does not apply."""


def perturb(
    kind: Kind, sentence: str, vocab: Vocabulary, rng: random.Random, context: str = ""
) -> str | None:
    """The perturbed sentence of `kind`, or None when the kind does not apply to `sentence`
    (a citation kind never does: `inject.cite` changes markers)."""
    if kind not in PERTURBATIONS:
        return None
    out = PERTURBATIONS[kind](sentence, vocab, rng, context)
    return out if out and out.strip() != sentence.strip() else None


__all__ = [
    "CITATION_KINDS",
    "CONTENT_KINDS",
    "PERTURBATIONS",
    "Kind",
    "Vocabulary",
    "names_in",
    "perturb",
]
