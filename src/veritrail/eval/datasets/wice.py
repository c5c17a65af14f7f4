"""WiCE (Kamoi et al. 2023) → evaluation items (docs/evaluation.md, "WiCE").

Every claim becomes a single-step DAG whose roots are the cited article in chunks and whose
terminal is the claim's Wikipedia sentence; gold evidence is WiCE's supporting sentences mapped
to (node id, sentence index) keys, and `wice_to_wice_indices` maps them back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...method.segment import split_sentences
from ...records import GoldClaim, SentenceKey, Verdict
from .format import DatasetError, EvalItem, nonblank_lines

WICE_LABELS: dict[str, Verdict] = {
    "supported": Verdict.FULLY_SUPPORTED,
    "partially_supported": Verdict.NOT_FULLY_SUPPORTED,
    "not_supported": Verdict.NOT_FULLY_SUPPORTED,
}


@dataclass(frozen=True, slots=True)
class WiceChunking:
    """How one WiCE article became root nodes.

    `sentence_map[i]` lists the (node id, sentence index) pieces WiCE sentence `i` became (empty
    for a blank WiCE sentence, several when our splitter cuts one WiCE sentence in two).
    """

    records: tuple[dict[str, Any], ...]
    sentence_map: tuple[tuple[SentenceKey, ...], ...]


def chunk_article(sentences: Sequence[str], per_chunk: int, prefix: str = "chunk") -> WiceChunking:
    """Group article sentences into root nodes so that segmentation gives them back exactly.

    Sentences are joined with blank lines: the segmenter treats a blank line as a hard block
    boundary, so segmenting a chunk equals segmenting each sentence on its own and concatenating.
    That equality is checked here; a failure raises rather than mislabel gold evidence.
    """
    if per_chunk < 1:
        raise ValueError("sentences per chunk must be >= 1")
    records: list[dict[str, Any]] = []
    smap: list[tuple[SentenceKey, ...]] = []
    for start in range(0, len(sentences), per_chunk):
        group = sentences[start : start + per_chunk]
        node_id = f"{prefix}-{start // per_chunk}"
        kept = [s.strip() for s in group if s.strip()]
        pieces_all: list[str] = []
        for s in group:
            pieces = split_sentences(s) if s.strip() else []
            smap.append(tuple((node_id, len(pieces_all) + j) for j in range(len(pieces))))
            pieces_all.extend(pieces)
        if not kept:
            continue
        text = "\n\n".join(kept)
        if split_sentences(text) != pieces_all:
            raise DatasetError(f"{node_id}: segmentation of the chunk differs from its sentences")
        records.append({"id": node_id, "text": text, "sources": []})
    # Blank sentences inside otherwise empty chunks point at a node that does not exist.
    present = {r["id"] for r in records}
    smap = [tuple(k for k in ks if k[0] in present) for ks in smap]
    return WiceChunking(tuple(records), tuple(smap))


def wice_items(
    path: str | Path,
    *,
    sentences_per_chunk: int = 10,
    limit: int | None = None,
) -> list[EvalItem]:
    """Convert a WiCE claim file (`entailment_retrieval/claim/{dev,test}.jsonl`) to items.

    One item per claim: roots = the article's `evidence` sentences in chunks of
    `sentences_per_chunk`; terminal = the claim's sentence (WiCE's `claim` field is that
    Wikipedia sentence); the claim = the same text. Each gold set of `supporting_sentences` is
    mapped to (root node id, sentence index) through `chunk_article`'s map; the original indices
    are kept in the claim's meta. Labels: supported → Fully Supported, partially_supported and
    not_supported → Not Fully Supported (the original label stays in meta).
    """
    items: list[EvalItem] = []
    p = Path(path)
    for lineno, line in nonblank_lines(p):
        if limit is not None and len(items) >= limit:
            break
        row = json.loads(line)
        try:
            wid = str(row["meta"]["id"])
            label = WICE_LABELS[row["label"]]
            chunking = chunk_article(row["evidence"], sentences_per_chunk)
        except (KeyError, TypeError) as exc:
            raise DatasetError(f"{p}:{lineno}: not a WiCE claim row ({exc})") from None
        gold: list[frozenset[SentenceKey]] = []
        unmapped: list[int] = []
        for alt in row.get("supporting_sentences", []):
            keys: set[SentenceKey] = set()
            for i in alt:
                mapped = chunking.sentence_map[i] if 0 <= i < len(chunking.sentence_map) else ()
                if not mapped:
                    unmapped.append(i)
                keys.update(mapped)
            if keys:
                gold.append(frozenset(keys))
        terminal = {
            "id": "claim-sentence",
            "text": row["claim"],
            "sources": [r["id"] for r in chunking.records],
        }
        claim = GoldClaim(
            id=wid,
            text=row["claim"],
            label=label,
            gold_evidence=tuple(gold),
            sentence_indices=(0,),
            meta={
                "wice_label": row["label"],
                "wice_supporting_sentences": row.get("supporting_sentences", []),
                **({"wice_unmapped_gold": sorted(set(unmapped))} if unmapped else {}),
            },
        )
        items.append(
            EvalItem(
                id=wid,
                claims=(claim,),
                dag_records=(*chunking.records, terminal),
                meta={
                    "source": "wice",
                    "title": row["meta"].get("claim_title", ""),
                    "sentences_per_chunk": sentences_per_chunk,
                    "wice_sentence_map": [[list(k) for k in ks] for ks in chunking.sentence_map],
                },
            )
        )
    return items


def wice_to_wice_indices(item: EvalItem, keys: Iterable[SentenceKey]) -> set[int]:
    """Map (node, sentence) keys of a converted WiCE item back to WiCE sentence indices."""
    back: dict[SentenceKey, int] = {}
    for i, ks in enumerate(item.meta.get("wice_sentence_map", [])):
        for node, s in ks:
            back[(node, s)] = i
    return {back[k] for k in keys if k in back}


def looks_like_wice(path: Path) -> bool:
    """Whether the first line of `path` is a WiCE claim row (how `open_dataset` guesses)."""
    with path.open(encoding="utf-8") as fh:
        first = fh.readline()
    try:
        row = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(row, dict) and "supporting_sentences" in row and "evidence" in row


__all__ = [
    "WICE_LABELS",
    "WiceChunking",
    "chunk_article",
    "looks_like_wice",
    "wice_items",
    "wice_to_wice_indices",
]
