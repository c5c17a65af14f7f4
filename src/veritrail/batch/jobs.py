"""Batch jobs: checking every input up front, the model each job uses, run stores and reports.

Everything here runs on the driver (the process that runs `veritrail batch`); the executors
(`local`, `ray_executor`) only verify claims and hand each finished claim back to the driver,
which records it in its job's run store at once (the same durable run directory as
`veritrail verify`, so a job of a batch can also be finished with `veritrail resume RUN_DIR`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputProblem, RunFailure
from ..method.config import VerifyConfig, fit_to_context, model_context_window
from ..outcome import exit_status, gate_exceeded
from ..records import Claim, ClaimResult, Termination, Verdict
from ..report import atomic_write_text
from ..run.ending import RunEnd, end_run
from ..run.fingerprint import file_sha256
from ..run.inputs import load_job_claims, load_job_dag, run_identity
from ..run.job import (
    Job,
    JobInputError,
    check_oracle_alone,
    check_output_files,
    check_prompt_dir,
    check_run_dir,
    input_paths,
    run_dir_files,
    same_file,
)
from ..run.job import model_name as job_model_name
from ..run.settings import SettingsError, resolve_settings
from ..run.store import (
    REPORT_FILE,
    RunStore,
)
from .manifest import ManifestJob
from .summary import INDEX_FILE, SUMMARY_FILE, JobOutcome

if TYPE_CHECKING:
    from ..lm.base import Provider
    from ..lm.model import Model
    from ..records import SelectionIssue


class BatchInputError(InputProblem, ValueError):
    """A job's inputs or outputs cannot be used; found before any model call (exit status 2)."""


# -- the model of a job ---------------------------------------------------------------------------


# -- preparing the jobs ---------------------------------------------------------------------------


def prepare_jobs(
    manifest_path: Path,
    entries: Sequence[ManifestJob],
    *,
    flags: Mapping[str, Any],
    config_path: str | None,
    html: bool,
    extra_inputs: Iterable[Path] = (),
    summary_dir: Path | None = None,
) -> list[Job]:
    """Load and check every job (DAG, claims, oracle, settings, outputs) before anything runs.

    `summary_dir`: where `batch-summary.json` and `batch-index.html` will be written (checked
    like every output: never over an input or a job's report). Plugged steps are loaded later,
    with each job's model, by `driver.open_states` (still before any model call).
    Raises `BatchInputError` listing every problem found (at most 20 lines).
    """
    problems: list[str] = []
    jobs: list[Job] = []
    for e in entries:
        try:
            jobs.append(_prepare_one(e, flags=flags, config_path=config_path, html=html))
        except BatchInputError as exc:
            problems.append(f"job {e.id} (line {e.line}): {exc}")
    if not problems:
        problems = _check_outputs(manifest_path, jobs, extra_inputs, summary_dir)
    if problems:
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise BatchInputError("\n".join(problems[:20]) + more)
    return jobs


