"""`veritrail verify`: the main job. DAG (+ claims) in, report out.

This module only turns flags into a job (`veritrail.run.job`), runs it with progress and prints
the outcome; the job itself (inputs checked, run directory, report) is a library object shared
with `veritrail check`, `veritrail resume` and the Python API. Its typed errors become
`error: ...` lines and exit codes here (`JobError.exit_code`). See docs/running.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from ..lm.pricing import Price
from ..lm.registry import describe_fatal
from ..records import Claim
from ..redaction import redact, redact_url, url_secret
from ..run.job import (
    HTML_BESIDE,
    PARTIAL_REPORT,
    ExitCode,
    Job,
    JobError,
    RunState,
    check_outputs,
    exit_code,
    html_target,
    job_from_run_dir,
    prepare_job,
    record_interruption,
    run_job,
    write_outputs,
)
from ..run.settings import (
    SETTING_NAMES,
    Settings,
    SettingsError,
    find_config_file,
    resolve_settings,
    settings_table,
)
from ..run.store import RUN_FILE, RunStore, RunStoreError, result_config, stored_settings
from .common import fail

_F = TypeVar("_F", bound=Callable[..., Any])

# Re-exported: the names this module had before the job moved to `veritrail.run.job`.
__all__ = [
    "EXIT_CODES_HELP",
    "HTML_BESIDE",
    "PARTIAL_REPORT",
    "ExitCode",
    "Job",
    "aligned_table",
    "check_outputs",
    "claims_options",
    "describe_fatal",
    "execute",
    "exit_code",
    "html_target",
    "job_from_run_dir",
    "prepare_job",
    "print_dry_run",
    "resolve_cli_settings",
    "result_config",
    "run_command",
    "run_options",
    "stored_settings",
    "verify",
]

EXIT_CODES_HELP = (
    "Exit status: 0 every claim verified and no gate failed; 1 a gate failed "
    "(--max-unsupported); 2 bad input or usage (before any model call); 3 one or more claims "
    "could not be verified (wins over 1; they are retried by the next run); 130 interrupted."
)


@contextlib.contextmanager
def job_errors() -> Iterator[None]:
    """Turn a `JobError` into its one-line `error: ...` message and exit status."""
    try:
        yield
    except JobError as exc:
        fail(exc.message, exc.exit_code)


# -- running ------------------------------------------------------------------------------------


def execute(job: Job, *, quiet: bool) -> None:
    """Run the job with progress, write the outputs, print the summary; handle Ctrl-C.

    Exits with the run's `ExitCode` (0 returns normally)."""
    from ..run.progress import make_progress

    progress = make_progress(quiet=quiet, interval=job.settings.progress_interval)
    state = RunState()
    try:
        _execute(job, quiet=quiet, progress=progress, state=state)
    finally:
        # Release the run's lock now, not at process exit: an embedding process (tests, a
        # notebook) may run the same directory again.
        if state.store is not None:
            state.store.unlock()


