"""VeriTrail where the traces already are: Arize Phoenix (and Langfuse scores), docs/adapters.md.

* read a trace from Phoenix's REST API and build its DAG by the rules of the trace import
  (`dag_from_phoenix`);
* write a finished run's verdicts back as span annotations: one per claim on the final output's
  span, and one on each span where a Not Fully Supported claim's content most likely entered
  (`export_to_phoenix`; `veritrail.adapters.langfuse_scores.export_to_langfuse` writes the same
  as Langfuse scores);
* verify production traces as they arrive (`watch`, `WatchOptions`): deterministic sampling by
  trace id, a checkpoint file, bounded concurrency; each trace's DAG goes to a `TraceVerifier`
  (`veritrail watch` passes `veritrail.api.trace_verifier(settings)`, a run as `veritrail
  verify` makes it).

    from veritrail.adapters.phoenix import PhoenixClient, dag_from_phoenix, export_to_phoenix
    with PhoenixClient("http://127.0.0.1:6006") as phoenix:
        result = dag_from_phoenix(phoenix, "default", trace_id="4bf92f35...")
    ...
    export_to_phoenix("runs/phoenix-4bf92f35-1a2b3c4d5e6f", "http://127.0.0.1:6006")

Uses only the core install (HTTP through httpx2).
"""

from .annotate import CONFIGS, ExportResult, annotation_body, export_to_phoenix, write_marks
from .client import (
    API_KEY_VARIABLE,
    Endpoint,
    PhoenixAuthError,
    PhoenixClient,
    PhoenixError,
    PhoenixUnreachable,
    UnknownProject,
)
from .marks import (
    CITATION_NAME,
    ORIGIN_NAME,
    VERDICT_NAME,
    ExportInputError,
    Mark,
    load_run,
    marks_for_run,
)
from .sampling import sampled
from .spans import dag_from_phoenix, sdk_span
from .watch import (
    TraceSkipped,
    TraceVerifier,
    VerifiedRun,
    WatchOptions,
    WatchSummary,
    awatch,
    watch,
)

__all__ = [
    "API_KEY_VARIABLE",
    "CITATION_NAME",
    "CONFIGS",
    "ORIGIN_NAME",
    "VERDICT_NAME",
    "Endpoint",
    "ExportInputError",
    "ExportResult",
    "Mark",
    "PhoenixAuthError",
    "PhoenixClient",
    "PhoenixError",
    "PhoenixUnreachable",
    "TraceSkipped",
    "TraceVerifier",
    "UnknownProject",
    "VerifiedRun",
    "WatchOptions",
    "WatchSummary",
    "annotation_body",
    "awatch",
    "dag_from_phoenix",
    "export_to_phoenix",
    "load_run",
    "marks_for_run",
    "sampled",
    "sdk_span",
    "watch",
    "write_marks",
]
