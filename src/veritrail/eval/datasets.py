"""Labelled evaluation datasets: one documented format plus converters for the real data.

The format (docs/evaluation.md, "Dataset format") is JSON — ``{"format": "veritrail-eval",
"version": 1, "name": ..., "items": [...]}`` — or JSON Lines with one item per line. Each item
carries a generation DAG (inline under ``"dag"`` or as file path(s) under ``"dag_path"``) and the
claims to verify with their gold verdict and, optionally, gold evidence given as alternative sets
of (node id, sentence index) pairs. Sentence indices are those of `veritrail.method.segment.
split_sentences` on the node text, so they can be compared with an evidence trail directly.

Converters:

* `wice_items` — WiCE (Kamoi et al. 2023): every claim becomes a single-step DAG whose roots are
  the cited article in chunks and whose terminal is the claim's Wikipedia sentence;
* `fables_items` — FABLES (Kim et al. 2024): one DAG per (book, summarizer) whose roots are the
  annotators' evidence quotes (a biased surrogate for the unpublished books);
* `veritrail_layout_items` — the directory layout we define for FABLES+ / DiverseSumm+ (the
  datasets of the VeriTrail paper, not public at the time of writing).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..dag import Dag, iter_node_records
from ..method.segment import split_sentences
from ..records import Claim, Verdict

FORMAT_NAME = "veritrail-eval"
FORMAT_VERSION = 1

SentenceKey = tuple[str, int]
"""(node id, 0-based sentence index within the node)."""


class DatasetError(ValueError):
    """A dataset file or directory could not be read; the message names the file and item."""


@dataclass(frozen=True, slots=True)
class GoldClaim:
    """One labelled claim. `gold_evidence` holds alternative gold sets (any one of them suffices)."""

    id: str
    text: str
    label: Verdict
    gold_evidence: tuple[frozenset[SentenceKey], ...] = ()
    sentence_indices: tuple[int, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def as_claim(self, item_id: str) -> Claim:
        """The claim as the verifier sees it; its id is made unique across the dataset."""
        return Claim(
            id=claim_key(item_id, self.id), text=self.text, sentence_indices=self.sentence_indices
        )


def claim_key(item_id: str, claim_id: str) -> str:
    """The dataset-wide key of a claim: ``item/claim`` (or just the id when both are equal)."""
    return item_id if item_id == claim_id else f"{item_id}/{claim_id}"


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
        if p.suffix in (".jsonl", ".ndjson"):
            items: list[EvalItem] = []
            with p.open(encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
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
            "id": c.id,
            "text": c.text,
            "label": c.label.value,
            **({"gold_evidence": _gold_to_json(c.gold_evidence)} if c.gold_evidence else {}),
            **({"sentence_indices": list(c.sentence_indices)} if c.sentence_indices else {}),
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
    if p.suffix in (".jsonl", ".ndjson"):
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


# -- WiCE -------------------------------------------------------------------------------------------

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
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
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
                        "wice_sentence_map": [
                            [list(k) for k in ks] for ks in chunking.sentence_map
                        ],
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


# -- FABLES -----------------------------------------------------------------------------------------

FABLES_LABELS: dict[str, Verdict | None] = {
    "Yes": Verdict.FULLY_SUPPORTED,
    "No": Verdict.NOT_FULLY_SUPPORTED,
    "PartialSupport": Verdict.NOT_FULLY_SUPPORTED,
    "Inapplicable": None,  # dropped
}


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")


def fables_items(
    path: str | Path,
    *,
    books: Sequence[str] | None = None,
    summarizers: Sequence[str] | None = None,
) -> list[EvalItem]:
    """Convert FABLES (`FABLES.json`) to items, one per (book, summarizer).

    The books are not public, so the roots are the annotators' evidence quotes for all claims of
    that summary (deduplicated, one root per quote) and the terminal is the summary. This source
    is biased towards the claims: it holds exactly the passages annotators chose while judging
    them, so evidence is far easier to find than in a book, and "not addressed" errors are rarer
    (docs/evaluation.md). Gold evidence for a claim = every sentence of its own quotes. Labels:
    Yes → Fully Supported; No, PartialSupport → Not Fully Supported; Inapplicable dropped.
    """
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    data = doc.get("FABLES", doc)
    items: list[EvalItem] = []
    for book, per_model in data.items():
        if not isinstance(per_model, dict) or (books is not None and book not in books):
            continue
        for model, entry in per_model.items():
            if summarizers is not None and model not in summarizers:
                continue
            quote_ids: dict[str, str] = {}
            roots: list[dict[str, Any]] = []
            claims: list[GoldClaim] = []
            for cid, c in entry["claims"].items():
                label = FABLES_LABELS.get(c["label"])
                if label is None:
                    continue
                own: dict[str, int] = {}  # quote id -> its number of sentences
                for q in c.get("evidence", []):
                    qt = q.strip()
                    if not qt:
                        continue
                    if qt not in quote_ids:
                        quote_ids[qt] = f"quote-{len(quote_ids)}"
                        roots.append({"id": quote_ids[qt], "text": qt, "sources": []})
                    # A text with no sentence break is still one sentence (as SentenceIndex does).
                    own[quote_ids[qt]] = max(1, len(split_sentences(qt)))
                gold: frozenset[SentenceKey] = frozenset(
                    (nid, s) for nid, n in own.items() for s in range(n)
                )
                claims.append(
                    GoldClaim(
                        id=str(cid),
                        text=c["claim"],
                        label=label,
                        gold_evidence=(gold,) if gold else (),
                        meta={
                            "fables_label": c["label"],
                            "reason": [r for r in c.get("reason", []) if r],
                        },
                    )
                )
            if not claims or not roots:
                continue
            terminal = {
                "id": "summary",
                "text": entry["summary"],
                "sources": [r["id"] for r in roots],
            }
            items.append(
                EvalItem(
                    id=f"{_slug(book)}--{_slug(model)}",
                    claims=tuple(claims),
                    dag_records=(*roots, terminal),
                    meta={
                        "source": "fables",
                        "book": book,
                        "summarizer": model,
                        "surrogate_roots": True,
                    },
                )
            )
    return items


# -- FABLES+ / DiverseSumm+ layout --------------------------------------------------------------

LAYOUT_LABELS: dict[str, Verdict | None] = {
    # The paper's annotation labels for DiverseSumm+ (appendix B.2.2) and their mapping.
    "all parts are supported": Verdict.FULLY_SUPPORTED,
    "at least one part is refuted": Verdict.NOT_FULLY_SUPPORTED,
    "insufficient evidence": Verdict.NOT_FULLY_SUPPORTED,
    "insufficient evidence (none of the above)": Verdict.NOT_FULLY_SUPPORTED,
    "conflicting evidence with no clear resolution": Verdict.INCONCLUSIVE,
    "i don't understand the claim": None,
    # FABLES-style labels.
    "yes": Verdict.FULLY_SUPPORTED,
    "no": Verdict.NOT_FULLY_SUPPORTED,
    "partialsupport": Verdict.NOT_FULLY_SUPPORTED,
    "inapplicable": None,
}


def parse_layout_label(label: str) -> Verdict | None:
    """Map a label of the layout (ours or the paper's annotation labels) to a verdict; None = drop."""
    key = " ".join(label.replace("’", "'").split()).lower()
    if key in LAYOUT_LABELS:
        return LAYOUT_LABELS[key]
    return Verdict.parse(label)


def veritrail_layout_items(directory: str | Path) -> list[EvalItem]:
    """Read a FABLES+ / DiverseSumm+ style directory (docs/evaluation.md, "VeriTrail layout").

    ``claims.jsonl``: one claim per line, ``{"dag": KEY, "id": ..., "claim": ..., "label": ...}``
    (optional ``gold_evidence`` as in our format). ``dags/KEY.json``: the DAG of one book or
    question. If ``index.json`` exists (DiverseSumm+: the GraphRAG index, stages 1-4, shared by
    all questions), each question's file holds only its query nodes (stages 5-6); the two are
    merged and pruned to the ancestors of the question's terminal node.
    """
    d = Path(directory)
    claims_path = d / "claims.jsonl"
    if not claims_path.is_file():
        raise DatasetError(f"{d}: no claims.jsonl")
    index = d / "index.json"
    by_dag: dict[str, list[GoldClaim]] = {}
    with claims_path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            try:
                label = parse_layout_label(str(row["label"]))
                key = str(row["dag"])
                cid = str(row.get("id", f"claim-{lineno}"))
                text = str(row["claim"])
            except (KeyError, ValueError) as exc:
                raise DatasetError(f"{claims_path}:{lineno}: {exc}") from None
            if label is None:
                continue
            gold = tuple(
                frozenset((ref["node"], int(s)) for ref in alt for s in ref["sentences"])
                for alt in row.get("gold_evidence", [])
            )
            by_dag.setdefault(key, []).append(
                GoldClaim(cid, text, label, gold, meta={"label": row["label"]})
            )
    items: list[EvalItem] = []
    for key, claims in by_dag.items():
        own = d / "dags" / f"{key}.json"
        if not own.is_file():
            own = d / "dags" / f"{key}.jsonl"
        if not own.is_file():
            raise DatasetError(f"{d}: claims refer to DAG {key!r} but dags/{key}.json is missing")
        paths = (str(index), str(own)) if index.is_file() else (str(own),)
        items.append(
            EvalItem(
                key, tuple(claims), None, paths, prune=index.is_file(), meta={"source": "layout"}
            )
        )
    return items


def open_dataset(
    spec: str,
    *,
    sentences_per_chunk: int = 10,
) -> EvalDataset:
    """Open a dataset by path: our format, a WiCE claim file, FABLES.json, or a layout directory.

    ``wice:PATH`` / ``fables:PATH`` / ``layout:DIR`` / ``veritrail:PATH`` (our format) force a
    reader; otherwise it is guessed
    from the file name and content.
    """
    kind, _, rest = spec.partition(":")
    if kind in ("wice", "fables", "layout", "veritrail") and rest:
        path = Path(rest)
    else:
        kind, path = "", Path(spec)
    if not kind:
        if path.is_dir():
            kind = "layout"
        elif path.name.lower().startswith("fables"):
            kind = "fables"
        elif path.suffix == ".jsonl" and _looks_like_wice(path):
            kind = "wice"
        else:
            kind = "veritrail"
    if kind == "wice":
        return EvalDataset(
            f"wice-{path.stem}",
            wice_items(path, sentences_per_chunk=sentences_per_chunk),
            {"source": "wice", "sentences_per_chunk": sentences_per_chunk},
        )
    if kind == "fables":
        return EvalDataset(
            "fables", fables_items(path), {"source": "fables", "surrogate_roots": True}
        )
    if kind == "layout":
        return EvalDataset(path.name, veritrail_layout_items(path), {"source": "layout"})
    return load_dataset(path)


def _looks_like_wice(path: Path) -> bool:
    with path.open(encoding="utf-8") as fh:
        first = fh.readline()
    try:
        row = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(row, dict) and "supporting_sentences" in row and "evidence" in row


def iter_claims(ds: EvalDataset) -> Iterator[tuple[EvalItem, GoldClaim]]:
    """Every (item, claim) pair in dataset order."""
    for it in ds.items:
        for c in it.claims:
            yield it, c