def _prepare_one(
    e: ManifestJob, *, flags: Mapping[str, Any], config_path: str | None, html: bool
) -> Job:
    try:
        settings = resolve_settings({**flags, **e.settings}, config_path=config_path)
    except SettingsError as exc:
        raise BatchInputError(str(exc)) from None
    dag_path = str(e.dag)
    try:
        dag = load_job_dag(dag_path, os_reason=True)
    except JobInputError as exc:
        raise BatchInputError(str(exc)) from None
    claims: list[Claim] | None = None
    if e.claims is not None:
        try:
            claims = load_job_claims(e.claims)
        except JobInputError as exc:
            raise BatchInputError(str(exc)) from None
    oracle_doc: Any = None
    if e.oracle is not None:
        if claims is None:
            raise BatchInputError(
                "an oracle needs a claims file (it answers for the claims it lists)"
            )
        import json

        from ..method.oracle import Oracle, OracleError

        try:
            oracle_doc = json.loads(e.oracle.read_text(encoding="utf-8"))
            Oracle.from_dict(oracle_doc)
        except FileNotFoundError:
            raise BatchInputError(f"oracle file {e.oracle} not found") from None
        except (OSError, ValueError, OracleError) as exc:
            raise BatchInputError(f"{e.oracle}: {exc}") from None
    oracle_path = str(e.oracle) if e.oracle is not None else None
    try:
        # verify's own checks: an oracle with a plugged step is a usage conflict, a malformed
        # base URL is bad input (exit 2, no call).
        check_oracle_alone(
            settings,
            oracle_path is not None,
            name='the job\'s "oracle"',
            steps="it cannot be combined with a plugged decomposer, selector or judge",
        )
        model_name = job_model_name(settings, oracle_path)
    except JobInputError as exc:
        raise BatchInputError(str(exc)) from None
    try:
        settings.verify_config()
    except ValueError as exc:
        raise BatchInputError(str(exc)) from None
    if settings.prompt_dir:
        try:  # read and parsed before any call, as for `veritrail verify`
            check_prompt_dir(settings.prompt_dir)
        except JobInputError as exc:
            raise BatchInputError(str(exc)) from None
    dag_sha = file_sha256(dag_path)
    fp, run_dir = run_identity(
        dag_sha, claims, model_name, settings, oracle_path, e.run_dir, dag_path
    )
    claims_path = str(e.claims) if e.claims is not None else None
    return Job(
        dag=dag,
        dag_path=dag_path,
        dag_sha256=dag_sha,
        claims=claims,
        claims_path=claims_path,
        oracle_path=oracle_path,
        settings=settings,
        model_name=model_name,
        fingerprint=fp,
        run_dir=run_dir,
        out_path=e.out,
        html_path=e.out.with_suffix(".html") if html else None,
        inputs=input_paths(dag_path, claims_path, oracle_path, None, settings),
        batch_id=e.id,
        oracle_doc=oracle_doc,
    )


class _FileIndex:
    """Paths by identity, as `run.inputs.same_file` compares them (the same resolved path, or
    the same device and inode), so that "is this file one of those?" costs one `resolve` and
    one `stat` instead of a `same_file` per candidate.

    Why: the batch checks every output and every run directory's files against every input and
    output of the whole manifest; pair by pair that is quadratic in the jobs, and at 200 jobs it
    took 30-60 s before the first model call (issue 38: 524,402 `same_file` calls, each
    resolving both paths; benchmarks/README.md).
    """

    def __init__(self) -> None:
        self._at: dict[object, list[int]] = {}
        self.paths: list[Path] = []

    @staticmethod
    def _keys(p: Path) -> list[object]:
        keys: list[object] = []
        # A symlink loop cannot be resolved: then compared by inode only, as same_file does.
        with contextlib.suppress(OSError, RuntimeError):
            keys.append(("path", p.resolve()))
        try:
            st = os.stat(p)
            keys.append(("inode", st.st_dev, st.st_ino))
        except (OSError, ValueError):  # not there (yet): not the same file as any other
            pass
        return keys

    def add(self, p: Path) -> None:
        """Index `p` at the next position."""
        for k in self._keys(p):
            self._at.setdefault(k, []).append(len(self.paths))
        self.paths.append(p)

    def matches(self, p: Path) -> list[int]:
        """Positions (ascending) of the indexed paths that name the same file as `p`."""
        return sorted({i for k in self._keys(p) for i in self._at.get(k, ())})

    def first(self, p: Path) -> Path | None:
        """The first indexed path that names the same file as `p`, or None."""
        got = self.matches(p)
        return self.paths[got[0]] if got else None


