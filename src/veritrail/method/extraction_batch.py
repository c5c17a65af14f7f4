"""Batched claim extraction (docs/extraction.md, "Two forms"): each stage over many sentences per call.

The per-sentence form (`extraction`) asks three questions of every sentence, one
call each. Here the text is cut into windows (`batch_windows`: the whole text when it is short, else
runs of at most `ExtractionConfig.batch_sentences` sentences and `batch_tokens` estimated tokens,
each shown with `context_before` / `context_after` sentences around it), and every stage answers
all the sentences of a window in one call: selection (`claim_selection_batch` prompt), then
disambiguation of the parts selection kept (`claim_disambiguation_batch`), then decomposition of the
parts that came out self-contained (`claim_decomposition_batch`). A sentence a stage drops does not
reach the next stage, and a stage left with no sentence makes no call: a 5-sentence answer costs
3 calls (plus one for a stage whose reply left a sentence out, below).

Ids. Every sentence of a prompt is shown after its id in square brackets (`sentence_id`: the
sentence's index + 1, the same in every stage and window); the reply maps ids to answers. The
engine owns the ids, as in evidence selection: an id the call did not ask about is dropped and
recorded as an `unknown_id` issue on every sentence of the call; a second answer for one id is
dropped and recorded on that sentence. **A sentence missing from a reply** (or whose entry cannot
be read) is asked again once, together with the other missing ones of that call, in one more call
of the same stage; still missing after that, it is recorded as an error for that sentence
(`outcome = "error"`), as an unreadable reply is in the per-sentence form. A reply that cannot be
read at all (after the model layer's re-asks) is an error for every sentence of the call.

Issues of a call (its unreadable replies, unknown ids) go to every sentence it served, so
`ExtractionResult.issues_by_claim` hands them to the claims those sentences gave. Calls are
accounted under the per-sentence form's step names (`claim_selection`, `claim_disambiguation`,
`decomposition`) and carry their own schema names (`SELECTION_SCHEMA_NAME`, ...), so test models
and caches tell the two forms apart while cost tables keep their rows.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from ..fencing import fence, looks_like_fence_line, normalize_line_breaks
from ..lm.base import GenerateConfig, Message
from ..lm.model import Model
from ..records import IssueKind, SelectionIssue, Step
from .extraction_common import (
    DecomposeFn,
    Disambiguation,
    ExtractionConfig,
    SentenceOutcome,
    SentenceTrace,
    decomposition_context,
    dedupe_in_order,
    question_block,
    read_disambiguation,
    str_field,
)
from .prompting import load_prompt, overridden
from .steps import Decomposition, unreadable_issues
from .subclaims import DecompositionError
from .tokens import estimate_tokens

SELECTION_SCHEMA_NAME = "claim_selection_batch"
DISAMBIGUATION_SCHEMA_NAME = "claim_disambiguation_batch"
DECOMPOSITION_SCHEMA_NAME = "claim_decomposition_batch"

MAX_PARTS = 12
"""Parts one sentence may be split into. Bounded because a grammar-constrained small model can
otherwise list parts until its token cap; a sentence with more separate assertions is rare."""

T = TypeVar("T")


# -- schemas: one object per size (the model layer remembers strict-mode support per object) ------


def _entries_schema(n: int, props: dict[str, Any]) -> dict[str, Any]:
    entry = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, **props},
        "required": ["id", *props],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"sentences": {"type": "array", "items": entry, "maxItems": n}},
        "required": ["sentences"],
        "additionalProperties": False,
    }


@functools.lru_cache(maxsize=64)
def selection_schema(n: int) -> dict[str, Any]:
    """The selection reply for `n` sentences: `{"sentences": [{"id", "text"}]}`, an empty text
    meaning "nothing checkable". Shared object: do not mutate."""
    return _entries_schema(n, {"text": {"type": "string"}})


@functools.lru_cache(maxsize=64)
def disambiguation_schema(n: int) -> dict[str, Any]:
    """The disambiguation reply for `n` parts: `{"sentences": [{"id", "status", "text"}]}`."""
    status = {"type": "string", "enum": [d.value for d in Disambiguation]}
    return _entries_schema(n, {"status": status, "text": {"type": "string"}})


@functools.lru_cache(maxsize=64)
def decomposition_schema(n: int) -> dict[str, Any]:
    """The decomposition reply for `n` statements: `{"sentences": [{"id", "parts": [...]}]}`."""
    parts = {"type": "array", "items": {"type": "string"}, "maxItems": MAX_PARTS}
    return _entries_schema(n, {"parts": parts})


# -- windows ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Window:
    """Sentences `lo`..`hi - 1` are answered; `shown_lo`..`shown_hi - 1` are shown (with context)."""

    lo: int
    hi: int
    shown_lo: int
    shown_hi: int

    @property
    def targets(self) -> range:
        """The indices of the sentences this window answers."""
        return range(self.lo, self.hi)


def batch_windows(sentences: Sequence[str], cfg: ExtractionConfig) -> list[Window]:
    """Consecutive runs of sentences, each of at most `cfg.batch_sentences` sentences and
    `cfg.batch_tokens` estimated tokens (a longer single sentence goes alone), with the
    configured context around each run."""
    out: list[Window] = []
    n, lo = len(sentences), 0
    while lo < n:
        hi, tokens = lo, 0
        while hi < n and hi - lo < cfg.batch_sentences:
            t = estimate_tokens(sentences[hi])
            if hi > lo and cfg.batch_tokens is not None and tokens + t > cfg.batch_tokens:
                break
            tokens += t
            hi += 1
        out.append(Window(lo, hi, max(0, lo - cfg.context_before), min(n, hi + cfg.context_after)))
        lo = hi
    return out


def sentence_id(index: int) -> int:
    """The id sentence `index` has in every batched prompt (1-based, as a reader counts)."""
    return index + 1


def _one_line(text: str) -> str:
    # One entry per line: the model and the readers below find an entry by its leading id.
    return " ".join(text.split())


def _listed(items: Sequence[tuple[int, str]], label: str) -> str:
    return fence("\n".join(f"[{sentence_id(i)}] {_one_line(t)}" for i, t in items), label)


# -- reading replies ----------------------------------------------------------------------------


def _entries(value: Any) -> list[Any]:
    # The shape only: single entries are read one by one (`_run_stage`), so one bad entry costs
    # that sentence a second ask, not the whole call a re-ask.
    if isinstance(value, Mapping):
        value = value.get("sentences")
    if not isinstance(value, list):
        raise TypeError('expected {"sentences": [...]}')
    return value


_ID_TEXT = re.compile(r"\[?\s*(\d+)\s*\]?")
_ECHOED_ID = re.compile(r"^\s*\[\d+\]\s*")


def _entry_id(entry: Any) -> int | None:
    raw = entry.get("id") if isinstance(entry, Mapping) else None
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        m = _ID_TEXT.fullmatch(raw.strip())
        return int(m.group(1)) if m else None
    return None


def _clean(text: str) -> str:
    """`text` without the prompt's framing a model may copy into it: a leading `[id] ` and fence
    lines (a claim never starts with a sentence id, and a fence line is never part of one)."""
    lines = [_ECHOED_ID.sub("", line).strip() for line in normalize_line_breaks(text).split("\n")]
    return " ".join(line for line in lines if line and not looks_like_fence_line(line))


@dataclass(frozen=True, slots=True)
class _Kept:
    text: str  # empty: nothing checkable


def _read_selected(entry: Mapping[str, Any]) -> _Kept:
    return _Kept(_clean(str_field(entry, "text")))


def _read_resolved(entry: Mapping[str, Any]) -> tuple[Disambiguation, str]:
    got = read_disambiguation(entry)
    text = _clean(got.text)
    if got.status is not Disambiguation.UNRESOLVABLE and not text:
        raise ValueError("a resolved or clear part needs a non-empty 'text'")
    return got.status, text


def _read_parts(entry: Mapping[str, Any]) -> tuple[str, ...]:
    parts = entry.get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise TypeError("'parts' must be a list of strings")
    return tuple(dedupe_in_order(c for c in (_clean(p) for p in parts) if c))


@dataclass(slots=True)
class _StageResult(Generic[T]):
    answers: dict[int, T] = field(default_factory=dict)
    failed: dict[int, tuple[str, str]] = field(default_factory=dict)  # index -> (error, raw)
    issues: dict[int, list[SelectionIssue]] = field(default_factory=dict)


async def _run_stage(
    model: Model,
    *,
    step: Step,
    schema_name: str,
    schema: Callable[[int], dict[str, Any]],
    render: Callable[[Sequence[int]], list[Message]],
    targets: Sequence[int],
    read: Callable[[Mapping[str, Any]], T],
    max_tokens: int | None,
    label: str,
) -> _StageResult[T]:
    """One stage over `targets` (sentence indices): a call, then at most one more for the
    sentences the first reply left out or answered unreadably."""
    out: _StageResult[T] = _StageResult(issues={i: [] for i in targets})
    pending = list(targets)
    for ask in (1, 2):
        if not pending:
            break
        res = await model.generate_json(
            render(pending),
            schema=schema(len(pending)),
            config=GenerateConfig(
                schema_name=schema_name,
                # The per-sentence cap, once per sentence asked about.
                max_tokens=None if max_tokens is None else max_tokens * len(pending),
            ),
            step=step,
            validate=_entries,
        )
        shared = unreadable_issues(step, res.unreadable)
        for i in pending:
            out.issues[i].extend(shared)
        if res.value is None:
            for i in pending:
                out.failed[i] = (f"{label}: {res.error}", res.raw)
            return out
        asked = {sentence_id(i): i for i in pending}
        got: dict[int, T] = {}
        for entry in res.value:
            sid = _entry_id(entry)
            index = asked.get(sid) if sid is not None else None
            if index is None:
                shown = entry.get("id") if isinstance(entry, Mapping) else entry
                note = SelectionIssue(
                    IssueKind.UNKNOWN_ID, f"{step}: id {str(shown)[:40]!r} was not asked for"
                )
                for k in pending:
                    out.issues[k].append(note)
                continue
            if index in got:
                out.issues[index].append(
                    SelectionIssue(
                        IssueKind.UNPARSEABLE_REPLY,
                        f"{step}: id {sid} answered twice (the first answer kept)",
                    )
                )
                continue
            try:
                got[index] = read(entry)
            except (TypeError, ValueError, KeyError) as exc:
                out.issues[index].append(
                    SelectionIssue(
                        IssueKind.UNPARSEABLE_REPLY,
                        f"{step}: ask {ask}: the entry for id {sid}: {type(exc).__name__}: {exc}",
                    )
                )
        out.answers.update(got)
        pending = [i for i in pending if i not in got]
        if ask == 2:
            for i in pending:
                out.failed[i] = (f"{label}: no readable answer for this sentence", res.raw)
    return out


# -- one window ---------------------------------------------------------------------------------


async def _decompose_each(
    model: Model,
    sentences: Sequence[str],
    items: Sequence[tuple[int, str]],
    question: str | None,
    cfg: ExtractionConfig,
    decompose: DecomposeFn,
) -> _StageResult[tuple[str, ...]]:
    """Decomposition by a caller's per-sentence function (`extract(decompose=...)`)."""
    out: _StageResult[tuple[str, ...]] = _StageResult(issues={i: [] for i, _ in items})

    async def one(i: int, text: str) -> None:
        before = sentences[max(0, i - cfg.context_before) : i]
        try:
            got = await decompose(model, text, decomposition_context(before, question))
        except DecompositionError as exc:
            out.issues[i].extend(unreadable_issues(Step.DECOMPOSITION, exc.unreadable))
            out.failed[i] = (f"decomposition: {exc}", exc.raw)
            return
        if isinstance(got, Decomposition):
            out.issues[i].extend(unreadable_issues(Step.DECOMPOSITION, got.unreadable))
            got = got.parts
        out.answers[i] = tuple(dedupe_in_order(p.strip() for p in got if p and p.strip()))

    await asyncio.gather(*(one(i, t) for i, t in items))
    return out


