"""VeriTrail: closed-domain hallucination detection with traceability.

Public API (docs/api.md). The DAG and record types import eagerly (they are light); the loop, the
model layer and the oracle import on first use, so `veritrail dag validate` stays fast.

* `load_dag`, `Dag`, `DagValidationError` — the generation DAG (SPEC §2);
* `Claim`, `Verdict`, `ClaimResult`, `Termination`, `ErrorStageStatus` — records;
* `VerifyConfig`, `verify_claims`, `verify_claim`, `lm_steps` — the loop (SPEC §4);
* `Oracle` — steps answered from a file; `load_claims` — the claims file;
* `get_model`, `Model`, `FakeProvider` — the model layer;
* `build_report`, `write_report`, `load_report` — the versioned report.
"""

from __future__ import annotations

import importlib
from typing import Any

from .config import VerifyConfig
from .dag import Dag, DagValidationError, Node, load_dag
from .records import Claim, ClaimResult, ErrorStageStatus, Termination, Verdict

__version__ = "0.1.0"

_LAZY = {
    "verify_claims": "loop",
    "verify_claim": "loop",
    "lm_steps": "loop",
    "Oracle": "oracle",
    "load_claims": "claims",
    "get_model": "lm.registry",
    "Model": "lm.model",
    "FakeProvider": "lm.fake",
    "build_report": "report",
    "write_report": "report",
    "load_report": "report",
    "SentenceIndex": "segment",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'veritrail' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{mod}", __name__), name)


__all__ = [
    "Claim",
    "ClaimResult",
    "Dag",
    "DagValidationError",
    "ErrorStageStatus",
    "FakeProvider",
    "Model",
    "Node",
    "Oracle",
    "SentenceIndex",
    "Termination",
    "Verdict",
    "VerifyConfig",
    "__version__",
    "build_report",
    "get_model",
    "lm_steps",
    "load_claims",
    "load_dag",
    "load_report",
    "verify_claim",
    "verify_claims",
    "write_report",
]
