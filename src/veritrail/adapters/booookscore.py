"""BooookScore summary traces → one generation DAG per book (docs/adapters.md, "BooookScore").

BooookScore (Chang et al., ICLR 2024) publishes its summaries but not the books, so the lowest
summaries stand in as the source text (roots).

**Hierarchical** files map each book to ``{"summaries_dict": {"0": [...], "1": [...], …},
"final_summary": "…"}``. Level 0 holds the chunk summaries (roots, stage 1, ids ``L0-1`` …);
level *L* holds the summaries merged from level *L-1* (stage *L+1*, ids ``L{L}-{j}``). When a
level has one summary, it was merged from every summary below it, which is certain. When a level
has several, the file does not say which lower summaries each one merged. BooookScore's code
merges *consecutive* lower summaries, packing each group as full as the context allows, and
passes the previous merged summary of the same level as context. We assume exactly that: the
lower level is cut into as many consecutive groups as the level has summaries, earlier groups
taking the extra member when the split is uneven, and summary *j* also draws on summary *j-1* of
its level (an edge within one stage). ``meta["booookscore"]["assumed_grouping"]`` says whether
this assumption was needed. The final summary is the top level's single summary (the
terminal); if it differs from that summary's text, it becomes a node of its own one stage higher.
In ``claude-88000-hier.json`` every book has two levels whose top level holds one summary equal
to the final summary, so no grouping had to be assumed.

**Incremental** files map each book to the list of running summaries, one per chunk read. The
first summary is the root; summary *k* is written from summary *k-1* (and a chunk of the book,
which is not public): a chain ``S1 → S2 → … → Sn`` with stages 1…n, the last one terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from ..dag import Dag
from ..errors import InputProblem


class TraceKind(StrEnum):
    """The two BooookScore trace layouts."""

    HIERARCHICAL = "hierarchical"
    INCREMENTAL = "incremental"


class BooookScoreError(InputProblem, ValueError):
    """The file is not a BooookScore trace, or a book's entry is malformed."""


def read_traces(path: str | Path) -> tuple[TraceKind, dict[str, Any]]:
    """Read a trace file and tell which layout it has."""
    from ..textio import InputError, read_input_json

    try:
        doc = read_input_json(path, "BooookScore trace")  # the input rules of every file
    except InputError as exc:
        raise BooookScoreError(str(exc)) from None
    if not isinstance(doc, dict) or not doc:
        raise BooookScoreError(f"{path}: expected an object mapping book names to summaries")
    first = next(iter(doc.values()))
    if isinstance(first, dict) and "summaries_dict" in first:
        return TraceKind.HIERARCHICAL, doc
    if isinstance(first, list):
        return TraceKind.INCREMENTAL, doc
    raise BooookScoreError(
        f"{path}: neither the hierarchical nor the incremental BooookScore layout"
    )