def _check_outputs(
    manifest: Path, jobs: Sequence[Job], extra: Iterable[Path], summary_dir: Path | None
) -> list[str]:
    """Outputs never overwrite an input, never collide, and can be written (nothing is created
    here: the nearest existing directory is tried); two jobs never share a run; no run
    directory would overwrite an input (`run.job.check_run_dir`'s rules, over indexed paths:
    `_FileIndex`)."""
    problems: list[str] = []
    named: list[tuple[str, str]] = [("manifest", str(manifest))]
    named += [("config file", str(p)) for p in extra]
    named += [(f"{what} of job {j.id}", p) for j in jobs for what, p in j.inputs]
    inputs = _FileIndex()
    for _, given in named:
        inputs.add(Path(given))
    outputs: dict[Path, str] = {}
    every_out: list[tuple[str, Path]] = []
    if summary_dir is not None:
        for name in (SUMMARY_FILE, INDEX_FILE):
            sp = summary_dir / name
            clash = inputs.first(sp)
            if clash is not None:
                problems.append(
                    f"--summary-dir {summary_dir}: its {name} is an input ({clash}); "
                    "refusing to overwrite it"
                )
                continue
            outputs[sp.resolve()] = f"the batch's {name}"
            every_out.append((f"--summary-dir {summary_dir}: {name}", sp))
    runs: dict[Path, str] = {}
    for j in jobs:
        for kind, p in (("out", j.out_path), ("HTML report", j.html_path)):
            if p is None:
                continue
            if p.is_dir():
                problems.append(f"job {j.id}: {kind} {p} is a directory")
                continue
            clash = inputs.first(p)
            if clash is not None:
                problems.append(
                    f"job {j.id}: {kind} {p} is an input ({clash}); refusing to overwrite it"
                )
                continue
            key = p.resolve()
            if key in outputs:
                owner = outputs[key]
                by = owner if owner.startswith("the batch") else f"job {owner}"
                problems.append(f"job {j.id}: {kind} {p} is also written by {by}")
                continue
            outputs[key] = j.id
            every_out.append((f"job {j.id}: {kind}", p))
        rkey = j.run_dir.resolve()
        if rkey in runs:
            problems.append(
                f"job {j.id}: same run directory {j.run_dir} as job {runs[rkey]} (the same "
                "inputs and settings); drop one job or give it its own run_dir"
            )
        runs[rkey] = j.id
    for label, p in every_out:
        try:  # the place can be written, before any call (`finish_job` creates directories)
            check_output_files([(label, p)], [], create=False)
        except JobInputError as exc:
            problems.append(str(exc))
    outs = _FileIndex()
    for _, p in every_out:
        outs.add(p)
    for j in jobs:
        try:
            _check_run_dir(j, named, inputs, every_out, outs)
        except JobInputError as exc:
            problems.append(str(exc))
    return problems


def _check_run_dir(
    j: Job,
    named: Sequence[tuple[str, str]],
    inputs: _FileIndex,
    every_out: Sequence[tuple[str, Path]],
    outs: _FileIndex,
) -> None:
    """`run.job.check_run_dir(j.run_dir, named, every_out)` with the same rules and messages,
    looking the run's own files up in the indexes (`_FileIndex`) instead of comparing each with
    every input and output of the batch."""
    label = f"job {j.id}: run directory"
    check_run_dir(j.run_dir, [], [], label=label)  # its own checks: not someone else's folder
    own = run_dir_files(j.run_dir)
    for f in own:
        hit = inputs.matches(f)
        if hit:
            what, given = named[hit[0]]
            raise JobInputError(
                f"{label} {j.run_dir}: the run writes its {f.name} there, and {given} is the "
                f"{what}; an input is never overwritten: give another run directory or "
                "rename the file"
            )
    own_report = j.run_dir / REPORT_FILE
    clashes: list[tuple[int, int]] = []  # (output's position, own file's), the first reported
    for k, f in enumerate(own):
        for i in outs.matches(f):
            p = every_out[i][1]
            # A job's own out may be its run's report.json (the same report is written there).
            if not (p == j.out_path and same_file(p, own_report)):
                clashes.append((i, k))
    if clashes:
        i, k = min(clashes)
        flag, path = every_out[i]
        raise JobInputError(
            f"{flag} {path} is the run's own {own[k].name} in {j.run_dir}; give another name"
        )


# -- the driver's view of a running job -----------------------------------------------------------


