"""What claim extraction's two forms share (docs/extraction.md): the settings, the per-sentence
trace, the disambiguation reply and the prompt pieces. `extraction` (the per-sentence form and the
public API) and `extraction_batch` (the batched form) both build on it; the public names are
re-exported by `extraction`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..fencing import fence
from ..lm.model import Model
from ..records import SelectionIssue
from .steps import Decomposition


class Disambiguation(StrEnum):
    """Outcome of the disambiguation stage, spelled as the prompt asks for it."""

    CLEAR = "clear"
    RESOLVED = "resolved"
    UNRESOLVABLE = "unresolvable"


DEFAULT_CONTEXT_BEFORE = 5
DEFAULT_CONTEXT_AFTER = 2
DEFAULT_SIMILARITY = 0.9

DecomposeFn = Callable[[Model, str, str], Awaitable[Sequence[str] | Decomposition]]
"""Signature of the decomposition stage: `(model, text, context) -> parts` (bare, or as a
`Decomposition` that also lists unreadable replies)."""


class ExtractionMode(StrEnum):
    """How the stages meet the sentences: many per call (the default) or one per call (the paper's
    form, three calls a sentence)."""

    BATCHED = "batched"
    PER_SENTENCE = "per-sentence"


DEFAULT_BATCH_SENTENCES = 20
DEFAULT_BATCH_TOKENS = 1500


class SentenceOutcome(StrEnum):
    """What happened to one sentence."""

    CLAIMS = "claims"
    NO_VERIFIABLE_CONTENT = "no_verifiable_content"
    UNRESOLVABLE = "unresolvable"
    NO_CLAIMS = "no_claims"  # decomposition returned nothing usable
    ERROR = "error"  # a reply could not be read (kept in `error` / `raw`)


@dataclass(frozen=True, slots=True)
class ExtractionConfig:
    """Settings of claim extraction.

    `context_before` / `context_after` are the numbers of neighbouring sentences shown with each
    sentence (to every stage). `similarity_threshold` is the `difflib` ratio used by
    `near_duplicates` (1.0 = merge only claims equal after normalisation). `max_parallel` bounds
    how many sentences are in flight at once. `max_tokens` caps the selection and
    disambiguation replies (they are one short JSON object; the cap stops a weak model that
    rambles from running for minutes; a batched call gets it once per sentence it answers).

    `mode` chooses the batched form (each stage over a window of at most `batch_sentences`
    sentences and `batch_tokens` estimated tokens per call, shown with `context_before` /
    `context_after` sentences around the window) or the per-sentence form; `max_parallel` then
    bounds the windows in flight.
    """

    context_before: int = DEFAULT_CONTEXT_BEFORE
    context_after: int = DEFAULT_CONTEXT_AFTER
    similarity_threshold: float = DEFAULT_SIMILARITY
    max_parallel: int | None = 16
    max_tokens: int | None = 384
    mode: ExtractionMode = ExtractionMode.BATCHED
    batch_sentences: int = DEFAULT_BATCH_SENTENCES
    batch_tokens: int | None = DEFAULT_BATCH_TOKENS

    def __post_init__(self) -> None:
        if self.context_before < 0 or self.context_after < 0:
            raise ValueError("context sizes must be >= 0")
        # A plain string ("per-sentence", from a flag or a settings file) is accepted and kept
        # as the enum, so comparisons below never see two spellings of one mode.
        object.__setattr__(self, "mode", ExtractionMode(self.mode))
        if self.batch_sentences < 1:
            raise ValueError("batch_sentences must be >= 1")
        if self.batch_tokens is not None and self.batch_tokens < 1:
            raise ValueError("batch_tokens must be >= 1 (or None for no bound)")
        if not 0.0 < self.similarity_threshold <= 1.0:
            raise ValueError("similarity_threshold must be in (0, 1]")
        if self.max_parallel is not None and self.max_parallel < 1:
            raise ValueError("max_parallel must be >= 1 (or None for no bound)")


@dataclass(frozen=True, slots=True)
class SentenceTrace:
    """The stages one sentence went through, for review and debugging."""

    index: int
    sentence: str
    outcome: SentenceOutcome
    selected: str | None = None
    selection_reason: str = ""
    disambiguation: Disambiguation | None = None
    disambiguated: str | None = None
    disambiguation_reason: str = ""
    claims: tuple[str, ...] = ()
    error: str | None = None
    raw: str = ""
    issues: tuple[SelectionIssue, ...] = ()
    """One `unparseable_reply` issue per unreadable reply of this sentence's calls (also when a
    re-ask then succeeded); they go with every claim taken from the sentence."""


@dataclass(frozen=True, slots=True)
class Disambiguated:
    status: Disambiguation
    text: str
    reason: str


def str_field(d: Mapping[str, Any], key: str) -> str:
    v = d.get(key, "")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise TypeError(f"field {key!r} must be a string")
    return v.strip()


def read_disambiguation(value: Any) -> Disambiguated:
    if not isinstance(value, Mapping):
        raise TypeError("expected a JSON object")
    raw_status = value.get("status")
    if not isinstance(raw_status, str):
        raise TypeError("'status' must be a string")
    status = Disambiguation(raw_status.strip().lower())
    text = str_field(value, "text")
    if status is not Disambiguation.UNRESOLVABLE and not text:
        raise ValueError("a resolved or clear sentence needs a non-empty 'text'")
    return Disambiguated(status, text, str_field(value, "reason"))


def question_block(question: str | None) -> str:
    # With no question the block is left out entirely: a line saying "there is no question" made
    # a small model (Qwen2.5-Coder-1.5B) answer that nothing in the text was checkable.
    if not question or not question.strip():
        return ""
    return "The text answers this question:\n" + fence(question.strip(), "question")


def decomposition_context(window_before: Sequence[str], question: str | None) -> str:
    """The context handed to the decomposition stage: the question and the preceding sentences.

    Disambiguation has already made the text self-contained; this context only helps the
    decomposer keep entity names complete.
    """
    parts = []
    if question and question.strip():
        parts.append(f"Question the text answers: {question.strip()}")
    if window_before:
        parts.append("Preceding text: " + " ".join(window_before))
    return "\n".join(parts)


def dedupe_in_order(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
