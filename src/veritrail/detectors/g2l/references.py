"""G2LDetect's references: labelled documents, packed into chunks that fit one check prompt.

`as_references` labels plain texts, `references_from_dag` takes a DAG's root nodes,
`chunk_references` packs references into chunks of at most a token budget (splitting a document
at sentence boundaries only when it does not fit a chunk of its own), and `render_chunk` fences a
chunk's pieces for the check prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...dag import Dag
from ...fencing import fence
from ...method.segment import split_sentences
from ...method.tokens import estimate_tokens


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference document with the label it is shown under."""

    label: str
    text: str


def as_references(refs: Sequence[str | Reference]) -> list[Reference]:
    """Label plain strings `Document 1`, `Document 2`, …; keep given `Reference`s."""
    return [
        r if isinstance(r, Reference) else Reference(f"Document {i}", r)
        for i, r in enumerate(refs, 1)
    ]


def references_from_dag(dag: Dag) -> list[Reference]:
    """The root nodes of a DAG (sorted by id), labelled by node id."""
    return [Reference(f"node {nid}", dag.node(nid).text) for nid in sorted(dag.roots)]


@dataclass(frozen=True, slots=True)
class _Piece:
    label: str
    text: str


def chunk_references(refs: Sequence[Reference], budget: int) -> list[list[_Piece]]:
    """Pack references, in order, into chunks of at most `budget` estimated tokens.

    A document that does not fit in the room left is split at sentence boundaries and its parts
    are labelled `(part k)`; a single sentence larger than the budget forms a chunk on its own.
    """
    chunks: list[list[_Piece]] = []
    cur: list[_Piece] = []
    used = 0

    def flush() -> None:
        nonlocal cur, used
        if cur:
            chunks.append(cur)
        cur, used = [], 0

    for ref in refs:
        cost = estimate_tokens(ref.text)
        if used + cost > budget and cost <= budget:
            flush()  # a document that fits a chunk of its own is never split
        if used + cost <= budget:
            cur.append(_Piece(ref.label, ref.text))
            used += cost
            continue
        sentences = split_sentences(ref.text) or [ref.text]
        part, buf_cost = 1, 0
        buf: list[str] = []
        for s in sentences:
            c = estimate_tokens(s) + 1
            if buf and used + buf_cost + c > budget:
                cur.append(_Piece(f"{ref.label} (part {part})", " ".join(buf)))
                part += 1
                buf, buf_cost = [], 0
                flush()
            elif not buf and used + c > budget and cur:
                flush()
            buf.append(s)
            buf_cost += c
        if buf:
            label = f"{ref.label} (part {part})" if part > 1 else ref.label
            cur.append(_Piece(label, " ".join(buf)))
            used += buf_cost
    flush()
    return chunks


def render_chunk(chunk: Sequence[_Piece]) -> str:
    """A chunk as the check prompt shows it: each piece fenced under its label."""
    return "\n\n".join(fence(p.text, p.label) for p in chunk)


__all__ = [
    "Reference",
    "as_references",
    "chunk_references",
    "references_from_dag",
    "render_chunk",
]