def _execute(job: Job, *, quiet: bool, progress: Any, state: RunState) -> None:
    from ..run.progress import print_outcome, print_summary

    if not quiet:
        if job.model_name.startswith("local/"):
            click.echo(
                "note: the embedded local model is small; it is for trying the tool, "
                "not for real verdicts.",
                err=True,
            )
        click.echo(f"run directory: {job.run_dir}", err=True)
    try:
        with job_errors():
            report = asyncio.run(run_job(job, progress, state))
    except (KeyboardInterrupt, asyncio.CancelledError):
        # Ctrl-C (asyncio.run cancels the run and re-raises KeyboardInterrupt) or SIGTERM (our
        # handler cancels the main task). Finished claims are already durable in the store.
        got = record_interruption(job, state)
        if got is not None:
            click.echo(
                f"\ninterrupted: {got.done} of {got.total} claims are finished and saved in "
                f"{job.run_dir}"
                + (f" (partial report: {got.partial_report})" if got.partial_report else "")
                + f".\nResume with:  veritrail resume {job.run_dir}\n"
                "(or run the same command again; finished claims and cached model calls are reused)",
                err=True,
            )
        else:
            click.echo("\ninterrupted before any claim was started.", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    write_outputs(job, report, written=state.report_file)
    if not quiet:
        print_summary(report, wall_seconds=report["run"].get("wall_seconds"))
        if job.out_path is not None:
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
    from ..run.estimate import DECOMPOSITION, EVIDENCE, EXTRACTION, VERDICT, estimate_run

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
    price: Price | None = None
    if job.oracle_path is None:
        from ..lm.pricing import PriceTable
        from ..lm.registry import split_name

        prov, mdl = split_name(job.model_name)
        try:
            table = PriceTable.from_file(s.prices) if s.prices else PriceTable()
        except (OSError, ValueError) as exc:
            fail(str(exc) if str(s.prices) in str(exc) else f"price file {s.prices}: {exc}")
        price = table.lookup(prov, mdl)  # with its cached-input rate, when it has one
    if s.prompt_dir:
        from ..method.prompting import set_prompt_dir

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


RUN_OPTIONS: list[Callable[[_F], _F]] = [
    click.option(
        "--model",
        default=None,
        help="provider/model, e.g. openai/gpt-4o or local/qwen2.5-coder-1.5b.",
    ),
    click.option(
        "--base-url", default=None, help="OpenAI-compatible endpoint (vLLM, Ollama, ...)."
    ),
    _int_opt(
        "-q", "--q", help="Consecutive Not Fully Supported verdicts that stop a claim [default: 3]."
    ),
    click.option(
        "--out",
        "out_path",
        default="report.json",
        show_default=True,
        type=click.Path(dir_okay=False),
        help="The JSON report.",
    ),
    click.option(
        "--html",
        "html_opt",
        is_flag=False,
        flag_value=HTML_BESIDE,
        default=None,
        metavar="[FILE]",
        help="Also write the HTML report: to FILE, or beside the JSON (.html) when no FILE is given.",
    ),
    click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="TOML settings file [default: ./veritrail.toml if present].",
    ),
    click.option(
        "--dry-run",
        is_flag=True,
        help="Print what would be called and an estimate of calls, tokens and cost; call nothing.",
    ),
    click.option(
        "--run-dir",
        type=click.Path(file_okay=False),
        default=None,
        help="Run directory [default: RUNS_DIR/<dag>-<hash of inputs and settings>].",
    ),
    click.option(
        "--runs-dir", default=None, help="Parent of default run directories [default: runs]."
    ),
    click.option("--quiet", is_flag=True, help="No progress and no summary (errors still print)."),
    _int_opt("--concurrency", help="Model calls in flight at once."),
    _int_opt("--max-parallel-claims", help="Claims verified at once [default: all]."),
    _int_opt("--threads", help="CPU threads of an embedded local/ model [default: 2]."),
    click.option(
        "--cache", default=None, help="Model cache file, or 'off' [default: the user cache]."
    ),
    click.option("--prompt-dir", default=None, help="Directory of prompt overrides."),
    click.option(
        "--question",
        default=None,
        help="The question the final output answered (context for claim extraction without "
        "--claims).",
    ),
    click.option(
        "--decomposer",
        default=None,
        metavar="SPEC",
        help="Plugin decomposer: module:attribute, file.py:attribute or an entry point of group "
        "veritrail.method.steps (docs/plugins.md).",
    ),
    click.option("--selector", default=None, metavar="SPEC", help="Plugin evidence selector."),
    click.option(
        "--judge",
        default=None,
        metavar="SPEC",
        help="Plugin verdict step, or nli:PATH for the NLI judge over a local model directory.",
    ),
    click.option("--prices", default=None, help="JSON price file over the built-in price table."),
    click.option(
        "--max-unsupported",
        type=float,
        default=None,
        metavar="RATE",
        help="CI gate: exit 1 when the share of claims judged Not Fully Supported is above RATE "
        "(0 to 1); the summary lists them.",
    ),
    _int_opt("--max-reasks", help="Re-asks per model call after an unreadable reply [default: 3]."),
    _int_opt(
        "--evidence-sentences",
        help="Sentences per evidence prompt (root and non-root) [default: 40].",
    ),
    _int_opt("--evidence-sentences-root", help="Sentences per evidence prompt of root nodes."),
    _int_opt(
        "--evidence-sentences-nonroot", help="Sentences per evidence prompt of non-root nodes."
    ),
    _int_opt("--evidence-tokens-root", help="Token limit per evidence prompt of root nodes."),
    _int_opt(
        "--evidence-tokens-nonroot", help="Token limit per evidence prompt of non-root nodes."
    ),
    _int_opt("--verdict-sentences", help="Verdict input limit in sentences [default: 200]."),
    _int_opt("--verdict-tokens", help="Verdict input limit in tokens."),
    _int_opt("--max-compression-reruns", help="Evidence compression reruns [default: 3]."),
    _int_opt(
        "--max-decomposition-calls", help="Sub-claim decomposition calls per claim [default: 20]."
    ),
    _int_opt("--samples", help="Soft prediction: samples per call [default: 1]."),
    _int_opt("--threshold", help="Soft prediction: votes needed [default: 1]."),
]
"""The options every command that verifies takes after its own (`verify`, `check`): outputs,
run directory and every setting. One list, so a new option reaches both commands; options that
are not settings are taken by name in each command's signature (`_given` passes only setting
names on)."""


