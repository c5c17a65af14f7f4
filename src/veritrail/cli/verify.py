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
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..claims import ClaimsFileError, load_claims
from ..dag import Dag, DagValidationError, load_dag
from ..lm.base import ProviderError
from ..records import Claim, ClaimResult
from ..report import build_report, write_report
from ..runstore import (
    RUN_FILE,
    RunStore,
    RunStoreError,
    Status,
    default_run_dir,
    file_sha256,
    run_fingerprint,
)
from ..settings import (
    RESULT_SETTINGS,
    SETTING_NAMES,
    Settings,
    SettingsError,
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
        split_name(name)
    except ModelNameError as exc:
        fail(str(exc))
    return name


def prepare_job(
    *,
    dag_path: str,
    claims_path: str | None,
    oracle_path: str | None,
    settings: Settings,
    run_dir: str | None,
    out_path: str,
    html: str | None,
) -> Job:
    """Load and check the inputs of `veritrail verify` (exits with status 2 on bad input)."""
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
    dag_sha = file_sha256(dag_path)
    fp = run_fingerprint(
        dag_sha256=dag_sha,
        claims=claims,
        model=model_name,
        config=result_config(settings, oracle_path),
    )
    rdir = Path(run_dir) if run_dir else default_run_dir(settings.runs_dir, dag_path, fp)
    out = Path(out_path)
    html_path = html_target(html, out)
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
    )


def job_from_run_dir(run_dir: str, *, out_path: str | None, html: str | None) -> Job:
    """Rebuild the job of an existing run directory (for `veritrail resume`)."""
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
    settings = Settings(**known)
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
    )


# -- running ------------------------------------------------------------------------------------


class _RunState:
    """What the Ctrl-C handler needs to know about a run in progress."""

    def __init__(self) -> None:
        self.store: RunStore | None = None


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


async def _open_store(job: Job, model: Model | None) -> RunStore:
    extra = {
        "oracle_path": str(Path(job.oracle_path).resolve()) if job.oracle_path else None,
        "claims_given": job.claims is not None,
        "dag_path_given": job.dag_path,
        "out_path": str(job.out_path.resolve()),
        "html_path": str(job.html_path.resolve()) if job.html_path else None,
    }
    claims = job.claims
    if claims is None:
        if (job.run_dir / RUN_FILE).exists():
            existing = RunStore.open(job.run_dir)
            if existing.info.fingerprint == job.fingerprint:
                claims = existing.claims  # extracted by the interrupted run: reuse them
        if claims is None:
            from ..extraction import LMClaimSource

            assert model is not None
            source = LMClaimSource(model, question=job.settings.question)
            claims = await source.claims_for(job.dag.node(job.dag.terminal).text)
    return RunStore.create_or_open(
        job.run_dir,
        fingerprint=job.fingerprint,
        dag_path=job.dag_path,
        dag_sha256=job.dag_sha256,
        model=job.model_name,
        config={**job.settings.to_dict(), **job.result_config()},
        claims=claims,
        claims_path=job.claims_path,
        extra=extra,
    )


