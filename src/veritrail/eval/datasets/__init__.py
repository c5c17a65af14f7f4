"""Labelled evaluation datasets: one documented format plus readers for the real data.

* `format`: the veritrail-eval format (docs/evaluation.md, "Dataset format"): the records,
  `load_dataset` / `save_dataset`, `build_dag`, `iter_claims`, `DatasetError`;
* `wice`: WiCE (Kamoi et al. 2023): every claim becomes a single-step DAG whose roots are the
  cited article in chunks and whose terminal is the claim's Wikipedia sentence;
* `fables`: FABLES (Kim et al. 2024): one DAG per (book, summarizer) whose roots are the
  annotators' evidence quotes (a biased surrogate for the unpublished books);
* `layout`: the directory layout we define for FABLES+ / DiverseSumm+ (the datasets of the
  VeriTrail paper, not public at the time of writing).
* `reviewed`: the claims people reviewed in run directories (``reviewed:PATH``), the reviewed
  verdict as the gold label (docs/runs.md).
* `injected`: hallucinations planted by `veritrail inject` (``injected:DIR``; docs/inject.md).

`open_dataset` opens any of them by path, guessing which reader to use. Every public name is
importable from here: ``from veritrail.eval.datasets import open_dataset, EvalDataset``.
"""

from __future__ import annotations

from pathlib import Path

from .fables import FABLES_LABELS, fables_items
from .format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    JSONL_SUFFIXES,
    DatasetError,
    EvalDataset,
    EvalItem,
    GoldClaim,
    SentenceKey,
    build_dag,
    claim_key,
    item_to_json,
    iter_claims,
    load_dataset,
    nonblank_lines,
    save_dataset,
)
from .layout import LAYOUT_LABELS, parse_layout_label, veritrail_layout_items
from .wice import (
    WICE_LABELS,
    WiceChunking,
    chunk_article,
    looks_like_wice,
    wice_items,
    wice_to_wice_indices,
)


def open_dataset(
    spec: str,
    *,
    sentences_per_chunk: int = 10,
) -> EvalDataset:
    """Open a dataset by path: our format, a WiCE claim file, FABLES.json, or a layout directory.

    ``wice:PATH`` / ``fables:PATH`` / ``layout:DIR`` / ``veritrail:PATH`` (our format) force a
    reader (``reviewed:PATH``, reviewed runs, and ``injected:DIR``, `veritrail inject`'s
    output, are never guessed); otherwise it is guessed
    from the file name and content.
    """
    kind, _, rest = spec.partition(":")
    if kind == "reviewed" and rest:
        from .reviewed import reviewed_dataset

        return reviewed_dataset(rest)
    if kind == "injected" and rest:
        from .injected import injected_dataset

        return injected_dataset(rest)
    if kind in ("wice", "fables", "layout", "veritrail") and rest:
        path = Path(rest)
    else:
        kind, path = "", Path(spec)
    if not kind:
        if path.is_dir():
            kind = "layout"
        elif path.name.lower().startswith("fables"):
            kind = "fables"
        elif path.suffix == ".jsonl" and looks_like_wice(path):
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


__all__ = [
    "FABLES_LABELS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "JSONL_SUFFIXES",
    "LAYOUT_LABELS",
    "WICE_LABELS",
    "DatasetError",
    "EvalDataset",
    "EvalItem",
    "GoldClaim",
    "SentenceKey",
    "WiceChunking",
    "build_dag",
    "chunk_article",
    "claim_key",
    "fables_items",
    "item_to_json",
    "iter_claims",
    "load_dataset",
    "looks_like_wice",
    "nonblank_lines",
    "open_dataset",
    "parse_layout_label",
    "save_dataset",
    "veritrail_layout_items",
    "wice_items",
    "wice_to_wice_indices",
]
