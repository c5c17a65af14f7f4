"""`veritrail verify`: the main job. DAG (+ claims) in, report out.

A run lives in a run directory (`runstore`): every finished claim is saved the moment it
finishes, so `kill -9` loses at most the claims in flight, and those cost nothing to redo because
every model call is cached. Running the same command again (or `veritrail resume RUN_DIR`)
finishes the rest. See docs/running.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import hashlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..claims import ClaimsFileError, load_claims
from ..dag import Dag, DagValidationError, load_dag
from ..lm.base import ProviderError
from ..records import Claim, ClaimResult, Termination
from ..redaction import MASK, redact, redact_url, url_secret
from ..report import build_report, write_report
from ..runstore import (
    RUN_FILE,
    RunStore,
    RunStoreError,
    Status,
    default_run_dir,
    file_sha256,
    lock_run_dir,
    run_fingerprint,
)
from ..settings import (
    RESULT_SETTINGS,
    SETTING_NAMES,
    Settings,
    SettingsError,
    find_config_file,
    resolve_settings,
    settings_table,
)
from .common import fail

if TYPE_CHECKING:
    from ..lm.model import Model
    from ..progress import ProgressReporter
    from ..steps import Steps

_F = TypeVar("_F", bound=Callable[..., Any])

HTML_BESIDE = "\0beside"
"""The value of `--html` given without a file name."""

_CACHE_OFF = ("0", "off", "false", "no", "none")


class ExitCode(IntEnum):
    """Exit status of `veritrail verify` and `veritrail resume` (README "Exit codes")."""

    OK = 0
    """Every claim verified and no gate failed."""
    GATE = 1
    """A gate failed (`--max-unsupported`)."""
    USAGE = 2
    """Bad input or usage, decided before any model call."""
    ERRORS = 3
    """One or more claims could not be verified (wins over GATE)."""
    INTERRUPTED = 130
    """Ctrl-C or SIGTERM."""


EXIT_CODES_HELP = (
    "Exit status: 0 every claim verified and no gate failed; 1 a gate failed "
    "(--max-unsupported); 2 bad input or usage (before any model call); 3 one or more claims "
    "could not be verified (wins over 1; they are retried by the next run); 130 interrupted."
)


@dataclass(frozen=True, slots=True)
class Job:
    """Everything a run needs, resolved from flags/config (verify) or from run.json (resume)."""

    dag: Dag
    dag_path: str
    dag_sha256: str
    claims: list[Claim] | None
    """None: claims are extracted from the terminal node by the run."""
    claims_path: str | None
    oracle_path: str | None
    settings: Settings
    model_name: str
    fingerprint: str
    run_dir: Path
    out_path: Path
    html_path: Path | None
    inputs: tuple[tuple[str, str], ...] = ()
    """(what, path) of every input file: outputs must not be one of them."""

    def result_config(self) -> dict[str, Any]:
        """Settings that change results (the fingerprint's config part)."""
        return result_config(self.settings, self.oracle_path)


def html_target(html: str | None, out: Path) -> Path | None:
    """Where `--html [FILE]` writes: FILE, beside the JSON report (no FILE given), or nowhere."""
    if html is None:
        return None
    return out.with_suffix(".html") if html == HTML_BESIDE else Path(html)


def result_config(settings: Settings, oracle_path: str | None) -> dict[str, Any]:
    """The settings that determine a run's results, plus the oracle file's content hash."""
    d = settings.to_dict()
    out = {k: d[k] for k in RESULT_SETTINGS if k in d}
    if oracle_path is not None:
        out["oracle_sha256"] = file_sha256(oracle_path)
    if settings.prompt_dir:
        # Prompt overrides change results as much as the packaged templates do.
        h = hashlib.sha256()
        for f in sorted(Path(settings.prompt_dir).glob("*.md")):
            h.update(f.name.encode("utf-8") + b"\0" + f.read_bytes() + b"\0")
        out["prompt_dir_sha256"] = h.hexdigest()
    return out


def _load_dag(dag_path: str) -> Dag:
    try:
        dag = load_dag(dag_path)
    except DagValidationError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{dag_path}: {exc}")
    # The DAG lives for the whole run and holds no reference cycles; moving it out of the cyclic
    # garbage collector's view stops full collections from re-scanning its ~100,000 nodes at
    # GraphRAG scale (30-50 ms a pause; before read plans were shared they were half of the
    # engine's CPU in wide rounds, now within noise: benchmarks/README.md §4).
    gc.freeze()
    return dag


def _model_name(settings: Settings, oracle_path: str | None) -> str:
    if oracle_path is not None:
        return "oracle"
    from ..lm.registry import ModelNameError, resolve_name, split_name

    name = resolve_name(settings.model)
    try:
        provider, _ = split_name(name)
    except ModelNameError as exc:
        fail(str(exc))
    if settings.base_url and provider == "openai":
        # A malformed endpoint is bad input, decided before any model call (exit 2), not a
        # failure of every claim; `check_base_url` also names the problem.
        from ..lm.base import EndpointError
        from ..lm.openai import check_base_url

        try:
            check_base_url(settings.base_url)
        except EndpointError as exc:
            fail(redact(exc.cause))
    return name


def check_prompt_dir(prompt_dir: str) -> None:
    """Every override in `--prompt-dir` is read and parsed before any model call (exit 2 on a
    missing directory, an unreadable or non-UTF-8 file, a template without a `## user` section,
    or a file that overrides no packaged prompt, which is almost always a misspelt name)."""
    from ..prompting import PromptError, packaged_prompt_names, parse_prompt_file
    from ..textio import InputError

    d = Path(prompt_dir)
    if not d.is_dir():
        fail(f"prompt directory {prompt_dir} is not a directory")
    known = set(packaged_prompt_names())
    for f in sorted(d.glob("*.md")):
        if f.stem not in known:
            fail(
                f"prompt override {f} matches no prompt (known: {', '.join(sorted(known))}); "
                "rename or remove it"
            )
        try:
            parse_prompt_file(f)
        except (InputError, PromptError) as exc:
            fail(str(exc))


def _same_file(a: Path, b: Path) -> bool:
    """True when `a` and `b` name one file: the same resolved path, or (links, bind mounts,
    case-insensitive file systems) the same inode by `os.path.samefile`."""
    try:
        if a.resolve() == b.resolve():
            return True
    except OSError:
        pass
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not the same file
        return False


def check_outputs(
    out: Path, html: Path | None, inputs: Sequence[tuple[str, str]], *, create: bool = True
) -> None:
    """Refuse (exit 2, before any model call) outputs that would overwrite an input, collide
    with each other, are directories, or cannot be written.

    A missing parent directory of `--out`/`--html` is created here, up front (so a typo in a
    directory name costs nothing but an empty directory, and an unwritable place is found before
    the run, not after it). `create=False` (dry run) checks without creating anything.
    """
    outs = [("--out", out)] + ([("--html", html)] if html is not None else [])
    for flag, path in outs:
        for what, given in inputs:
            if _same_file(path, Path(given)):
                fail(f"{flag} {path} is the {what}; an input is never overwritten")
        if path.is_dir():
            fail(f"{flag} {path} is a directory; give a file name")
    if html is not None and _same_file(out, html):
        fail(f"--out and --html are the same file ({out}); give them different names")
    for flag, path in outs:
        parent = path.parent
        if parent.exists() and not parent.is_dir():
            fail(f"{flag} {path}: {parent} is not a directory")
        if not parent.exists():
            if not create:
                continue
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                fail(f"{flag} {path}: cannot create the directory {parent}: {exc.strerror or exc}")
        # Really try: os.access is wrong on read-only mounts, ACLs and for root.
        try:
            fd, probe = tempfile.mkstemp(dir=parent, prefix=".veritrail-probe.")
        except OSError as exc:
            fail(f"{flag} {path}: cannot write in {parent}: {exc.strerror or exc}")
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)