def _cancel_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C: cancel the run so finally-blocks and the resume hint run."""
    task = asyncio.current_task()
    if task is None:
        return
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        # Not available on Windows event loops, nor outside the main thread.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


async def run_job(job: Job, progress: ProgressReporter, state: _RunState) -> dict[str, Any]:
    """Run (or finish) the job and return the report."""
    from ..loop import verify_claims
    from ..prompting import set_prompt_dir
    from ..segment import SentenceIndex

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
    try:
        if model is not None:
            model.on_call = progress.call
        steps = _steps(job, model)  # reads the oracle file: fail before touching the run dir
        store = await _open_store(job, model)
        store.lock()
        state.store = store
        store.set_status(Status.RUNNING)
        resumed = len(store.done)
        progress.start(len(store.claims), resumed=resumed, done=store.results_in_order())
        ticker = asyncio.create_task(progress.ticker())

        def on_result(r: ClaimResult) -> None:
            store.record(r)
            progress.claim_finished(r)

        try:
            await verify_claims(
                job.dag,
                store.remaining(),
                steps,
                config,
                sentences=SentenceIndex(job.dag),
                on_result=on_result,
                max_parallel_claims=job.settings.max_parallel_claims,
                model=model,
            )
        finally:
            ticker.cancel()
            progress.close()
        run_info: dict[str, Any] = {
            "started": started,
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "wall_seconds": round(time.perf_counter() - t0, 3),
            "run_dir": str(job.run_dir),
            "resumed_claims": resumed,
        }
        if model is not None and model.notes:
            run_info["notes"] = list(model.notes)
        report = build_report(
            store.results_in_order(),
            job.dag,
            model=job.model_name,
            config=dataclasses.asdict(config),
            run=run_info,
            dag_path=job.dag_path,
        )
        store.write_report(report)
        store.set_status(Status.COMPLETE)
        return report
    finally:
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


def execute(job: Job, *, quiet: bool) -> None:
    """Run the job with progress, write the outputs, print the summary; handle Ctrl-C."""
    from ..progress import make_progress, print_summary

    progress = make_progress(quiet=quiet, interval=job.settings.progress_interval)
    state = _RunState()
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
        sys.exit(130)
    except RunStoreError as exc:
        fail(str(exc))
    except ProviderError as exc:
        # Claim-level failures are recorded per claim; this is one outside any claim (claim
        # extraction): nothing can go on without it.
        fail(f"model call failed: {type(exc).__name__}: {exc}", 1)
    write_report(report, job.out_path)
    if job.html_path is not None:
        from ..html import write_html

        write_html(report, job.html_path)
    if not quiet:
        print_summary(report, wall_seconds=report["run"].get("wall_seconds"))
        click.echo(f"report written to {job.out_path}")
        if job.html_path is not None:
            click.echo(f"HTML report written to {job.html_path}")


# -- dry run ------------------------------------------------------------------------------------


def print_dry_run(job: Job) -> None:
    """Print what the run would call and the estimate; no model is built or called."""
    from ..estimate import DECOMPOSITION, EVIDENCE, EXTRACTION, VERDICT, estimate_run

    s = job.settings
    echo = click.echo
    echo("dry run: no model was called")
    endpoint = f" at {s.base_url}" if s.base_url else ""
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
            fail(f"price file {s.prices}: {exc}")
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
    echo(f"  {'':<24}{'lower':>14}{'estimate':>14}{'upper':>14}")
    rows = [
        (EXTRACTION, "claim extraction calls"),
        (DECOMPOSITION, "decomposition calls"),
        (EVIDENCE, "evidence calls"),
        (VERDICT, "verdict calls"),
    ]
    for step, label in rows:
        vals = [sc.steps.get(step) for sc in (est.lower, est.estimate, est.upper)]
        if all(v is None or v.calls == 0 for v in vals):
            continue
        echo(f"  {label:<24}" + "".join(f"{(v.calls if v else 0):>14,}" for v in vals))
    sc3 = (est.lower, est.estimate, est.upper)
    echo(f"  {'total calls':<24}" + "".join(f"{x.calls:>14,}" for x in sc3))
    echo(f"  {'input tokens':<24}" + "".join(f"{x.input_tokens:>14,}" for x in sc3))
    echo(f"  {'output tokens':<24}" + "".join(f"{x.output_tokens:>14,}" for x in sc3))
    echo(
        f"  {'nodes read per claim':<24}"
        + "".join(f"{(x.nodes_read / max(1, len(est.claims))):>14.1f}" for x in sc3)
    )
    if job.oracle_path is not None:
        echo("  cost: none (the oracle answers every step)")
    elif est.dollars_estimate is None:
        echo(f"  cost: unknown (no price for {job.model_name}; add one with VERITRAIL_PRICES)")
    else:
        echo(
            f"  {'cost (USD)':<24}"
            + "".join(
                f"{'$' + format(d or 0.0, ',.4f'):>14}"
                for d in (est.dollars_lower, est.dollars_estimate, est.dollars_upper)
            )
        )


# -- the command --------------------------------------------------------------------------------


def _int_opt(*names: str, help: str) -> Callable[[_F], _F]:
    return click.option(*names, type=int, default=None, help=help)


@click.command()
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
    RUN_DIR`) to finish an interrupted run.
    """
    flags = _given(setting_flags)
    try:
        settings = resolve_settings(flags, config_path=config_path)
    except SettingsError as exc:
        fail(str(exc))
    job = prepare_job(
        dag_path=dag_path,
        claims_path=claims_path,
        oracle_path=oracle_path,
        settings=settings,
        run_dir=run_dir,
        out_path=out_path,
        html=html_opt,
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
