"""Detectors shipped beside the VeriTrail loop (SPEC §6).

* `g2l` — G2LDetect: text → hierarchical tree → root-to-leaf paths → per-path check → AND.
"""

from __future__ import annotations

from .g2l import (
    G2LClaimOutcome,
    G2LConfig,
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
    "G2LClaimOutcome",
    "G2LConfig",
    "G2LResult",
    "G2LStatus",
    "PathCheck",
    "Reference",
    "TreeNode",
    "g2l_claim",
    "g2l_detect",
    "g2l_report",
]