def _input_paths(
    dag_path: str,
    claims_path: str | None,
    oracle_path: str | None,
    config_file: Path | None,
    settings: Settings,
) -> tuple[tuple[str, str], ...]:
    named = [
        ("input DAG", dag_path),
        ("claims file", claims_path),
        ("oracle file", oracle_path),
        ("config file", str(config_file) if config_file is not None else None),
        ("price file", settings.prices),
    ]
    return tuple((what, p) for what, p in named if p)


def prepare_job(
    *,
    dag_path: str,
    claims_path: str | None,
    oracle_path: str | None,
    settings: Settings,
    run_dir: str | None,
    out_path: str,
    html: str | None,
    config_file: Path | None = None,
    create_dirs: bool = True,
) -> Job:
    """Load and check the inputs and outputs of `veritrail verify` (exits with status 2 on bad
    input, before any model call)."""
    inputs = _input_paths(dag_path, claims_path, oracle_path, config_file, settings)
    out = Path(out_path)
    html_path = html_target(html, out)
    # Outputs first: a refused --out costs no DAG parse.
    check_outputs(out, html_path, inputs, create=create_dirs)
    dag = _load_dag(dag_path)
    claims: list[Claim] | None = None
    if claims_path is not None:
        try:
            claims = load_claims(claims_path)
        except ClaimsFileError as exc:
            fail(str(exc))
        if not claims:
            fail(f"{claims_path}: no claims to verify")
    elif oracle_path is not None:
        fail("--oracle needs --claims (the oracle answers for the claims it lists)")
    if oracle_path is not None and not Path(oracle_path).is_file():
        fail(f"oracle file {oracle_path} not found")
    model_name = _model_name(settings, oracle_path)
    if settings.prompt_dir:
        check_prompt_dir(settings.prompt_dir)
    dag_sha = file_sha256(dag_path)
    fp = run_fingerprint(
        dag_sha256=dag_sha,
        claims=claims,
        model=model_name,
        config=result_config(settings, oracle_path),
    )
    rdir = Path(run_dir) if run_dir else default_run_dir(settings.runs_dir, dag_path, fp)
    return Job(
        dag,
        dag_path,
        dag_sha,
        claims,
        claims_path,
        oracle_path,
        settings,
        model_name,
        fp,
        rdir,
        out,
        html_path,
        inputs,
    )