async def _window_traces(
    model: Model,
    sentences: Sequence[str],
    win: Window,
    question: str | None,
    cfg: ExtractionConfig,
    decompose: DecomposeFn | None,
) -> list[SentenceTrace]:
    asked_question = question_block(question)
    text = _listed([(i, sentences[i]) for i in range(win.shown_lo, win.shown_hi)], "text")
    traces = {i: SentenceTrace(i, sentences[i], SentenceOutcome.ERROR) for i in win.targets}
    issues: dict[int, list[SelectionIssue]] = {i: [] for i in win.targets}

    def settle(stage: _StageResult[Any]) -> None:
        for i, got in stage.issues.items():
            issues[i].extend(got)
        for i, (error, raw) in stage.failed.items():
            traces[i] = replace(traces[i], error=error, raw=raw)

    def render_selection(ids: Sequence[int]) -> list[Message]:
        return load_prompt("claim_selection_batch").render(
            question=asked_question, text=text, ids=", ".join(str(sentence_id(i)) for i in ids)
        )

    sel = await _run_stage(
        model,
        step=Step.CLAIM_SELECTION,
        schema_name=SELECTION_SCHEMA_NAME,
        schema=selection_schema,
        render=render_selection,
        targets=list(win.targets),
        read=_read_selected,
        max_tokens=cfg.max_tokens,
        label="selection",
    )
    settle(sel)
    kept: list[tuple[int, str]] = []
    for i, answer in sorted(sel.answers.items()):
        if answer.text:
            traces[i] = replace(traces[i], selected=answer.text)
            kept.append((i, answer.text))
        else:
            traces[i] = replace(traces[i], outcome=SentenceOutcome.NO_VERIFIABLE_CONTENT)

    resolved: list[tuple[int, str]] = []
    if kept:
        kept_text = dict(kept)

        # The shorter wording for capable models; the embedded models (concise replies) read
        # the longer one, with which they were measured (with the shorter one the 1.5B model
        # answered no sentence readably), and so does a prompt directory that overrides it.
        dis_prompt = "claim_disambiguation_batch"
        if not getattr(model, "concise_replies", False) and not overridden(dis_prompt):
            dis_prompt = "claim_disambiguation_batch_short"

        def render_disambiguation(ids: Sequence[int]) -> list[Message]:
            return load_prompt(dis_prompt).render(
                question=asked_question,
                text=text,
                parts=_listed([(i, kept_text[i]) for i in ids], "checkable parts"),
            )

        dis = await _run_stage(
            model,
            step=Step.CLAIM_DISAMBIGUATION,
            schema_name=DISAMBIGUATION_SCHEMA_NAME,
            schema=disambiguation_schema,
            render=render_disambiguation,
            targets=[i for i, _ in kept],
            read=_read_resolved,
            max_tokens=cfg.max_tokens,
            label="disambiguation",
        )
        settle(dis)
        for i, (status, rewrite) in sorted(dis.answers.items()):
            traces[i] = replace(traces[i], disambiguation=status)
            if status is Disambiguation.UNRESOLVABLE:
                traces[i] = replace(traces[i], outcome=SentenceOutcome.UNRESOLVABLE)
            else:
                traces[i] = replace(traces[i], disambiguated=rewrite)
                resolved.append((i, rewrite))

    if resolved:
        if decompose is not None:
            dec = await _decompose_each(model, sentences, resolved, question, cfg, decompose)
        else:
            statements = dict(resolved)

            def render_decomposition(ids: Sequence[int]) -> list[Message]:
                return load_prompt("claim_decomposition_batch").render(
                    question=asked_question,
                    text=text,
                    statements=_listed([(i, statements[i]) for i in ids], "statements"),
                )

            dec = await _run_stage(
                model,
                step=Step.DECOMPOSITION,
                schema_name=DECOMPOSITION_SCHEMA_NAME,
                schema=decomposition_schema,
                render=render_decomposition,
                targets=[i for i, _ in resolved],
                read=_read_parts,
                max_tokens=cfg.max_tokens,
                label="decomposition",
            )
        settle(dec)
        for i, parts in dec.answers.items():
            outcome = SentenceOutcome.CLAIMS if parts else SentenceOutcome.NO_CLAIMS
            traces[i] = replace(traces[i], outcome=outcome, claims=parts)

    return [replace(traces[i], issues=tuple(issues[i])) for i in win.targets]


