"""The directory layout we define for FABLES+ / DiverseSumm+ (docs/evaluation.md, "FABLES+ /
DiverseSumm+ layout").

Those are the datasets of the VeriTrail paper, not public at the time of writing; this reader
takes them (or anything laid out the same way) as ``claims.jsonl`` plus one DAG file per book or
question.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...records import GoldClaim, Verdict
from .fables import FABLES_LABELS
from .format import DatasetError, EvalItem, nonblank_lines

LAYOUT_LABELS: dict[str, Verdict | None] = {
    # The paper's annotation labels for DiverseSumm+ (appendix B.2.2) and their mapping.
    "all parts are supported": Verdict.FULLY_SUPPORTED,
    "at least one part is refuted": Verdict.NOT_FULLY_SUPPORTED,
    "insufficient evidence": Verdict.NOT_FULLY_SUPPORTED,
    "insufficient evidence (none of the above)": Verdict.NOT_FULLY_SUPPORTED,
    "conflicting evidence with no clear resolution": Verdict.INCONCLUSIVE,
    "i don't understand the claim": None,
    # FABLES-style labels, as FABLES maps them (keys lower-cased, as `parse_layout_label` looks).
    **{k.lower(): v for k, v in FABLES_LABELS.items()},
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
    for lineno, line in nonblank_lines(claims_path):
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


__all__ = ["LAYOUT_LABELS", "parse_layout_label", "veritrail_layout_items"]