def job_from_run_dir(
    run_dir: str,
    *,
    out_path: str | None,
    html: str | None,
    overrides: Mapping[str, Any] | None = None,
) -> Job:
    """Rebuild the job of an existing run directory (for `veritrail resume`).

    `overrides` are settings given to `resume` itself (`--max-unsupported`, `--base-url`); they
    change how the run is finished, never what it computes (the fingerprint is checked).
    """
    try:
        store = RunStore.open(run_dir)
    except RunStoreError as exc:
        fail(str(exc))
    info = store.info
    dag_path = info.dag_path
    if not Path(dag_path).is_file():
        fail(f"the run's DAG file {dag_path} is gone")
    dag_sha = file_sha256(dag_path)
    if dag_sha != info.dag_sha256:
        fail(f"the run's DAG file {dag_path} changed since the run started (content hash differs)")
    known = {k: v for k, v in info.config.items() if k in SETTING_NAMES}
    known.update(overrides or {})
    try:
        settings = Settings(**known)
    except (TypeError, ValueError) as exc:
        fail(f"{run_dir}: unreadable settings in {RUN_FILE}: {exc}")
    stored_url = settings.base_url
    if stored_url and MASK + "@" in stored_url and not (overrides or {}).get("base_url"):
        # run.json keeps the base URL without its user and password; they are needed again.
        fail(
            f"the run's base URL {stored_url} had credentials, which are never stored; "
            "give it again with --base-url (or VERITRAIL_BASE_URL)"
        )
    oracle_path = info.extra.get("oracle_path")
    claims_from_file = info.extra.get("claims_given", True)
    claims = store.claims
    fp = run_fingerprint(
        dag_sha256=dag_sha,
        claims=claims if claims_from_file else None,
        model=info.model,
        config=result_config(settings, oracle_path),
    )
    if fp != info.fingerprint:
        fail(
            f"{run_dir}: the run's inputs changed (oracle file or settings no longer match "
            "run.json); start a new run instead"
        )
    out = Path(out_path or info.extra.get("out_path") or Path(run_dir) / "report.json")
    stored_html = info.extra.get("html_path")
    html_path = html_target(html, out) or (Path(stored_html) if stored_html else None)
    inputs = _input_paths(dag_path, info.claims_path, oracle_path, None, settings)
    check_outputs(out, html_path, inputs)
    # The report names the DAG as the original command did, so a resumed report equals an
    # uninterrupted one.
    return Job(
        _load_dag(dag_path),
        str(info.extra.get("dag_path_given") or dag_path),
        dag_sha,
        claims,
        info.claims_path,
        oracle_path,
        settings,
        info.model,
        info.fingerprint,
        Path(run_dir),
        out,
        html_path,
        inputs,
    )


# -- running ------------------------------------------------------------------------------------


class _RunState:
    """What the Ctrl-C handler and the end-of-run summary need to know about a run."""

    def __init__(self) -> None:
        self.store: RunStore | None = None
        self.fatal: str | None = None
        """The fatal endpoint error that stopped the run (redacted), if one did."""


def _build_model(job: Job) -> Model:
    from ..lm.registry import get_model

    s = job.settings
    cache: str | bool = True
    if s.cache is not None:
        cache = False if s.cache.strip().lower() in _CACHE_OFF else s.cache
    # Provider options only some providers take: passing them to others would be an error.
    local_only: dict[str, Any] = (
        {"threads": s.threads} if job.model_name.startswith("local/") else {}
    )
    return get_model(
        job.model_name,
        cache=cache,
        concurrency=s.concurrency,
        base_url=s.base_url,
        prices=s.prices,
        max_reasks=s.max_reasks,
        **local_only,
    )


