"""The DAG of a single-step generation: `veritrail check ANSWER SOURCE...` and `veritrail.check`.

One answer written from a few sources (a RAG answer and its retrieved passages, a summary and its
document) is a two-stage DAG: every source is cut into chunks, which become the root nodes, and
the answer is the terminal node with every chunk as its source. Chunk ids are `NAME#N` (N from 1),
NAME being the file as given (or `source1`, `source2`, ... for texts given without a name), so
the evidence trail names the file and the part of it a sentence came from.

Chunks are whole sentences (`veritrail.method.segment`), cut by count (`chunk_sentences`, default 10)
or by an approximate token budget (`chunk_tokens`; a sentence longer than the budget is a chunk of
its own). Smaller chunks give a finer trail; the verdict reads every chunk with evidence in full,
so very large chunks cost more tokens per verdict.
"""

from __future__ import annotations

import glob
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..dag import Dag, DagValidationError
from ..method.segment import sentence_spans
from ..method.tokens import estimate_tokens
from ..redaction import redact_obj
from .job import InMemoryDag, JobInputError

ANSWER_ID = "answer"
"""The terminal node's id."""

DEFAULT_CHUNK_SENTENCES = 10

STDIN = "-"


@dataclass(frozen=True, slots=True)
class SourceText:
    """One source: its name (the chunk ids' prefix) and its text."""

    name: str
    text: str


def chunk_text(text: str, *, sentences: int | None = None, tokens: int | None = None) -> list[str]:
    """`text` cut into chunks of whole sentences: at most `sentences` sentences each, or (with
    `tokens`) as many as fit in about `tokens` tokens. The chunks are slices of `text` (whitespace
    between chunks dropped), so no sentence is altered."""
    if sentences is not None and tokens is not None:
        raise JobInputError("give a chunk size in sentences or in tokens, not both")
    if tokens is None and sentences is None:
        sentences = DEFAULT_CHUNK_SENTENCES
    size = sentences if sentences is not None else tokens
    if size is None or size < 1:
        raise JobInputError(f"the chunk size must be at least 1 (got {size})")
    spans = sentence_spans(text)
    groups: list[list[tuple[int, int]]] = []
    budget = 0
    for span in spans:
        cost = 1 if sentences is not None else estimate_tokens(text[span[0] : span[1]])
        if not groups or budget + cost > size:
            groups.append([])
            budget = 0
        groups[-1].append(span)
        budget += cost
    return [text[g[0][0] : g[-1][1]] for g in groups if g]


def single_step_dag(
    answer: str,
    sources: Sequence[SourceText],
    *,
    chunk_sentences: int | None = None,
    chunk_tokens: int | None = None,
) -> InMemoryDag:
    """The two-stage DAG: source chunks (roots) -> the answer (terminal). `JobInputError` on an
    empty answer, no sources, an empty source or two sources with one name.

    Texts are redacted (`redaction.redact_obj`: API keys, credential headers, URL passwords)
    once cut into chunks: the DAG is written to the run directory (`veritrail resume` reads it
    back, and its hash is the run's), so it must hold no secret, and the run then verifies the
    very texts the run directory keeps (a resumed run equals an uninterrupted one). The model
    is sent the redacted texts too."""
    if not answer.strip():
        raise JobInputError("the answer is empty")
    if not sources:
        raise JobInputError("give at least one source")
    seen: set[str] = set()
    records: list[dict[str, object]] = []
    for src in sources:
        if src.name in seen:
            raise JobInputError(f"the source {src.name} is given twice")
        seen.add(src.name)
        chunks = chunk_text(src.text, sentences=chunk_sentences, tokens=chunk_tokens)
        if not chunks:
            raise JobInputError(f"the source {src.name} is empty")
        records.extend(
            {"id": f"{src.name}#{i}", "text": chunk, "sources": []}
            for i, chunk in enumerate(chunks, 1)
        )
    records.append({"id": ANSWER_ID, "text": answer, "sources": [str(r["id"]) for r in records]})
    texts = redact_obj([r["text"] for r in records])  # the same list when nothing is secret
    for r, text in zip(records, texts, strict=True):
        r["text"] = text
    try:
        dag = Dag.from_records(records, meta={"made_by": "veritrail check"})
    except DagValidationError as exc:  # not expected: the records are built above
        raise JobInputError(str(exc)) from None
    return InMemoryDag(dag, name=_stem(sources[0].name) if len(sources) == 1 else "check")


def _stem(name: str) -> str:
    return Path(name).stem or "check"


def expand_paths(patterns: Iterable[str]) -> list[str]:
    """Files named on the command line: globs expanded (sorted; a glob that matches nothing is an
    error, a file named twice counts once), `-` kept for stdin."""
    out: list[str] = []
    for pat in patterns:
        if pat != STDIN and glob.has_magic(pat):
            hits = sorted(p for p in glob.glob(pat, recursive=True) if Path(p).is_file())
            if not hits:
                raise JobInputError(f"no file matches {pat}")
            out.extend(hits)
        else:
            out.append(pat)
    unique = list(dict.fromkeys(out))
    if unique.count(STDIN) > 1:
        raise JobInputError("stdin (-) can be read only once")
    return unique


def read_named(path: str, what: str, stdin_text: str | None = None) -> SourceText:
    """A file's text (UTF-8 input rules of `veritrail.textio`), or stdin's for `-`."""
    from ..textio import InputError, read_input_text

    if path == STDIN:
        text = stdin_text if stdin_text is not None else sys.stdin.read()
        return SourceText("stdin", text)
    if not Path(path).is_file():
        raise JobInputError(f"{what} {path} not found")
    try:
        return SourceText(path, read_input_text(path, what))
    except InputError as exc:
        raise JobInputError(str(exc)) from None