def _texts(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise BooookScoreError(f"{where}: expected a non-empty list of summaries")
    bad = [i for i, t in enumerate(value) if not isinstance(t, str) or not t.strip()]
    if bad:
        raise BooookScoreError(f"{where}: empty or non-text summaries at positions {bad}")
    return list(value)


def _split(n: int, m: int) -> list[range]:
    """`n` items in `m` consecutive groups, earlier groups one larger when uneven."""
    base, extra = divmod(n, m)
    out, start = [], 0
    for j in range(m):
        size = base + (1 if j < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def hierarchical_book_dag(book: str, entry: Mapping[str, Any]) -> Dag:
    """The DAG of one book of a hierarchical trace."""
    sd = entry.get("summaries_dict")
    if not isinstance(sd, Mapping) or not sd:
        raise BooookScoreError(f"{book}: no summaries_dict")
    try:
        levels = sorted(int(k) for k in sd)
    except ValueError:
        raise BooookScoreError(f"{book}: summaries_dict keys must be level numbers") from None
    if levels != list(range(len(levels))):
        raise BooookScoreError(f"{book}: levels must be 0…n without gaps, got {levels}")
    texts = [
        _texts(sd[str(lv)] if str(lv) in sd else sd[lv], f"{book} level {lv}") for lv in levels
    ]
    records: list[dict[str, Any]] = []
    assumed = False
    for lv, summaries in enumerate(texts):
        if lv == 0:
            records += [
                {"id": f"L0-{i + 1}", "text": t, "sources": [], "stage": 1}
                for i, t in enumerate(summaries)
            ]
            continue
        below = len(texts[lv - 1])
        if len(summaries) > below:
            raise BooookScoreError(
                f"{book}: level {lv} has more summaries ({len(summaries)}) than level {lv - 1}"
            )
        groups = _split(below, len(summaries))
        assumed = assumed or len(summaries) > 1
        for j, t in enumerate(summaries):
            srcs = [f"L{lv - 1}-{i + 1}" for i in groups[j]]
            if j > 0:
                srcs.append(f"L{lv}-{j}")  # the previous merged summary, given as context
            records.append({"id": f"L{lv}-{j + 1}", "text": t, "sources": srcs, "stage": lv + 1})
    top = texts[-1]
    final = entry.get("final_summary")
    stage_names = {str(lv + 1): f"level {lv} summaries" for lv in levels}
    stage_names["1"] = "chunk summaries (level 0, roots)"
    if len(top) > 1 or (
        isinstance(final, str) and final.strip() and final.strip() != top[0].strip()
    ):
        if not isinstance(final, str) or not final.strip():
            raise BooookScoreError(f"{book}: several top-level summaries and no final_summary")
        records.append(
            {
                "id": "final",
                "text": final,
                "sources": [f"L{levels[-1]}-{j + 1}" for j in range(len(top))],
                "stage": len(levels) + 1,
            }
        )
        stage_names[str(len(levels) + 1)] = "final summary"
    meta = {
        "source": "booookscore",
        "book": book,
        "stage_names": stage_names,
        "booookscore": {
            "kind": TraceKind.HIERARCHICAL.value,
            "levels": len(levels),
            "assumed_grouping": assumed,
        },
    }
    return Dag.from_records(records, meta)


def incremental_book_dag(book: str, summaries: Sequence[Any]) -> Dag:
    """The DAG of one book of an incremental trace (a chain)."""
    texts = _texts(list(summaries), book)
    records = [
        {"id": f"S{k + 1}", "text": t, "sources": [f"S{k}"] if k else [], "stage": k + 1}
        for k, t in enumerate(texts)
    ]
    meta = {
        "source": "booookscore",
        "book": book,
        "stage_names": {
            str(k + 1): f"running summary after chunk {k + 1}" for k in range(len(texts))
        },
        "booookscore": {"kind": TraceKind.INCREMENTAL.value, "steps": len(texts)},
    }
    return Dag.from_records(records, meta)


def iter_book_dags(path: str | Path) -> Iterator[tuple[str, Dag]]:
    """(book, DAG) for every book of a hierarchical or incremental trace file, in file order."""
    kind, doc = read_traces(path)
    for book, entry in doc.items():
        if kind is TraceKind.HIERARCHICAL:
            if not isinstance(entry, Mapping):
                raise BooookScoreError(f"{book}: expected an object")
            yield book, hierarchical_book_dag(book, entry)
        else:
            if not isinstance(entry, list):
                raise BooookScoreError(f"{book}: expected a list of summaries")
            yield book, incremental_book_dag(book, entry)


def load_book_dags(path: str | Path) -> dict[str, Dag]:
    """Every book's DAG of a trace file, by book name."""
    return dict(iter_book_dags(path))


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_filename(book: str) -> str:
    """A file name for a book's DAG (``a-day-of-fallen-night.epub`` → ``a-day-of-fallen-night.epub.json``)."""
    return (_UNSAFE.sub("_", book).strip("._") or "book") + ".json"


__all__ = [
    "BooookScoreError",
    "TraceKind",
    "hierarchical_book_dag",
    "incremental_book_dag",
    "iter_book_dags",
    "load_book_dags",
    "read_traces",
    "safe_filename",
]
