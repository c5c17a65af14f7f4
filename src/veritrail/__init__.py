"""VeriTrail: closed-domain hallucination detection with traceability.

Public API (docs/api.md). The DAG and record types import eagerly (they are light); the loop, the
model layer and the oracle import on first use, so `veritrail dag validate` stays fast.

* `verify`, `check` (and `averify`, `acheck`) — one call, a `Report` back; `load_report` reads a
  saved one; `JobInputError`, `ArgumentTypeError`, `ClaimExtractionError`, `ExitCode` — what they raise and return;
* `load_dag`, `Dag`, `DagValidationError` — the generation DAG (docs/dag-format.md);
* `Claim`, `Verdict`, `ClaimResult`, `Termination`, `ErrorStageStatus` — records;
* `VerifyConfig`, `verify_claims`, `verify_claim`, `lm_steps` — the loop (docs/method.md);
* `Oracle` — steps answered from a file; `load_claims` — the claims file;
* `get_model`, `Model`, `FakeProvider` — the model layer;
* `build_report`, `write_report` — the versioned report as a dict (`veritrail.report`);
* `guard`, `aguard` (and `guard_stream`, `aguard_stream`), `GuardResult`, `GuardBlocked` — an
  answer verified within a latency budget while serving (`veritrail.run.guard`);
* `VeritrailError` — the base of every error veritrail reports (`veritrail.errors`: its
  `InputProblem` means bad input, exit 2; its `RunFailure` a run that could not go on, exit 3).
"""

from __future__ import annotations

import importlib
from typing import Any

from .dag import Dag, DagValidationError, Node, load_dag
from .errors import VeritrailError
from .method.config import VerifyConfig
from .records import Claim, ClaimResult, ErrorStageStatus, Termination, Verdict

__version__ = "0.1.0"

_LAZY = {
    "verify_claims": "method.loop",
    "verify_claim": "method.loop",
    "lm_steps": "method.loop",
    "Oracle": "method.oracle",
    "load_claims": "method.claims",
    "get_model": "lm.registry",
    "Model": "lm.model",
    "FakeProvider": "lm.fake",
    "build_report": "report",
    "write_report": "report",
    "load_report": "results",
    "Report": "results",
    "ReportSummary": "results",
    "verify": "api",
    "averify": "api",
    "check": "api",
    "acheck": "api",
    "JobInputError": "run.job",
    "ArgumentTypeError": "api",
    "ClaimExtractionError": "run.job",
    "ExitCode": "outcome",
    "SentenceIndex": "method.segment",
    "guard": "run.guard",
    "aguard": "run.guard",
    "guard_stream": "run.guard",
    "aguard_stream": "run.guard",
    "GuardResult": "run.guard",
    "GuardBlocked": "run.guard",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'veritrail' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{mod}", __name__), name)


__all__ = [
    "ArgumentTypeError",
    "Claim",
    "ClaimExtractionError",
    "ClaimResult",
    "Dag",
    "DagValidationError",
    "ErrorStageStatus",
    "ExitCode",
    "FakeProvider",
    "GuardBlocked",
    "GuardResult",
    "JobInputError",
    "Model",
    "Node",
    "Oracle",
    "Report",
    "ReportSummary",
    "SentenceIndex",
    "Termination",
    "Verdict",
    "VerifyConfig",
    "VeritrailError",
    "__version__",
    "acheck",
    "aguard",
    "aguard_stream",
    "averify",
    "build_report",
    "check",
    "get_model",
    "guard",
    "guard_stream",
    "lm_steps",
    "load_claims",
    "load_dag",
    "load_report",
    "verify",
    "verify_claim",
    "verify_claims",
    "write_report",
]
