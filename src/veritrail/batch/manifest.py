"""The batch manifest: JSON Lines, one verification job per line.

Each line is an object (validated with pydantic; unknown keys are an error, so a typo never
silently falls back to a default)::

    {"id": "q-0001", "dag": "dags/q1.json", "claims": "claims/q1.json", "out": "reports/q1.json"}

* ``id`` — unique within the manifest (letters, digits, ``-_.:``); names the job in the summary.
* ``dag`` — the DAG file (any format `veritrail dag validate` reads).
* ``claims`` — a claims file, or ``null`` to extract the claims from the final output.
* ``out`` — where the job's JSON report goes (its HTML report goes beside it with ``--html``).
* ``oracle`` — optional oracle file: every step of this job is answered from it (tests, demos).
* ``run_dir`` — optional run directory (default: ``RUNS_DIR/<dag>-<hash>``, as for ``verify``).
* ``settings`` — optional per-job settings, same names as ``veritrail.toml`` (``q``, ``model``,
  ``base_url``, ``samples`` …); they override the batch's flags/environment/config file for this job.
  Settings of the shared machinery (``concurrency``, ``max_parallel_claims``, ``cache``,
  ``threads``, ``progress_interval``, ``max_cost``, ``max_tokens``) are batch-wide only.

Relative paths are relative to the manifest file's directory, so a manifest and its inputs can be
moved together. Blank lines and lines starting with ``#`` are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import textio
from ..errors import InputProblem
from ..run.settings import SETTING_NAMES

BATCH_ONLY_SETTINGS: frozenset[str] = frozenset(
    {
        "concurrency",
        "max_parallel_claims",
        "cache",
        "threads",
        "progress_interval",
        "max_cost",
        "max_tokens",
    }
)
"""Settings of the shared model layer and scheduler (the spending cap is one budget for every
job): one value for the whole batch."""


class ManifestError(InputProblem, ValueError):
    """The manifest cannot be used; the message names the file and line."""


class _JobLine(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")
    dag: str = Field(min_length=1)
    claims: str | None
    out: str = Field(min_length=1)
    oracle: str | None = None
    run_dir: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ManifestJob:
    """One job of the manifest, paths resolved against the manifest's directory."""

    id: str
    line: int
    dag: Path
    claims: Path | None
    out: Path
    oracle: Path | None
    run_dir: Path | None
    settings: dict[str, Any]


def _resolve(base: Path, p: str | None) -> Path | None:
    if p is None:
        return None
    q = Path(p).expanduser()
    return q if q.is_absolute() else base / q


def load_manifest(path: str | Path) -> list[ManifestJob]:
    """Read and check a manifest: every line's shape, unique ids, setting names.

    Raises `ManifestError` (one line per problem, at most the first 20) for anything wrong.
    """
    p = Path(path)
    try:  # the rules of every input file (veritrail.textio): UTF-8, an optional BOM dropped
        text = textio.read_input_text(p, "manifest")
    except textio.InputError as exc:
        raise ManifestError(str(exc)) from None
    base = p.parent
    jobs: list[ManifestJob] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    # Lines end at "\n" only: a JSON string may hold U+2028 and the other breaks splitlines()
    # knows ("\r" is stripped with the other blanks).
    for n, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{p}:{n}"
        try:  # strict JSON, nesting and lone surrogates checked like any input's
            doc = textio.parse_json(line, where, "", one_line=True)
        except textio.InputError as exc:
            reason = exc.reason
            if exc.problem is textio.InputFault.SYNTAX:  # worded as this reader always has
                reason = "not JSON (" + reason.removeprefix("not valid JSON: ") + ")"
            problems.append(f"{where}: {reason}")
            continue
        if not isinstance(doc, dict):
            problems.append(f"{where}: a job must be a JSON object")
            continue
        if "claims" not in doc:
            problems.append(f'{where}: "claims" is required (a path, or null to extract claims)')
            continue
        try:
            job = _JobLine.model_validate(doc)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "job"
            problems.append(f"{where}: {loc}: {err['msg']}")
            continue
        bad = sorted(k for k in job.settings if k not in SETTING_NAMES)
        if bad:
            problems.append(f"{where}: unknown setting(s) {', '.join(bad)}")
            continue
        shared = sorted(k for k in job.settings if k in BATCH_ONLY_SETTINGS)
        if shared:
            problems.append(
                f"{where}: {', '.join(shared)} can only be set for the whole batch (flags)"
            )
            continue
        if job.id in seen:
            problems.append(f"{where}: job id {job.id!r} already used on line {seen[job.id]}")
            continue
        seen[job.id] = n
        jobs.append(
            ManifestJob(
                id=job.id,
                line=n,
                dag=_resolve(base, job.dag) or Path(job.dag),
                claims=_resolve(base, job.claims),
                out=_resolve(base, job.out) or Path(job.out),
                oracle=_resolve(base, job.oracle),
                run_dir=_resolve(base, job.run_dir),
                settings=dict(job.settings),
            )
        )
    if problems:
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ManifestError("\n".join(problems[:20]) + more)
    if not jobs:
        raise ManifestError(f"manifest {p} has no jobs")
    return jobs
