"""FABLES (Kim et al. 2024) → evaluation items (docs/evaluation.md, "FABLES").

One DAG per (book, summarizer) whose roots are the annotators' evidence quotes: a biased
surrogate for the books, which are not public.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...method.segment import split_sentences
from ...records import GoldClaim, SentenceKey, Verdict
from .format import EvalItem

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


__all__ = ["FABLES_LABELS", "fables_items"]
