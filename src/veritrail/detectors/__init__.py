"""Detectors shipped beside the VeriTrail loop (docs/detectors.md), all behind one protocol.

One place per detector: the detector, its records and its report format together.

* `base` — the `Detector` protocol (``name`` + ``async detect(dag, claims, ...)``) and its one
  result record, `Detection` (docs/detectors.md);
* `veritrail` — the loop itself and its gold oracle as detectors;
* `baselines` — the paper's RAG and direct baselines (`embeddings`: RAG's retriever);
* `nli` — a local NLI model, the NLI chunk baseline over it, and the NLI judge
  (``verify --judge nli:PATH``);
* `g2l/` — G2LDetect: text → hierarchical tree → root-to-leaf paths → per-path check → AND;
* `sirg/` — SIRG, the white-box detector (needs the ``sirg`` extra);
* `registry` — ``kind:key=value`` method specs (``veritrail eval --method``, ``veritrail
  detect --method``) → detectors.

The detectors speak the package's records (`veritrail.records`: `Claim`, `GoldClaim`,
`SentenceKey`) and never import the evaluation that runs them (`veritrail.eval`).
"""

from __future__ import annotations

from .base import Detection, Detector
from .g2l import (
    G2LClaimOutcome,
    G2LConfig,
    G2LDetector,
    G2LResult,
    G2LStatus,
    PathCheck,
    Reference,
    TreeNode,
    g2l_claim,
    g2l_detect,
    g2l_report,
)

__all__ = [
    "Detection",
    "Detector",
    "G2LClaimOutcome",
    "G2LConfig",
    "G2LDetector",
    "G2LResult",
    "G2LStatus",
    "PathCheck",
    "Reference",
    "TreeNode",
    "g2l_claim",
    "g2l_detect",
    "g2l_report",
]