@dataclass
class JobState:
    """A job whose run store is open (and locked) on the driver."""

    job: Job
    store: RunStore
    config: VerifyConfig
    """The loop settings after `fit_to_context` (what the report shows)."""
    resumed: int
    recorded: set[str] = field(default_factory=set)
    """Claims recorded by this batch run (a retried Ray task may deliver a claim twice)."""
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """Why some claims got no result (a task that failed for good), redacted."""
    started: float = field(default_factory=time.perf_counter)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    report: dict[str, Any] | None = None
    finished: bool = False
    fatal: str | None = None
    """The fatal endpoint error that stopped this job's claims (redacted), if one did."""
    _open: set[str] | None = field(default=None, repr=False)
    """Claims neither recorded by this run nor finished by an earlier one (`complete`); built on
    first use, then kept up to date by `record` and `record_lines`."""

    def todo(self) -> list[Claim]:
        """Claims still to verify (never recorded, or last recorded with an error)."""
        return self.store.remaining()

    def record(self, result: ClaimResult) -> bool:
        """Record a finished claim once; False when it was already recorded by this run."""
        cid = result.claim.id
        if cid in self.recorded:
            return False
        self.recorded.add(cid)
        self.store.record(result)
        if self._open is not None:
            self._open.discard(cid)
        return True

    def record_lines(self, entries: Sequence[tuple[str, str]]) -> list[ClaimResult]:
        """Record finished claims given as (claim id, `run.store.result_line`) pairs, each once
        (those already recorded by this run are left out), with one write and one fsync
        (`RunStore.record_lines`); returns the claims recorded. The Ray executor's path: the
        workers encode their results, so the driver neither re-encodes nor syncs per claim."""
        fresh: dict[str, str] = {}
        for cid, line in entries:
            if cid not in self.recorded and cid not in fresh:
                fresh[cid] = line
        if not fresh:
            return []
        results = self.store.record_lines(list(fresh.values()))
        got = {r.claim.id for r in results}
        if got != set(fresh):
            # A line whose id is not the one it was sent with would break the once-only count.
            raise ValueError(f"job {self.job.id}: result lines do not match their claim ids")
        self.recorded.update(got)
        if self._open is not None:
            self._open.difference_update(got)
        return results

    def claim_issues(self) -> dict[str, list[SelectionIssue]]:
        """Issues met while extracting each claim (kept in run.json), for `verify_claims`."""
        from ..records import SelectionIssue

        stored = self.store.info.extra.get("extraction_issues") or {}
        return {cid: [SelectionIssue.from_json(i) for i in items] for cid, items in stored.items()}

    def complete(self) -> bool:
        """Every claim has a recorded result: recorded by this run (errors count: they are
        reported, exit 3) or finished by an earlier one."""
        if self._open is None:
            # Once; afterwards each record only removes its claim. (Scanning every claim of the
            # job after each record made the driver's work per claim grow with the job's size.)
            done = self.store.done
            self._open = {
                c.id for c in self.store.claims if c.id not in self.recorded and c.id not in done
            }
        return not self._open


def fitted_config(job: Job, provider: Provider | None) -> VerifyConfig:
    """The job's loop settings, token limits filled from the model's context window."""
    config = job.settings.verify_config()
    if provider is None:
        return config
    return fit_to_context(config, model_context_window(provider))


class ExtractionFailed(RunFailure, RuntimeError):
    """A job's claims could not be extracted (no claims file): the batch stops with exit 3."""


async def open_store(job: Job, model: Model | None) -> RunStore:
    """Create or reopen the job's run directory, extracting claims first when none were given
    (`run.execute.open_run_store`, as `veritrail verify` opens it: locked before any of its
    files is read or written).

    Raises `ExtractionFailed` when claims must be extracted and the model cannot (the endpoint
    refused, every retry failed), `RunStoreError` for a run directory in use or holding another
    run.
    """
    from ..lm.base import ProviderError
    from ..lm.registry import describe_fatal
    from ..run.execute import open_run_store

    try:
        return await open_run_store(job, model, refuse_other_run=False)
    except ProviderError as exc:
        raise ExtractionFailed(
            f"job {job.id}: claims could not be extracted: "
            f"{describe_fatal(exc, job.settings.base_url)}"
        ) from None


