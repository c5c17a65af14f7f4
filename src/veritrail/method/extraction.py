"""Claim extraction from a final output (docs/extraction.md), following the Claimify design.

The text (the terminal node of a DAG, or any text) is split into sentences with the same
segmenter the verifier uses, so a claim's `sentence_indices` point at the very sentences the
report shows. Each sentence, with a window of preceding and following sentences and an optional
question the text answered, goes through three stages:

1. **selection** (`claim_selection` prompt): does the sentence state anything checkable? Keep only
   that part; a sentence with no checkable content yields nothing.
2. **disambiguation** (`claim_disambiguation` prompt): make the kept part self-contained by
   resolving references from the context; drop it when that cannot be done with confidence.
3. **decomposition** (`veritrail.method.subclaims.decompose_text`, the prompt the verifier also uses for
   sub-claims): split into simple, self-contained claims that name entities in full.

That is the paper's form, one sentence per call (`ExtractionMode.PER_SENTENCE`): three calls a
sentence. The default, `ExtractionMode.BATCHED` (`veritrail.method.extraction_batch`), runs each
stage over many sentences per call (the whole text, or windows of it with their context), so a
short answer costs three calls in all; the traces, issues and claims it gives have the same shape.
What both forms share (settings, trace, readers) is in `extraction_common`, re-exported here.

Sentences are processed concurrently. Claims found in several sentences are merged (see
`merge_claims`), keeping every source sentence. A reply that cannot be read after the model's
bounded re-asks is recorded in the sentence's trace and that sentence yields no claim; the run goes
on. Every unreadable reply, also one a re-ask made good, is kept in the sentence's trace as an
`unparseable_reply` issue (`SentenceTrace.issues`); `ExtractionResult.issues_by_claim` hands them
to the claims taken from that sentence. Every call goes through `Model.generate_json` with the step names `claim_selection`,
`claim_disambiguation` and (inside `decompose_text`) `decomposition`, so it is cached and accounted.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..fencing import fence
from ..lm.base import GenerateConfig
from ..lm.model import Model
from ..records import Claim, SelectionIssue, Step
from .claims import claims_to_json
from .extraction_batch import extract_batched
from .extraction_common import (
    DEFAULT_BATCH_SENTENCES,
    DEFAULT_BATCH_TOKENS,
    DEFAULT_CONTEXT_AFTER,
    DEFAULT_CONTEXT_BEFORE,
    DEFAULT_SIMILARITY,
    DecomposeFn,
    Disambiguation,
    ExtractionConfig,
    ExtractionMode,
    SentenceOutcome,
    SentenceTrace,
    decomposition_context,
    dedupe_in_order,
    question_block,
    read_disambiguation,
    str_field,
)
from .prompting import load_prompt
from .segment import split_sentences
from .steps import Decomposition, unreadable_issues
from .subclaims import DecompositionError, decompose_text_parts

SELECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    # Reason first, verdict last: the model states what it sees before it commits to an answer.
    "properties": {
        "reason": {"type": "string"},
        "verifiable_text": {"type": "string"},
        "has_verifiable_content": {"type": "boolean"},
    },
    "required": ["reason", "verifiable_text", "has_verifiable_content"],
    "additionalProperties": False,
}


DISAMBIGUATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": [d.value for d in Disambiguation]},
        "text": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["status", "text", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    """The merged claims plus the per-sentence trace."""

    sentences: tuple[str, ...]
    claims: tuple[Claim, ...]
    trace: tuple[SentenceTrace, ...] = field(default=())

    def claims_by_sentence(self) -> dict[int, list[Claim]]:
        """Claims grouped by the sentence they came from (a merged claim appears under each)."""
        out: dict[int, list[Claim]] = {i: [] for i in range(len(self.sentences))}
        for c in self.claims:
            for i in c.sentence_indices:
                out.setdefault(i, []).append(c)
        return out

    def issues_by_claim(self) -> dict[str, tuple[SelectionIssue, ...]]:
        """Claim id → the issues of the sentences it came from (claims with none are left out);
        for `loop.verify_claims(claim_issues=...)`."""
        by_index = {t.index: t.issues for t in self.trace if t.issues}
        out: dict[str, tuple[SelectionIssue, ...]] = {}
        for c in self.claims:
            got = tuple(i for k in c.sentence_indices for i in by_index.get(k, ()))
            if got:
                out[c.id] = got
        return out


# -- selection / disambiguation replies -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Selected:
    verifiable: bool
    text: str
    reason: str


def _read_selection(value: Any) -> _Selected:
    if not isinstance(value, Mapping):
        raise TypeError("expected a JSON object")
    flag = value.get("has_verifiable_content")
    if not isinstance(flag, bool):
        raise TypeError("'has_verifiable_content' must be true or false")
    text = str_field(value, "verifiable_text")
    # A "yes" with nothing kept is as good as a "no": there is nothing to carry forward.
    return _Selected(flag and bool(text), text if flag else "", str_field(value, "reason"))


# -- prompts ----------------------------------------------------------------------------------


def _context_block(sentences: Sequence[str], label: str) -> str:
    if not sentences:
        return "(none)"
    return fence("\n".join(sentences), label)


@dataclass(frozen=True, slots=True)
class _Window:
    before: tuple[str, ...]
    sentence: str
    after: tuple[str, ...]


def _window(sentences: Sequence[str], i: int, cfg: ExtractionConfig) -> _Window:
    lo = max(0, i - cfg.context_before)
    return _Window(
        tuple(sentences[lo:i]), sentences[i], tuple(sentences[i + 1 : i + 1 + cfg.context_after])
    )


# -- one sentence -----------------------------------------------------------------------------


async def _process_sentence(
    model: Model,
    sentences: Sequence[str],
    index: int,
    question: str | None,
    cfg: ExtractionConfig,
    decompose: DecomposeFn,
) -> SentenceTrace:
    w = _window(sentences, index, cfg)
    common = {
        "question": question_block(question),
        "context_before": _context_block(w.before, "preceding sentences"),
        "context_after": _context_block(w.after, "following sentences"),
        "sentence": fence(w.sentence, "target sentence"),
    }
    sel = await model.generate_json(
        load_prompt("claim_selection").render(**common),
        schema=SELECTION_SCHEMA,
        config=GenerateConfig(schema_name=Step.CLAIM_SELECTION, max_tokens=cfg.max_tokens),
        step=Step.CLAIM_SELECTION,
        validate=_read_selection,
    )
    issues = list(unreadable_issues(Step.CLAIM_SELECTION, sel.unreadable))
    if sel.value is None:
        return SentenceTrace(
            index,
            w.sentence,
            SentenceOutcome.ERROR,
            error=f"selection: {sel.error}",
            raw=sel.raw,
            issues=tuple(issues),
        )
    if not sel.value.verifiable:
        return SentenceTrace(
            index,
            w.sentence,
            SentenceOutcome.NO_VERIFIABLE_CONTENT,
            selection_reason=sel.value.reason,
            issues=tuple(issues),
        )
    selected = sel.value.text
    dis = await model.generate_json(
        load_prompt("claim_disambiguation").render(
            **common, selected=fence(selected, "checkable part")
        ),
        schema=DISAMBIGUATION_SCHEMA,
        config=GenerateConfig(schema_name=Step.CLAIM_DISAMBIGUATION, max_tokens=cfg.max_tokens),
        step=Step.CLAIM_DISAMBIGUATION,
        validate=read_disambiguation,
    )
    issues.extend(unreadable_issues(Step.CLAIM_DISAMBIGUATION, dis.unreadable))
    base = SentenceTrace(
        index,
        w.sentence,
        SentenceOutcome.ERROR,
        selected=selected,
        selection_reason=sel.value.reason,
        issues=tuple(issues),
    )
    if dis.value is None:
        return replace(base, error=f"disambiguation: {dis.error}", raw=dis.raw)
    base = replace(
        base,
        disambiguation=dis.value.status,
        disambiguation_reason=dis.value.reason,
    )
    if dis.value.status is Disambiguation.UNRESOLVABLE:
        return replace(base, outcome=SentenceOutcome.UNRESOLVABLE)
    base = replace(base, disambiguated=dis.value.text)
    try:
        got = await decompose(model, dis.value.text, decomposition_context(w.before, question))
    except DecompositionError as exc:
        issues.extend(unreadable_issues(Step.DECOMPOSITION, exc.unreadable))
        return replace(base, error=f"decomposition: {exc}", raw=exc.raw, issues=tuple(issues))
    if isinstance(got, Decomposition):
        issues.extend(unreadable_issues(Step.DECOMPOSITION, got.unreadable))
        base = replace(base, issues=tuple(issues))
        got = got.parts
    claims = dedupe_in_order(p.strip() for p in got if p and p.strip())
    if not claims:
        return replace(base, outcome=SentenceOutcome.NO_CLAIMS)
    return replace(base, outcome=SentenceOutcome.CLAIMS, claims=tuple(claims))


# -- merging ----------------------------------------------------------------------------------

_PUNCT_WS = re.compile(r"[\W_]+", re.UNICODE)


def normalize_claim_text(text: str) -> str:
    """The comparison key for duplicates: NFKC, case-folded, punctuation and spacing collapsed."""
    t = unicodedata.normalize("NFKC", text).casefold()
    return _PUNCT_WS.sub(" ", t).strip()


# Words whose presence or absence does not change what a claim asserts. Negations, quantifiers,
# auxiliaries and prepositions are deliberately absent: "born in" vs "born after" or "is" vs
# "was" must never merge.
_FILLER = frozenset({"a", "an", "the", "also", "then", "that", "which", "indeed"})


def _content_tokens(key: str) -> frozenset[str]:
    out = set()
    for tok in key.split():
        if tok in _FILLER:
            continue
        # Fold a plain plural so "ships"/"ship" match; digits never change (1906 ≠ 1907).
        if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss") and not tok.isdigit():
            tok = tok[:-1]
        out.add(tok)
    return frozenset(out)


def near_duplicates(a: str, b: str, threshold: float = DEFAULT_SIMILARITY) -> bool:
    """Whether two claim texts say the same thing up to wording noise.

    Equal after `normalize_claim_text`, or — when `threshold` < 1 — both (1) the same content
    words (ignoring articles and a few fillers, folding a plain plural "-s") and (2) a
    `difflib.SequenceMatcher` ratio of at least `threshold` between the normalised texts. (1) keeps
    claims that differ in a number, a name, a negation or a preposition apart however long they
    are; (2) keeps apart claims that use the same words in a different order ("A hired B" vs
    "B hired A").
    """
    ka, kb = normalize_claim_text(a), normalize_claim_text(b)
    if ka == kb:
        return True
    if threshold >= 1.0 or _content_tokens(ka) != _content_tokens(kb):
        return False
    return difflib.SequenceMatcher(None, ka, kb, autojunk=False).ratio() >= threshold


def merge_claims(
    found: Sequence[tuple[int, str]], *, similarity_threshold: float = DEFAULT_SIMILARITY
) -> list[Claim]:
    """Merge claims given as `(sentence_index, text)` in document order.

    Two claims are merged when `near_duplicates(a, b, similarity_threshold)` holds. The first text
    seen is kept verbatim; the merged claim lists every source sentence (sorted). Ids are `c1`,
    `c2`, … in order of first appearance. Empty texts are dropped.
    """
    kept: list[tuple[str, str, set[int]]] = []  # (text, key, sentence indices)
    by_key: dict[str, int] = {}
    for idx, text in found:
        key = normalize_claim_text(text)
        if not key:
            continue
        pos = by_key.get(key)
        if pos is None:
            pos = next(
                (
                    j
                    for j, (other, _, _) in enumerate(kept)
                    if near_duplicates(text, other, similarity_threshold)
                ),
                None,
            )
        if pos is None:
            by_key[key] = len(kept)
            kept.append((text, key, {idx}))
        else:
            by_key.setdefault(key, pos)
            kept[pos][2].add(idx)
    return [
        Claim(f"c{n}", text, tuple(sorted(indices))) for n, (text, _, indices) in enumerate(kept, 1)
    ]


# -- public API -------------------------------------------------------------------------------


def text_sentences(text: str) -> list[str]:
    """Sentences of `text` exactly as the verifier indexes the terminal node."""
    got = split_sentences(text)
    return got if got else ([text.strip()] if text.strip() else [])


async def extract(
    model: Model,
    text: str,
    *,
    question: str | None = None,
    config: ExtractionConfig | None = None,
    decompose: DecomposeFn | None = None,
) -> ExtractionResult:
    """Extract claims from `text` and return them with the per-sentence trace.

    In the per-sentence form `decompose` defaults to
    `veritrail.method.subclaims.decompose_text_parts` (the verifier's sub-claim decomposition, so
    one prompt serves both). In the batched form (the default) decomposition is a batched call of
    its own, unless `decompose` is given: then it is called per sentence, as here.
    """
    cfg = config or ExtractionConfig()
    sentences = text_sentences(text)
    if cfg.mode is ExtractionMode.BATCHED:
        batched = await extract_batched(model, sentences, question, cfg, decompose)
        found = [(t.index, c) for t in batched for c in t.claims]
        merged = merge_claims(found, similarity_threshold=cfg.similarity_threshold)
        return ExtractionResult(tuple(sentences), tuple(merged), tuple(batched))
    dec = decompose or decompose_text_parts
    sem = asyncio.Semaphore(cfg.max_parallel) if cfg.max_parallel else None

    async def one(i: int) -> SentenceTrace:
        if sem is None:
            return await _process_sentence(model, sentences, i, question, cfg, dec)
        async with sem:
            return await _process_sentence(model, sentences, i, question, cfg, dec)

    trace = await asyncio.gather(*(one(i) for i in range(len(sentences))))
    found = [(t.index, c) for t in trace for c in t.claims]
    claims = merge_claims(found, similarity_threshold=cfg.similarity_threshold)
    return ExtractionResult(tuple(sentences), tuple(claims), tuple(trace))


async def extract_claims(
    model: Model,
    text: str,
    *,
    question: str | None = None,
    context_before: int = DEFAULT_CONTEXT_BEFORE,
    context_after: int = DEFAULT_CONTEXT_AFTER,
    similarity_threshold: float = DEFAULT_SIMILARITY,
    mode: ExtractionMode | str = ExtractionMode.BATCHED,
) -> list[Claim]:
    """Extract the claims of `text` (the merged list only; see `extract` for the trace)."""
    cfg = ExtractionConfig(
        context_before, context_after, similarity_threshold, mode=ExtractionMode(mode)
    )
    return list((await extract(model, text, question=question, config=cfg)).claims)


class LMClaimSource:
    """A `veritrail.method.claims.ClaimSource` that extracts claims from the terminal node's text.

    This is what `veritrail verify DAG` without `--claims` plugs in.
    """

    def __init__(
        self, model: Model, *, question: str | None = None, config: ExtractionConfig | None = None
    ) -> None:
        self.model = model
        self.question = question
        self.config = config or ExtractionConfig()
        self.last: ExtractionResult | None = None
        """The full result of the latest call (sentences and trace), for reports."""

    async def claims_for(self, terminal_text: str) -> list[Claim]:
        """Extract and return the merged claims of `terminal_text`."""
        self.last = await extract(
            self.model, terminal_text, question=self.question, config=self.config
        )
        return list(self.last.claims)


# -- claims file ------------------------------------------------------------------------------


CLAIMS_FILE_FORMAT = "veritrail-claims"


def claims_document(
    result: ExtractionResult,
    *,
    source: str | None = None,
    model: str | None = None,
    question: str | None = None,
) -> dict[str, Any]:
    """The file `veritrail extract` writes: `{"claims": [...]}` plus what a reviewer needs.

    `veritrail.method.claims.load_claims` reads only `claims` (objects with `id`, `text` and
    `sentence_indices`); `sentences` lists the segmented text so the indices can be checked by eye.
    """
    return {
        "format": CLAIMS_FILE_FORMAT,
        "source": source,
        "model": model,
        "question": question,
        "sentences": list(result.sentences),
        "claims": claims_to_json(result.claims),
    }


def write_claims_document(doc: Mapping[str, Any], path: str | Path) -> None:
    """Write a claims document as indented UTF-8 JSON."""
    Path(path).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def trace_to_json(trace: Sequence[SentenceTrace]) -> list[dict[str, Any]]:
    """The per-sentence trace as JSON-ready dicts (enums as their values)."""
    out = []
    for t in trace:
        out.append(
            {
                "index": t.index,
                "sentence": t.sentence,
                "outcome": t.outcome.value,
                "selected": t.selected,
                "selection_reason": t.selection_reason,
                "disambiguation": t.disambiguation.value if t.disambiguation else None,
                "disambiguated": t.disambiguated,
                "disambiguation_reason": t.disambiguation_reason,
                "claims": list(t.claims),
                "error": t.error,
                "raw": t.raw,
                "issues": [i.to_json() for i in t.issues],
            }
        )
    return out


__all__ = [
    "CLAIMS_FILE_FORMAT",
    "DEFAULT_BATCH_SENTENCES",
    "DEFAULT_BATCH_TOKENS",
    "DEFAULT_CONTEXT_AFTER",
    "DEFAULT_CONTEXT_BEFORE",
    "DEFAULT_SIMILARITY",
    "DISAMBIGUATION_SCHEMA",
    "SELECTION_SCHEMA",
    "DecomposeFn",
    "Disambiguation",
    "ExtractionConfig",
    "ExtractionMode",
    "ExtractionResult",
    "LMClaimSource",
    "SentenceOutcome",
    "SentenceTrace",
    "claims_document",
    "decomposition_context",
    "extract",
    "extract_claims",
    "merge_claims",
    "near_duplicates",
    "normalize_claim_text",
    "text_sentences",
    "trace_to_json",
    "write_claims_document",
]
