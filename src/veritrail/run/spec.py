"""A run's job: the inputs and settings it was prepared from, and the errors a run raises.

`Job` is what `run.inputs.prepare_job` (verify, check, the API), `run.resume.job_from_run_dir`
(resume) and a batch's jobs (`batch.jobs`) hand to `run.execute`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..dag import Dag
from ..errors import InputProblem, RunFailure, VeritrailError
from ..outcome import ExitCode
from ..records import Claim
from .fingerprint import result_config
from .model_spec import ModelSpec
from .settings import Settings, step_specs
from .store import (
    CLAIMS_FILE,
    LOCK_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    RUN_FILE,
)

HTML_BESIDE = "\0beside"
"""The value of `--html` given without a file name."""

DAG_FILE = "dag.json"
"""Where a run keeps a DAG it was given in memory (`veritrail check`, `veritrail.verify(dict)`)."""

PARTIAL_REPORT = "partial-report.json"

RUN_DIR_FILES = (RUN_FILE, CLAIMS_FILE, RESULTS_FILE, REPORT_FILE, PARTIAL_REPORT, LOCK_FILE)
"""The files a run writes in its run directory (`DAG_FILE` too, for a DAG given in memory):
no input may be one of them (`check_run_dir`)."""


class JobError(VeritrailError):
    """A run could not be prepared or carried out; `exit_code` is the CLI's status for it and
    the message is one line, already redacted."""

    exit_code: ClassVar[ExitCode] = ExitCode.USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JobInputError(JobError, InputProblem, ValueError):
    """Bad input or usage, found before any model call (exit status 2)."""

    exit_code = ExitCode.USAGE


class ClaimExtractionError(JobError, RunFailure):
    """Claims could not be extracted from the final output because the model failed (exit
    status 3): no claim can be verified without them. Running the same job again retries."""

    exit_code = ExitCode.ERRORS


@dataclass(frozen=True, slots=True)
class Job:
    """Everything a run needs, resolved from flags/config (verify), from run.json (resume) or
    from the arguments of `veritrail.verify`/`check`."""

    dag: Dag
    dag_path: str
    """The DAG file as given (named in the report); for a DAG built in memory, the copy in the
    run directory (`DAG_FILE`)."""
    dag_sha256: str
    claims: list[Claim] | None
    """None: claims are extracted from the terminal node by the run."""
    claims_path: str | None
    oracle_path: str | None
    settings: Settings
    model_name: str
    fingerprint: str
    run_dir: Path
    out_path: Path | None
    """The JSON report; None = no report file (the Python API returns the report instead)."""
    html_path: Path | None
    inputs: tuple[tuple[str, str], ...] = ()
    """(what, path) of every input file: outputs must not be one of them."""
    dag_bytes: bytes | None = None
    """A DAG given in memory, serialized: written to `dag_path` when the run starts, so
    `veritrail resume` finds it."""
    batch_id: str | None = None
    """The job's id in a batch manifest (`batch.jobs.prepare_jobs`); None outside a batch."""
    oracle_doc: Any = None
    """The oracle file's document, read and checked when the job was prepared (a batch's jobs:
    it travels to Ray workers, which need not see the file); None: read from `oracle_path`."""

    @property
    def id(self) -> str:
        """The job's name in progress lines and summaries: its batch id, else its run
        directory's name."""
        return self.batch_id if self.batch_id is not None else self.run_dir.name

    @property
    def model(self) -> ModelSpec:
        """How to build the job's model (`ModelSpec.from_settings`); "oracle" for an oracle
        job, which builds none."""
        return ModelSpec.from_settings(self.settings, self.model_name)

    @property
    def uses_model(self) -> bool:
        """False for a job its oracle answers (no model is built for it)."""
        return self.oracle_path is None and self.oracle_doc is None

    @property
    def plugins(self) -> dict[str, str]:
        """The job's plugged steps, kind -> spec (`settings.step_specs`; empty: LM steps)."""
        return step_specs(self.settings)

    def result_config(self) -> dict[str, Any]:
        """Settings that change results (the fingerprint's config part)."""
        return result_config(self.settings, self.oracle_path)


@dataclass(frozen=True, slots=True)
class InMemoryDag:
    """A DAG that is not a file (built by `veritrail check`, or a `Dag`/dict given to the API)."""

    dag: Dag
    name: str = "dag"
    """Stem of the default run directory's name."""

    def to_bytes(self) -> bytes:
        """The DAG as a DAG file's bytes (stages written, so a reload gives the same DAG); the
        content hash of these bytes identifies the run."""
        doc: dict[str, Any] = {}
        if self.dag.meta:
            doc["meta"] = self.dag.meta
        doc["nodes"] = self.dag.to_records()
        return (json.dumps(doc, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