def _steps(job: Job, model: Model | None) -> Steps:
    from ..loop import lm_steps

    if job.oracle_path is not None:
        from ..oracle import Oracle, OracleError

        try:
            return Oracle.from_file(job.oracle_path).steps()
        except OracleError as exc:
            fail(str(exc))
    assert model is not None
    return lm_steps(model, sample_temperature=job.settings.sample_temperature)


def stored_settings(settings: Settings) -> dict[str, Any]:
    """Settings as run.json keeps them: the base URL without user and password."""
    d = settings.to_dict()
    if d.get("base_url"):
        d["base_url"] = redact_url(str(d["base_url"]))
    return d


def describe_fatal(exc: BaseException, endpoint: str | None) -> str:
    """One line for a fatal endpoint error: the HTTP status, the endpoint (credentials removed)
    and the cause (`ProviderError.cause` when the provider gave one), redacted."""
    cause = getattr(exc, "cause", None)
    msg = redact(str(cause or exc)).strip() or type(exc).__name__
    status = getattr(exc, "status", None)
    if status is not None and f"HTTP {status}" not in msg:
        msg = f"HTTP {status}: {msg}"
    ep_raw = getattr(exc, "endpoint", None) or endpoint
    if ep_raw:
        ep = redact_url(str(ep_raw))
        if ep not in msg:
            msg += f" (endpoint {ep})"
    return msg


def _fatal_of(model: Model | None) -> BaseException | None:
    """The endpoint error that made `model` refuse every further call (`Model.fatal`), if any."""
    if model is None:
        return None
    fatal = getattr(model, "fatal", None)
    return fatal if isinstance(fatal, BaseException) else None


def _endpoint(job: Job, model: Model | None) -> str | None:
    if job.settings.base_url:
        return job.settings.base_url
    return model.endpoint if model is not None else None


async def _open_store(
    job: Job, model: Model | None, progress: ProgressReporter, state: _RunState
) -> RunStore:
    extra: dict[str, Any] = {
        "oracle_path": str(Path(job.oracle_path).resolve()) if job.oracle_path else None,
        "claims_given": job.claims is not None,
        "dag_path_given": job.dag_path,
        "out_path": str(job.out_path.resolve()),
        "html_path": str(job.html_path.resolve()) if job.html_path else None,
    }
    # Lock before reading or writing any file of the run, and before any model call: a second
    # process on the same directory stops here (exit 2) and spends nothing.
    lock = lock_run_dir(job.run_dir)
    try:
        claims = job.claims
        if (job.run_dir / RUN_FILE).exists():
            existing = RunStore.open(job.run_dir)
            if existing.info.fingerprint != job.fingerprint:
                raise RunStoreError(
                    f"{job.run_dir} holds a different run (the DAG, claims, model or settings "
                    "differ). Use another --run-dir or delete that directory."
                )
            if claims is None:
                claims = existing.claims  # extracted by an earlier run: reuse them
        if claims is None:
            from ..extraction import LMClaimSource

            assert model is not None
            progress.extracting()
            source = LMClaimSource(model, question=job.settings.question)
            claims = await source.claims_for(job.dag.node(job.dag.terminal).text)
            ext = model.usage.for_claim(None)
            extra["extraction_cost"] = _cost_dict(ext.values())
            if source.last is not None:
                # Unreadable replies met while extracting a claim head that claim's issues; kept
                # in run.json so a resumed run still reports them.
                extra["extraction_issues"] = {
                    cid: [{"kind": i.kind, "detail": i.detail} for i in got]
                    for cid, got in source.last.issues_by_claim().items()
                }
        return RunStore.create_or_open(
            job.run_dir,
            fingerprint=job.fingerprint,
            dag_path=job.dag_path,
            dag_sha256=job.dag_sha256,
            model=job.model_name,
            config={**stored_settings(job.settings), **job.result_config()},
            claims=claims,
            claims_path=job.claims_path,
            extra=extra,
            lock=lock,
        )
    except BaseException:
        lock.release()
        raise


def _cost_dict(costs: Any) -> dict[str, Any]:
    """Totals of `StepCost`s as the report's cost fields."""
    out = {"lm_calls": 0, "cached_calls": 0, "input_tokens": 0, "output_tokens": 0, "dollars": 0.0}
    for c in costs:
        out["lm_calls"] += c.lm_calls
        out["cached_calls"] += c.cached_calls
        out["input_tokens"] += c.input_tokens
        out["output_tokens"] += c.output_tokens
        out["dollars"] += c.dollars
    out["dollars"] = round(out["dollars"], 6)
    return out