async def extract_batched(
    model: Model,
    sentences: Sequence[str],
    question: str | None,
    cfg: ExtractionConfig,
    decompose: DecomposeFn | None = None,
) -> list[SentenceTrace]:
    """One `SentenceTrace` per sentence, in order, the stages run over windows of sentences
    (`batch_windows`; at most `cfg.max_parallel` windows in flight). `decompose`, when given,
    replaces the batched decomposition with a per-sentence call."""
    sem = asyncio.Semaphore(cfg.max_parallel) if cfg.max_parallel else None

    async def one(win: Window) -> list[SentenceTrace]:
        if sem is None:
            return await _window_traces(model, sentences, win, question, cfg, decompose)
        async with sem:
            return await _window_traces(model, sentences, win, question, cfg, decompose)

    done = await asyncio.gather(*(one(w) for w in batch_windows(sentences, cfg)))
    return [t for traces in done for t in traces]


__all__ = [
    "DECOMPOSITION_SCHEMA_NAME",
    "DISAMBIGUATION_SCHEMA_NAME",
    "MAX_PARTS",
    "SELECTION_SCHEMA_NAME",
    "Window",
    "batch_windows",
    "decomposition_schema",
    "disambiguation_schema",
    "extract_batched",
    "selection_schema",
    "sentence_id",
]