def run_options(f: _F) -> _F:
    """Apply `RUN_OPTIONS` (in order, as `--help` lists them)."""
    for opt in reversed(RUN_OPTIONS):
        f = opt(f)
    return f


def resolve_cli_settings(setting_flags: Mapping[str, Any], config_path: str | None) -> Settings:
    """Flags, environment, TOML file and defaults merged (exit 2 naming a bad value)."""
    flags = _given(setting_flags)
    try:
        settings = resolve_settings(flags, config_path=config_path)
    except SettingsError as exc:
        fail(redact(str(exc)))
    # The password of a base URL is a secret from now on: every redact() removes it.
    url_secret(settings.base_url)
    return settings


def claims_options(claims_from: str) -> Callable[[_F], _F]:
    """`--claims` (default: extract them from `claims_from`) and `--oracle`, the options every
    command that verifies takes before `RUN_OPTIONS`."""

    def apply(f: _F) -> _F:
        f = click.option(
            "--oracle",
            "oracle_path",
            type=click.Path(dir_okay=False),
            help="Answer every step from this oracle file instead of a model.",
        )(f)
        return click.option(
            "--claims",
            "claims_path",
            type=click.Path(dir_okay=False),
            help=f"Claims JSON file (default: extract claims from {claims_from}).",
        )(f)

    return apply


def run_command(options: Mapping[str, Any], inputs: Callable[[], Mapping[str, Any]]) -> None:
    """The body of every command that verifies (`verify`, `check`): the settings, the job, then
    the dry run or the run (exit status as `EXIT_CODES_HELP`).

    `options` are the command's `claims_options` and `run_options` as click passes them;
    `inputs()` gives the job's DAG (`dag_path=` or `dag=` and `extra_inputs=` of `prepare_job`),
    called after the settings are resolved and under the same error handling."""
    o = dict(options)
    claims_path, oracle_path = o.pop("claims_path"), o.pop("oracle_path")
    out_path, html_opt, run_dir = o.pop("out_path"), o.pop("html_opt"), o.pop("run_dir")
    config_path, dry_run, quiet = o.pop("config_path"), o.pop("dry_run"), o.pop("quiet")
    settings = resolve_cli_settings(o, config_path)
    with job_errors():
        job = prepare_job(
            **inputs(),
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


@click.command(epilog=EXIT_CODES_HELP)
@click.argument("dag_path", type=click.Path(dir_okay=False))
@claims_options("the final output")
@run_options
def verify(dag_path: str, **options: Any) -> None:
    """Verify the claims of DAG_PATH's final output and write a report with the evidence trail.

    Settings come from flags, then VERITRAIL_* environment variables, then the TOML file, then
    defaults. The run is saved as it goes; run the same command again (or `veritrail resume
    RUN_DIR`) to finish an interrupted run; claims that ended in error are verified again.
    """
    run_command(options, lambda: {"dag_path": dag_path})


def _given(options: Mapping[str, Any]) -> dict[str, Any]:
    """Options the user gave (click passes None for the others), keyed by setting name."""
    out = {k: v for k, v in options.items() if v is not None}
    unknown = set(out) - set(SETTING_NAMES)
    assert not unknown, f"options without a setting: {unknown}"
    return out
