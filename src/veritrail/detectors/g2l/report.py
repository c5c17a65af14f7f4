"""The JSON report of one G2LDetect detection (`"format": "veritrail-g2l-report"`, version 1).

`veritrail detect --method g2l` writes it, and ``--attach`` stores it under ``"g2l"`` in a
VeriTrail report, whose HTML then shows a G2LDetect section (docs/g2ldetect.md, docs/report.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .records import G2LResult, PathCheck

REPORT_FORMAT = "veritrail-g2l-report"
REPORT_VERSION = 1


def path_to_json(p: PathCheck) -> dict[str, Any]:
    """One path's entry in the report."""
    return {
        "index": p.index,
        "path": list(p.nodes),
        "leaf": p.leaf if p.nodes else "",
        "supported": p.supported,
        "reason": p.reason,
        "chunk": p.chunk,
        "chunks_checked": p.chunks_checked,
        "error": p.error,
        "raw": p.raw,
    }


def g2l_report(
    result: G2LResult,
    *,
    model: str | None = None,
    text: str | None = None,
    sources: Sequence[str] = (),
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON report of one detection (`"format": "veritrail-g2l-report"`, version 1)."""
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "method": "g2l",
        "model": model,
        "status": result.status.value,
        "passed": result.passed,
        "score": result.score,
        "text": text,
        "references": list(sources),
        "reference_chunks": result.chunks,
        "tree": result.tree.to_json() if result.tree else None,
        "tree_attempts": result.tree_attempts,
        "tree_error": result.tree_error,
        "tree_raw": result.tree_raw if result.tree is None else "",
        "paths": [path_to_json(p) for p in result.paths],
        "failing_paths": [p.index for p in result.failing_paths],
        "cost": dict(usage or {}),
    }


__all__ = ["REPORT_FORMAT", "REPORT_VERSION", "g2l_report", "path_to_json"]
