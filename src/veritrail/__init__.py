"""VeriTrail: closed-domain hallucination detection with traceability.

Public API (see docs/api.md):

* `load_dag`, `Dag`, `DagValidationError` — the generation DAG (SPEC §2);
* `Claim`, `Verdict`, `ClaimResult` — records;
* `VerifyConfig`, `verify_claims` — the loop (SPEC §4);
* `Model`, `FakeProvider` — the model layer.
"""

from .config import VerifyConfig
from .dag import Dag, DagValidationError, Node, load_dag
from .records import Claim, ClaimResult, ErrorStageStatus, Termination, Verdict

__version__ = "0.1.0"

__all__ = [
    "Claim",
    "ClaimResult",
    "Dag",
    "DagValidationError",
    "ErrorStageStatus",
    "Node",
    "Termination",
    "Verdict",
    "VerifyConfig",
    "__version__",
    "load_dag",
]
