"""The documented veritrail-eval dataset format (docs/evaluation.md, "Dataset format").

JSON — ``{"format": "veritrail-eval", "version": 1, "name": ..., "items": [...]}`` — or JSON
Lines with one item per line. Each item carries a generation DAG (inline under ``"dag"`` or as
file path(s) under ``"dag_path"``) and the claims to verify with their gold verdict and,
optionally, gold evidence given as alternative sets of (node id, sentence index) pairs. Sentence
indices are those of `veritrail.method.segment.split_sentences` on the node text, so they can be
compared with an evidence trail directly.

The records here (`EvalDataset`, `EvalItem`) and the labelled claim `GoldClaim` (defined in
`veritrail.records`, with `SentenceKey` and `claim_key`, because the detectors speak them too;
importable from here as before) are what the converters of the other modules (`wice`, `fables`,
`layout`) produce.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...dag import Dag, iter_node_records
from ...errors import InputProblem
from ...method.claims import claim_to_json
from ...records import Claim, GoldClaim, SentenceKey, Verdict, claim_key

FORMAT_NAME = "veritrail-eval"
FORMAT_VERSION = 1


class DatasetError(InputProblem, ValueError):
    """A dataset file or directory could not be read; the message names the file and item."""


@dataclass(frozen=True, slots=True)
class EvalItem:
    """One DAG and its labelled claims. The DAG is inline (`dag_records`) or in `dag_paths`.

    Several paths are merged (e.g. a shared GraphRAG index plus one question's query nodes);
    with `prune` set, only the ancestors of the terminal node are kept.
    """

    id: str
    claims: tuple[GoldClaim, ...]
    dag_records: tuple[Mapping[str, Any], ...] | None = None
    dag_paths: tuple[str, ...] = ()
    prune: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class EvalDataset:
    """A named list of items; DAGs are built on first use and shared between items that share files."""

    name: str
    items: list[EvalItem]
    meta: dict[str, Any] = field(default_factory=dict)
    _dags: dict[tuple[str, ...] | str, Dag] = field(default_factory=dict, repr=False)

    def dag(self, item: EvalItem) -> Dag:
        """The validated DAG of `item` (cached)."""
        key: tuple[str, ...] | str = (
            item.dag_paths if item.dag_records is None else f"inline:{item.id}"
        )
        got = self._dags.get(key)
        if got is None:
            got = build_dag(item)
            if item.dag_records is not None:
                # Inline DAGs belong to one item; keeping them all would hold every article at once.
                return got
            self._dags[key] = got
        return got

    @property
    def n_claims(self) -> int:
        """Total number of claims."""
        return sum(len(it.claims) for it in self.items)

    def head(self, n_claims: int) -> EvalDataset:
        """The first items holding (at most) `n_claims` claims in total, the last item truncated."""
        out: list[EvalItem] = []
        left = n_claims
        for it in self.items:
            if left <= 0:
                break
            if len(it.claims) > left:
                it = EvalItem(
                    it.id, it.claims[:left], it.dag_records, it.dag_paths, it.prune, it.meta
                )
            out.append(it)
            left -= len(it.claims)
        return EvalDataset(self.name, out, dict(self.meta))


def build_dag(item: EvalItem) -> Dag:
    """Build and validate the DAG of one item (merging and pruning files when asked)."""
    if item.dag_records is not None:
        return Dag.from_records(item.dag_records)
    records: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    for p in item.dag_paths:
        recs, m = iter_node_records(p)
        records.extend(recs)
        meta.update(m)
    if item.prune:
        records = _ancestors_of_last_sink(records, item.dag_paths[-1])
    return Dag.from_records(records, meta)


def _ancestors_of_last_sink(records: list[dict[str, Any]], last_file: str) -> list[dict[str, Any]]:
    """Keep the terminal of the last file and its ancestors (nodes that can never be visited go)."""
    recs_last, _ = iter_node_records(last_file)
    last_ids = [r.get("id") for r in recs_last]
    used = {s for r in records for s in r.get("sources", [])}
    sinks = [i for i in last_ids if isinstance(i, str) and i not in used]
    if len(sinks) != 1:
        raise DatasetError(
            f"{last_file}: expected exactly one terminal node among its nodes, found {sinks[:5]}"
        )
    by_id = {r.get("id"): r for r in records}
    keep: set[str] = set()
    stack = [sinks[0]]
    while stack:
        nid = stack.pop()
        if nid in keep or nid not in by_id:
            continue  # unknown ids are left for DAG validation to report
        keep.add(nid)
        stack.extend(by_id[nid].get("sources", []))
    return [r for r in records if r.get("id") in keep or r.get("id") not in by_id]


# -- the JSON format ------------------------------------------------------------------------------


class _EvidenceRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node: str
    sentences: list[int] = Field(min_length=1)


class _ClaimModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    text: str = Field(min_length=1)
    label: str
    gold_evidence: list[list[_EvidenceRef]] = Field(default_factory=list)
    sentence_indices: list[int] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)


class _ItemModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    dag: dict[str, Any] | list[dict[str, Any]] | None = None
    dag_path: str | list[str] | None = None
    prune: bool = False
    claims: list[_ClaimModel]
    meta: dict[str, Any] = Field(default_factory=dict)


class _DatasetModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["veritrail-eval"] = "veritrail-eval"
    version: Literal[1] = 1
    name: str = "dataset"
    meta: dict[str, Any] = Field(default_factory=dict)
    items: list[_ItemModel]


def _item_from_model(m: _ItemModel, base: Path) -> EvalItem:
    if (m.dag is None) == (m.dag_path is None):
        raise DatasetError(f"item {m.id!r}: give exactly one of 'dag' (inline) or 'dag_path'")
    records: tuple[Mapping[str, Any], ...] | None = None
    paths: tuple[str, ...] = ()
    if m.dag is not None:
        nodes = m.dag.get("nodes") if isinstance(m.dag, dict) else m.dag
        if not isinstance(nodes, list):
            raise DatasetError(f"item {m.id!r}: inline 'dag' needs a 'nodes' list")
        records = tuple(nodes)
    else:
        raw = [m.dag_path] if isinstance(m.dag_path, str) else list(m.dag_path or [])
        paths = tuple(str((base / p).resolve()) if not Path(p).is_absolute() else p for p in raw)
    claims: list[GoldClaim] = []
    for c in m.claims:
        try:
            label = Verdict.parse(c.label)
        except ValueError as exc:
            raise DatasetError(f"item {m.id!r}, claim {c.id!r}: {exc}") from None
        gold = tuple(
            frozenset((ref.node, s) for ref in alt for s in ref.sentences)
            for alt in c.gold_evidence
        )
        claims.append(GoldClaim(c.id, c.text, label, gold, tuple(c.sentence_indices), c.meta))
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise DatasetError(f"item {m.id!r}: duplicate claim ids")
    return EvalItem(m.id, tuple(claims), records, paths, m.prune, m.meta)


def load_dataset(path: str | Path) -> EvalDataset:
    """Read a dataset in our format (JSON document, or JSON Lines with one item per line)."""
    p = Path(path)
    base = p.parent
    try:
        if p.suffix in JSONL_SUFFIXES:
            items: list[EvalItem] = []
            for lineno, line in nonblank_lines(p):
                try:
                    items.append(_item_from_model(_ItemModel.model_validate_json(line), base))
                except ValidationError as exc:
                    raise DatasetError(f"{p}:{lineno}: {exc}") from None
            return EvalDataset(p.stem, items)
        doc = _DatasetModel.model_validate_json(p.read_bytes())
    except ValidationError as exc:
        raise DatasetError(f"{p}: {exc}") from None
    items = [_item_from_model(m, base) for m in doc.items]
    if len({it.id for it in items}) != len(items):
        raise DatasetError(f"{p}: duplicate item ids")
    return EvalDataset(doc.name, items, doc.meta)


def _gold_to_json(gold: Sequence[frozenset[SentenceKey]]) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    for alt in gold:
        by_node: dict[str, list[int]] = {}
        for node, s in sorted(alt):
            by_node.setdefault(node, []).append(s)
        out.append([{"node": n, "sentences": ss} for n, ss in by_node.items()])
    return out


def item_to_json(item: EvalItem) -> dict[str, Any]:
    """One item as a JSON object of the dataset format."""
    doc: dict[str, Any] = {"id": item.id}
    if item.dag_records is not None:
        doc["dag"] = {"nodes": [dict(r) for r in item.dag_records]}
    else:
        doc["dag_path"] = list(item.dag_paths) if len(item.dag_paths) != 1 else item.dag_paths[0]
        if item.prune:
            doc["prune"] = True
    doc["claims"] = [
        {
            **claim_to_json(Claim(c.id, c.text, c.sentence_indices), omit_empty_indices=True),
            "label": c.label.value,
            **({"gold_evidence": _gold_to_json(c.gold_evidence)} if c.gold_evidence else {}),
            **({"meta": dict(c.meta)} if c.meta else {}),
        }
        for c in item.claims
    ]
    if item.meta:
        doc["meta"] = dict(item.meta)
    return doc


def save_dataset(ds: EvalDataset, path: str | Path) -> None:
    """Write a dataset: JSON Lines (one item per line) if the path ends in .jsonl, else JSON."""
    p = Path(path)
    if p.suffix in JSONL_SUFFIXES:
        with p.open("w", encoding="utf-8") as fh:
            for it in ds.items:
                fh.write(json.dumps(item_to_json(it), ensure_ascii=False) + "\n")
        return
    doc = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": ds.name,
        "meta": ds.meta,
        "items": [item_to_json(it) for it in ds.items],
    }
    p.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")


JSONL_SUFFIXES = (".jsonl", ".ndjson")
"""File name endings read and written as JSON Lines (one item per line)."""


def nonblank_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The (1-based line number, line) pairs of a UTF-8 text file, blank lines skipped.

    Every JSON Lines reader of this package walks its file this way, so line numbers in error
    messages count the same everywhere.
    """
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield lineno, line


def iter_claims(ds: EvalDataset) -> Iterator[tuple[EvalItem, GoldClaim]]:
    """Every (item, claim) pair in dataset order."""
    for it in ds.items:
        for c in it.claims:
            yield it, c


__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "JSONL_SUFFIXES",
    "DatasetError",
    "EvalDataset",
    "EvalItem",
    "GoldClaim",
    "SentenceKey",
    "build_dag",
    "claim_key",
    "item_to_json",
    "iter_claims",
    "load_dataset",
    "nonblank_lines",
    "save_dataset",
]
