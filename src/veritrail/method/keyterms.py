"""The key-term check: a claim that names something no source contains is not fully supported.

A claim's *key terms* are its numbers and its capitalised words (names, places, titles, months),
stop words left out. If one of them occurs in no source document of the DAG (its root nodes),
the sources cannot fully support the claim, whatever a judge said: a Fully Supported verdict
becomes Not Fully Supported, with the missing terms named in the reasoning. Nothing else is
changed: Not Fully Supported and Inconclusive verdicts stand, and the loop goes on as it does after
any Not Fully Supported verdict (more rounds up to `q`, then error-stage localisation).

Why it exists (issue 19, docs/evaluation.md): the embedded 1.5B model's verdicts carry no signal
on WiCE (it calls almost every claim Fully Supported; its own label probabilities have AUROC
0.42), while this check alone separates WiCE's dev claims with a balanced accuracy of 72.7
(chosen there among a few variants, then run once on the test slice). It is a necessary
condition, not a judge: it never makes a claim Fully Supported, and it can be wrong where a source
words a term differently ("U.S." for "United States", "5" for "five").

When it runs: `VerifyConfig.term_check` True or False decides; None (the default) leaves it to
the method's default for the judge's model (`on_by_default`): on for the embedded `local/`
models, off for every other model, so the method with a capable judge is the paper's. That
default is the method's policy, decided here from the model's name; the model layer knows
nothing of it. Comparison is case-insensitive,
over Unicode letters and digits, with a trailing "s" ignored on words longer than three letters
("Americans" matches "American").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..dag import Dag, PerDag
from ..records import Verdict
from .steps import VerdictOutcome

_WORD = re.compile(r"[^\W_]+")

# Capitalised only because they start a sentence or a title, or too common to name anything.
_STOP_TEXT = """a about after all also an and any are as at be been before being between both but by can
    could did do does during each for from had has have he her his how i if in into is it its may
    might more most no not of on one only or other our over own same shall she should so some such
    than that the their them then there these they this those to two under very was we were what
    when where which while who whom whose will with would you your"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


def _norm(word: str) -> str:
    w = word.casefold()
    return w[:-1] if len(w) > 3 and w.endswith("s") else w


def key_terms(text: str) -> tuple[str, ...]:
    """The key terms of `text`, each once, in order: words holding a digit, and capitalised
    words of two or more characters, stop words left out."""
    out: dict[str, None] = {}
    for w in _WORD.findall(text):
        if w.casefold() in STOP_WORDS:
            continue
        if any(c.isdigit() for c in w) or (len(w) >= 2 and w[0].isupper()):
            out.setdefault(w, None)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SourceVocabulary:
    """The words of a DAG's source documents (root nodes), normalised for the check."""

    words: frozenset[str]

    @classmethod
    def of_texts(cls, texts: Iterable[str]) -> SourceVocabulary:
        """The vocabulary of some source texts."""
        words: set[str] = set()
        for t in texts:
            words.update(_norm(w) for w in _WORD.findall(t))
        return cls(frozenset(words))

    @classmethod
    def of_dag(cls, dag: Dag) -> SourceVocabulary:
        """The vocabulary of `dag`'s root nodes."""
        return cls.of_texts(n.text for n in dag if dag.is_root(n.id))

    def absent(self, claim_text: str) -> tuple[str, ...]:
        """The key terms of `claim_text` that occur in no source."""
        return tuple(t for t in key_terms(claim_text) if _norm(t) not in self.words)


class VocabularyCache:
    """`SourceVocabulary.of_dag` for the last few DAGs one holder (a baseline detector) meets
    (`dag.PerDag`). Kept by its holder, not in this module: nothing of a run lives in module
    state."""

    def __init__(self, size: int = 8) -> None:
        self._memo: PerDag[SourceVocabulary] = PerDag(size)

    def get(self, dag: Dag) -> SourceVocabulary:
        """The vocabulary of `dag`'s roots."""
        return self._memo.get(dag, SourceVocabulary.of_dag)


EMBEDDED_PROVIDER = "local"
"""The provider part of the embedded models' names (``local/qwen2.5-coder-1.5b``)."""


def on_by_default(model: Any) -> bool:
    """The method's default for a judge's `model` (a `lm.model.Model`, or whatever a plugin
    judge holds, or None): on for the embedded models, whose names (`Model.name`,
    ``provider/model``) start with ``local/`` — their small judges call nearly every claim
    Fully Supported — and off for every other model and for judges without a model."""
    name = getattr(model, "name", None)
    return isinstance(name, str) and name.partition("/")[0] == EMBEDDED_PROVIDER


def enabled(setting: bool | None, model: Any) -> bool:
    """Whether the check runs: the setting when given, else the method's default for the
    judge's model (`on_by_default`: the embedded models)."""
    if setting is not None:
        return setting
    return on_by_default(model)


def check_outcome(
    outcome: VerdictOutcome, score: float | None, claim_text: str, sources: SourceVocabulary
) -> tuple[VerdictOutcome, float | None]:
    """A Fully Supported `outcome` whose claim names terms absent from `sources` becomes Not
    Fully Supported (its score, the share of Fully Supported samples, 0.0); anything else is
    returned unchanged."""
    if outcome.verdict is not Verdict.FULLY_SUPPORTED:
        return outcome, score
    missing = sources.absent(claim_text)
    if not missing:
        return outcome, score
    named = ", ".join(f'"{t}"' for t in missing[:8]) + (" ..." if len(missing) > 8 else "")
    note = (
        f"[key-term check: the claim names {named}, which no source document contains, so the "
        "sources cannot fully support it; the judge had said Fully Supported]"
    )
    reasoning = f"{outcome.reasoning}\n{note}" if outcome.reasoning else note
    flipped = replace(outcome, verdict=Verdict.NOT_FULLY_SUPPORTED, reasoning=reasoning)
    return flipped, (0.0 if score is not None else None)