def _cancel_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C: cancel the run so finally-blocks and the resume hint run."""
    task = asyncio.current_task()
    if task is None:
        return
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        # Not available on Windows event loops, nor outside the main thread.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


async def _verify_remaining(
    job: Job,
    store: RunStore,
    steps: Steps,
    config: Any,
    model: Model | None,
    progress: ProgressReporter,
    state: _RunState,
) -> None:
    """Verify the claims not finished yet (never run, or ended in error last time).

    `loop.verify_claims` schedules them: a claim counts as in flight from the moment it starts
    (so progress shows a claim whose call is being retried), and once the endpoint has failed
    fatally (`Model.fatal`: bad key, unknown model) no further claim is started; those are
    recorded as errors naming the cause and verified again by the next run.
    """
    from ..loop import verify_claims
    from ..records import SelectionIssue
    from ..segment import SentenceIndex

    endpoint = _endpoint(job, model)

    def fatal_cause() -> str | None:
        if state.fatal is None:
            exc = _fatal_of(model)
            if exc is not None:
                state.fatal = describe_fatal(exc, endpoint)
        return state.fatal

    def on_result(r: ClaimResult) -> None:
        store.record(r)
        progress.claim_finished(r)
        fatal_cause()

    stored = store.info.extra.get("extraction_issues") or {}
    await verify_claims(
        job.dag,
        store.remaining(),
        steps,
        config,
        sentences=SentenceIndex(job.dag),
        on_start=lambda c: progress.claim_started(c.id),
        on_result=on_result,
        stop=fatal_cause,
        max_parallel_claims=job.settings.max_parallel_claims,
        model=model,
        claim_issues={
            cid: [SelectionIssue(i["kind"], i["detail"]) for i in items]
            for cid, items in stored.items()
        },
    )


async def run_job(job: Job, progress: ProgressReporter, state: _RunState) -> dict[str, Any]:
    """Run (or finish) the job and return the report."""
    from ..prompting import set_prompt_dir

    if job.settings.prompt_dir:
        set_prompt_dir(job.settings.prompt_dir)
    from ..config import fit_to_context, model_context_window

    config = job.settings.verify_config()
    try:
        model = None if job.oracle_path else _build_model(job)
    except ValueError as exc:  # an unknown provider, or an option it does not take
        fail(str(exc))
    if model is not None:
        config = fit_to_context(config, model_context_window(model.provider))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    _cancel_on_sigterm()
    ticker = asyncio.create_task(progress.ticker())
    try:
        if model is not None:
            model.on_call = progress.call
        steps = _steps(job, model)  # reads the oracle file: fail before touching the run dir
        store = await _open_store(job, model, progress, state)
        state.store = store
        store.set_status(Status.RUNNING)
        finished = [r for r in store.results_in_order() if r.termination is not Termination.ERROR]
        progress.start(
            len(store.claims), resumed=len(finished), done=finished, retrying=len(store.errored)
        )
        try:
            await _verify_remaining(job, store, steps, config, model, progress, state)
        finally:
            ticker.cancel()
            progress.close()
        run_info: dict[str, Any] = {
            "started": started,
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "wall_seconds": round(time.perf_counter() - t0, 3),
            "run_dir": str(job.run_dir),
            "resumed_claims": len(finished),
        }
        ext = store.info.extra.get("extraction_cost")
        if ext:
            run_info["extraction_cost"] = ext
        if model is not None and model.notes:
            run_info["notes"] = list(model.notes)
        if state.fatal is not None:
            run_info["fatal"] = state.fatal
        report = build_report(
            store.results_in_order(),
            job.dag,
            model=job.model_name,
            config=dataclasses.asdict(config),
            run=run_info,
            dag_path=job.dag_path,
        )
        store.write_report(report)
        errored = report["summary"]["verdicts"].get("error", 0)
        store.set_status(Status.INCOMPLETE if errored else Status.COMPLETE)
        return report
    finally:
        ticker.cancel()
        if model is not None:
            await model.aclose()


PARTIAL_REPORT = "partial-report.json"


def _write_partial_report(job: Job, store: RunStore) -> Path | None:
    """The report of the claims finished so far, in the run directory (for a look meanwhile)."""
    results = store.results_in_order()
    if not results:
        return None
    report = build_report(
        results,
        job.dag,
        model=job.model_name,
        config=dataclasses.asdict(job.settings.verify_config()),
        run={"partial": True, "claims_total": len(store.claims)},
        dag_path=job.dag_path,
    )
    path = job.run_dir / PARTIAL_REPORT
    write_report(report, path)
    return path


def exit_code(report: Mapping[str, Any], max_unsupported: float | None) -> ExitCode:
    """The run's exit status from its report: 3 when a claim ended in error (wins), else 1 when
    the share of Not Fully Supported claims is above `max_unsupported`, else 0."""
    from ..progress import gate_failures

    if report["summary"]["verdicts"].get("error", 0):
        return ExitCode.ERRORS
    if gate_failures(report, max_unsupported) is not None:
        return ExitCode.GATE
    return ExitCode.OK


def execute(job: Job, *, quiet: bool) -> None:
    """Run the job with progress, write the outputs, print the summary; handle Ctrl-C.

    Exits with the run's `ExitCode` (0 returns normally)."""
    from ..progress import make_progress

    progress = make_progress(quiet=quiet, interval=job.settings.progress_interval)
    state = _RunState()
    try:
        _execute(job, quiet=quiet, progress=progress, state=state)
    finally:
        # Release the run's lock now, not at process exit: an embedding process (tests, a
        # notebook) may run the same directory again.
        if state.store is not None:
            state.store.unlock()