def finish_job(state: JobState, *, executor: str) -> dict[str, Any]:
    """Build, store and write the job's report (JSON, and HTML when asked)."""
    job, store = state.job, state.store
    ended = end_run(
        job,
        store,
        state.config,
        RunEnd(
            started=state.started_at,
            wall_seconds=time.perf_counter() - state.started,
            resumed_claims=state.resumed,
            notes=tuple(state.notes),
            fatal=state.fatal,
            batch={"job": job.id, "executor": executor},
        ),
        model_name=job.model.name,
    )
    report, stored = ended.report, ended.report_file
    assert job.out_path is not None  # every job of a batch has its report file
    job.out_path.parent.mkdir(parents=True, exist_ok=True)
    # The run directory's copy is written exactly as `report.write_report` writes (redacted,
    # indented JSON): copy its bytes instead of encoding a large report twice (indented JSON is
    # encoded in pure Python, the driver's largest cost per claim after recording it).
    atomic_write_text(job.out_path, stored.read_text(encoding="utf-8"))
    if job.html_path is not None:
        from ..html import write_html

        write_html(report, job.html_path)
    store.unlock()
    state.report = report
    state.finished = True
    return report


# -- outcome ------------------------------------------------------------------------------------


def outcome(state: JobState, max_unsupported: float | None = None) -> JobOutcome:
    """Summarise one job (from its run store). The gate is `max_unsupported` when given, else
    the job's `max_unsupported` setting: the share of the job's claims (errored ones included)
    whose verdict is Not Fully Supported must not exceed it, as for `veritrail verify`. A job
    that checked citations is gated by its `max_miscited` setting too, through its report
    (`citations.miscited_gate`, the rule of `verify`)."""
    if max_unsupported is None:
        max_unsupported = getattr(state.job.settings, "max_unsupported", None)
    results = state.store.results_in_order()
    verdicts = {v.value: 0 for v in Verdict}
    errors = 0
    for r in results:
        if r.termination is Termination.ERROR or r.verdict is None:
            errors += 1
        else:
            verdicts[r.verdict.value] += 1
    total = len(state.store.claims)
    nfs = verdicts[Verdict.NOT_FULLY_SUPPORTED.value]
    rate = nfs / total if total else None
    gate = gate_exceeded(nfs, total, max_unsupported)
    miscited, miscited_failed = _citations(state)
    return JobOutcome(
        id=state.job.id,
        status="complete" if state.finished else "incomplete",
        claims=total,
        verdicts=verdicts,
        errors=errors,
        missing=total - len(results),
        unsupported_rate=rate,
        gate_failed=gate or miscited_failed,
        lm_calls=sum(r.cost.lm_calls for r in results),
        out=str(state.job.out_path) if state.finished else None,
        html=str(state.job.html_path) if state.finished and state.job.html_path else None,
        run_dir=str(state.job.run_dir),
        failures=tuple(state.failures),
        miscited=miscited,
        miscited_gate_failed=miscited_failed,
    )


def _citations(state: JobState) -> tuple[int | None, bool]:
    """The job's miscited claims (None when it did not check citations or wrote no report)
    and whether its `--max-miscited` gate failed."""
    from ..citations import miscited_gate
    from ..report import as_report

    if state.report is None:
        return None, False
    doc = as_report(state.report)
    if doc.summary.citations is None:
        return None, False
    bad = sum(
        1
        for c in doc.claims
        if c.citation is not None and c.citation.kind is not None and c.citation.kind.miscited
    )
    return bad, miscited_gate(doc) is not None


def exit_code(outcomes: Sequence[JobOutcome]) -> int:
    """3 when any claim could not be verified (wins), else 1 when a gate failed, else 0
    (`outcome.exit_status`, the rule of `veritrail verify`)."""
    return int(
        exit_status(
            errors=any(o.errors or o.missing or o.status != "complete" for o in outcomes),
            gate_failed=any(o.gate_failed for o in outcomes),
        )
    )