def _execute(job: Job, *, quiet: bool, progress: ProgressReporter, state: _RunState) -> None:
    from ..progress import print_outcome, print_summary

    if not quiet:
        if job.model_name.startswith("local/"):
            click.echo(
                "note: the embedded local model is small; it is for trying the tool, "
                "not for real verdicts.",
                err=True,
            )
        click.echo(f"run directory: {job.run_dir}", err=True)
    try:
        report = asyncio.run(run_job(job, progress, state))
    except (KeyboardInterrupt, asyncio.CancelledError):
        # Ctrl-C (asyncio.run cancels the run and re-raises KeyboardInterrupt) or SIGTERM (our
        # handler cancels the main task). Finished claims are already durable in the store.
        store = state.store
        if store is not None:
            store.set_status(Status.INTERRUPTED)
            done, total = len(store.done), len(store.claims)
            partial = _write_partial_report(job, store)
            click.echo(
                f"\ninterrupted: {done} of {total} claims are finished and saved in {job.run_dir}"
                + (f" (partial report: {partial})" if partial else "")
                + f".\nResume with:  veritrail resume {job.run_dir}\n"
                "(or run the same command again; finished claims and cached model calls are reused)",
                err=True,
            )
        else:
            click.echo("\ninterrupted before any claim was started.", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except RunStoreError as exc:
        fail(redact(str(exc)))
    except ProviderError as exc:
        # Claim-level failures are recorded per claim; this is one outside any claim (claim
        # extraction): no claim can be verified without it.
        fail(
            "claims could not be extracted: "
            + describe_fatal(exc, job.settings.base_url)
            + ". Fix the endpoint and run the same command again.",
            ExitCode.ERRORS,
        )
    write_report(report, job.out_path)
    if job.html_path is not None:
        from ..html import write_html

        write_html(report, job.html_path)
    if not quiet:
        print_summary(report, wall_seconds=report["run"].get("wall_seconds"))
        click.echo(f"report written to {job.out_path}")
        if job.html_path is not None:
            click.echo(f"HTML report written to {job.html_path}")
    code = exit_code(report, job.settings.max_unsupported)
    # Errors and a failed gate print even with --quiet: they decide the exit status.
    print_outcome(
        report,
        max_unsupported=job.settings.max_unsupported,
        run_dir=str(job.run_dir),
        fatal=state.fatal,
    )
    if code is not ExitCode.OK:
        sys.exit(code)


# -- dry run ------------------------------------------------------------------------------------


def print_dry_run(job: Job) -> None:
    """Print what the run would call and the estimate; no model is built or called."""
    from ..estimate import DECOMPOSITION, EVIDENCE, EXTRACTION, VERDICT, estimate_run

    s = job.settings
    echo = click.echo
    echo("dry run: no model was called")
    endpoint = f" at {redact_url(s.base_url)}" if s.base_url else ""
    echo(f"model: {job.model_name}{endpoint}")
    dag = job.dag
    echo(f"DAG: {job.dag_path} ({len(dag):,} nodes, {max(n.stage for n in dag)} stages)")
    claims = job.claims
    done_ids: set[str] = set()
    if (job.run_dir / RUN_FILE).exists():
        try:
            existing = RunStore.open(job.run_dir)
        except RunStoreError as exc:
            fail(str(exc))
        if existing.info.fingerprint != job.fingerprint:
            fail(f"{job.run_dir} holds a different run; use another --run-dir")
        done_ids = set(existing.done)
        claims = existing.claims
        echo(
            f"run directory: {job.run_dir} (exists: {len(done_ids)} of {len(claims)} claims "
            "finished; the run would resume)"
        )
    else:
        echo(f"run directory: {job.run_dir} (would be created)")
    if claims is None:
        echo("claims: extracted from the terminal node (one claim per sentence assumed)")
        todo: list[Claim] | None = None
    else:
        todo = [c for c in claims if c.id not in done_ids]
        echo(
            f"claims: {len(todo)} claims to verify"
            + (f" ({len(done_ids)} already done)" if done_ids else "")
        )
    echo(f"steps: {'oracle file ' + str(job.oracle_path) if job.oracle_path else 'model'}")
    echo("settings (value, source):")
    for name, value, source in settings_table(s):
        echo(f"  {name:<28} {value:<24} {source}")
    price: tuple[float, float] | None = None
    if job.oracle_path is None:
        from ..lm.pricing import PriceTable
        from ..lm.registry import split_name

        prov, mdl = split_name(job.model_name)
        try:
            table = PriceTable.from_file(s.prices) if s.prices else PriceTable()
        except (OSError, ValueError) as exc:
            fail(str(exc) if str(s.prices) in str(exc) else f"price file {s.prices}: {exc}")
        p = table.lookup(prov, mdl)
        price = (p.input, p.output) if p is not None else None
    if s.prompt_dir:
        from ..prompting import set_prompt_dir

        set_prompt_dir(s.prompt_dir)
    est = estimate_run(dag, todo, s.verify_config(), price=price)
    echo("")
    echo("per claim (estimate / upper): iterations, nodes read, model calls")
    shown = est.claims[:10]
    for ce in shown:
        e, u = ce.estimate, ce.upper
        echo(
            f"  {ce.claim_id:<12} iterations {e.iterations}/{u.iterations}  "
            f"nodes {e.nodes_read}/{u.nodes_read}  calls {e.calls}/{u.calls}"
        )
    if len(est.claims) > len(shown):
        echo(f"  ... and {len(est.claims) - len(shown)} more claims")
    echo("")
    echo("estimate (see docs/running.md for the assumptions; lower / estimate / upper):")
    rows: list[tuple[str, list[str]]] = []
    step_rows = [
        (EXTRACTION, "claim extraction calls"),
        (DECOMPOSITION, "decomposition calls"),
        (EVIDENCE, "evidence calls"),
        (VERDICT, "verdict calls"),
    ]
    sc3 = (est.lower, est.estimate, est.upper)
    for step, label in step_rows:
        vals = [sc.steps.get(step) for sc in sc3]
        if all(v is None or v.calls == 0 for v in vals):
            continue
        rows.append((label, [f"{(v.calls if v else 0):,}" for v in vals]))
    rows.append(("total calls", [f"{x.calls:,}" for x in sc3]))
    rows.append(("input tokens", [f"{x.input_tokens:,}" for x in sc3]))
    rows.append(("output tokens", [f"{x.output_tokens:,}" for x in sc3]))
    rows.append(
        ("nodes read per claim", [f"{(x.nodes_read / max(1, len(est.claims))):,.1f}" for x in sc3])
    )
    if job.oracle_path is None and est.dollars_estimate is not None:
        rows.append(
            (
                "cost (USD)",
                [
                    "$" + format(d or 0.0, ",.4f")
                    for d in (est.dollars_lower, est.dollars_estimate, est.dollars_upper)
                ],
            )
        )
    for line in aligned_table(("", "lower", "estimate", "upper"), rows):
        echo("  " + line)
    if job.oracle_path is not None:
        echo("  cost: none (the oracle answers every step)")
    elif est.dollars_estimate is None:
        echo(f"  cost: unknown (no price for {job.model_name}; add one with VERITRAIL_PRICES)")


def aligned_table(header: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """Lines of a text table: the label column left-aligned, number columns right-aligned, each
    as wide as its widest cell plus two spaces, so no two numbers ever touch (1,234,567,890
    included)."""
    ncols = len(header) - 1
    label_w = max([len(header[0])] + [len(label) for label, _ in rows])
    widths = [
        max([len(header[i + 1])] + [len(cells[i]) for _, cells in rows]) + 2 for i in range(ncols)
    ]
    lines = [
        f"{header[0]:<{label_w}}"
        + "".join(f"{h:>{w}}" for h, w in zip(header[1:], widths, strict=True))
    ]
    for label, cells in rows:
        lines.append(
            f"{label:<{label_w}}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))
        )
    return lines


# -- the command --------------------------------------------------------------------------------


def _int_opt(*names: str, help: str) -> Callable[[_F], _F]:
    return click.option(*names, type=int, default=None, help=help)


@click.command(epilog=EXIT_CODES_HELP)
@click.argument("dag_path", type=click.Path(dir_okay=False))
@click.option(
    "--claims",
    "claims_path",
    type=click.Path(dir_okay=False),
    help="Claims JSON file (default: extract claims from the final output).",
)
@click.option(
    "--oracle",
    "oracle_path",
    type=click.Path(dir_okay=False),
    help="Answer every step from this oracle file instead of a model.",
)
@click.option(
    "--model", default=None, help="provider/model, e.g. openai/gpt-4o or local/qwen2.5-coder-1.5b."
)
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint (vLLM, Ollama, ...).")
@_int_opt(
    "-q", "--q", help="Consecutive Not Fully Supported verdicts that stop a claim [default: 3]."
)
@click.option(
    "--out",
    "out_path",
    default="report.json",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The JSON report.",
)
@click.option(
    "--html",
    "html_opt",
    is_flag=False,
    flag_value=HTML_BESIDE,
    default=None,
    metavar="[FILE]",
    help="Also write the HTML report: to FILE, or beside the JSON (.html) when no FILE is given.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="TOML settings file [default: ./veritrail.toml if present].",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what would be called and an estimate of calls, tokens and cost; call nothing.",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Run directory [default: RUNS_DIR/<dag>-<hash of inputs and settings>].",
)
@click.option("--runs-dir", default=None, help="Parent of default run directories [default: runs].")
@click.option("--quiet", is_flag=True, help="No progress and no summary (errors still print).")
@_int_opt("--concurrency", help="Model calls in flight at once.")
@_int_opt("--max-parallel-claims", help="Claims verified at once [default: all].")
@_int_opt("--threads", help="CPU threads of an embedded local/ model [default: 2].")
@click.option("--cache", default=None, help="Model cache file, or 'off' [default: the user cache].")
@click.option("--prompt-dir", default=None, help="Directory of prompt overrides.")
@click.option(
    "--question",
    default=None,
    help="The question the final output answered (context for claim extraction without --claims).",
)
@click.option("--prices", default=None, help="JSON price file over the built-in price table.")
@click.option(
    "--max-unsupported",
    type=float,
    default=None,
    metavar="RATE",
    help="CI gate: exit 1 when the share of claims judged Not Fully Supported is above RATE "
    "(0 to 1); the summary lists them.",
)
@_int_opt("--max-reasks", help="Re-asks per model call after an unreadable reply [default: 3].")
@_int_opt(
    "--evidence-sentences", help="Sentences per evidence prompt (root and non-root) [default: 40]."
)
@_int_opt("--evidence-sentences-root", help="Sentences per evidence prompt of root nodes.")
@_int_opt("--evidence-sentences-nonroot", help="Sentences per evidence prompt of non-root nodes.")
@_int_opt("--evidence-tokens-root", help="Token limit per evidence prompt of root nodes.")
@_int_opt("--evidence-tokens-nonroot", help="Token limit per evidence prompt of non-root nodes.")
@_int_opt("--verdict-sentences", help="Verdict input limit in sentences [default: 200].")
@_int_opt("--verdict-tokens", help="Verdict input limit in tokens.")
@_int_opt("--max-compression-reruns", help="Evidence compression reruns [default: 3].")
@_int_opt(
    "--max-decomposition-calls", help="Sub-claim decomposition calls per claim [default: 20]."
)
@_int_opt("--samples", help="Soft prediction: samples per call [default: 1].")
@_int_opt("--threshold", help="Soft prediction: votes needed [default: 1].")
def verify(
    dag_path: str,
    claims_path: str | None,
    oracle_path: str | None,
    out_path: str,
    html_opt: str | None,
    config_path: str | None,
    dry_run: bool,
    run_dir: str | None,
    quiet: bool,
    **setting_flags: Any,
) -> None:
    """Verify the claims of DAG_PATH's final output and write a report with the evidence trail.

    Settings come from flags, then VERITRAIL_* environment variables, then the TOML file, then
    defaults. The run is saved as it goes; run the same command again (or `veritrail resume
    RUN_DIR`) to finish an interrupted run; claims that ended in error are verified again.
    """
    flags = _given(setting_flags)
    try:
        settings = resolve_settings(flags, config_path=config_path)
    except SettingsError as exc:
        fail(redact(str(exc)))
    # The password of a base URL is a secret from now on: every redact() removes it.
    url_secret(settings.base_url)
    job = prepare_job(
        dag_path=dag_path,
        claims_path=claims_path,
        oracle_path=oracle_path,
        settings=settings,
        run_dir=run_dir,
        out_path=out_path,
        html=html_opt,
        config_file=find_config_file(config_path, os.environ, Path.cwd()),
        create_dirs=not dry_run,
    )
    if dry_run:
        print_dry_run(job)
        return
    execute(job, quiet=quiet)


def _given(options: Mapping[str, Any]) -> dict[str, Any]:
    """Options the user gave (click passes None for the others), keyed by setting name."""
    out = {k: v for k, v in options.items() if v is not None}
    unknown = set(out) - set(SETTING_NAMES)
    assert not unknown, f"options without a setting: {unknown}"
    return out
