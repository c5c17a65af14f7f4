"""What every subcommand shares: input errors exit with status 2 and a one-line message, and the
shared options (the model options, and the run options of every command that verifies).

Defaults shown by `--help` are never written here: the method's come from
`veritrail.method.config.VerifyConfig` through `veritrail.run.settings.default_text`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from ..cigate import CiTargets
from ..lm.model import Model
from ..run.job import HTML_BESIDE, JobError
from ..run.settings import SETTING_NAMES, default_text, model_cache
from ..textio import InputError, read_input_text

if TYPE_CHECKING:
    from ..report import ReportSource

_F = TypeVar("_F", bound=Callable[..., Any])

EXIT_CODES_HELP = (
    "Exit status: 0 every claim verified and no gate failed; 1 a gate failed "
    "(--max-unsupported, --max-miscited); 2 bad input or usage (before any model call); 3 one or "
    "more claims could not be verified (wins over 1; they are retried by the next run), also when a "
    "--max-cost/--max-tokens cap was reached; 130 interrupted."
)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an input error and exit (status 2 = bad input)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def read_text(path: str, what: str = "input file") -> str:
    """A UTF-8 input text file's content (`veritrail.textio` rules: an optional UTF-8 BOM is
    dropped; a file that is not UTF-8 is named with the byte and where), or exit 2 naming it."""
    try:
        return read_input_text(path, what)
    except InputError as exc:
        fail(str(exc))


@contextlib.contextmanager
def job_errors() -> Iterator[None]:
    """Turn a `JobError` into its one-line `error: ...` message and exit status."""
    try:
        yield
    except JobError as exc:
        fail(exc.message, exc.exit_code)


def _apply(options: list[Callable[[_F], _F]], f: _F) -> _F:
    for opt in reversed(options):
        f = opt(f)
    return f


# -- model options ------------------------------------------------------------------------------

CACHE_HELP = (
    "Model response cache: a SQLite file, or 'off' [default: the user cache, "
    "$VERITRAIL_CACHE_DIR/cache.sqlite or ~/.cache/veritrail/cache.sqlite]."
)
"""`--cache` means this in every command that calls a model (verify, check, resume, batch, eval,
detect, extract, pipeline, from-graphrag); `veritrail cache --cache FILE` names the same file."""


def cache_option(f: _F) -> _F:
    """The `--cache` option (`CACHE_HELP`), parsed by `run.settings.model_cache`."""
    return click.option("--cache", "cache", default=None, help=CACHE_HELP)(f)


def model_options(f: _F) -> _F:
    """The model flags of the commands that call a model outside a run (`extract`, `detect`,
    `pipeline`, `from-graphrag`); same meaning as in `verify`."""
    return _apply(
        [
            click.option(
                "--model",
                "model_name",
                default=None,
                help="provider/model [default: the default model].",
            ),
            click.option(
                "--base-url", default=None, help="OpenAI-compatible endpoint (vLLM, Ollama, ...)."
            ),
            cache_option,
            click.option(
                "--threads",
                type=click.IntRange(min=1),
                default=None,
                help="CPU threads of a local/ model.",
            ),
        ],
        f,
    )


def open_model(
    name: str | None, *, base_url: str | None, cache: str | None, threads: int | None
) -> Model:
    """Build the model the way `veritrail verify` does (user cache on unless turned off)."""
    from ..lm.registry import ModelNameError, get_model

    try:
        return get_model(name, cache=model_cache(cache), base_url=base_url, threads=threads)
    except (ModelNameError, TypeError, ValueError) as exc:
        fail(str(exc))


# -- run options --------------------------------------------------------------------------------

MAX_COST_HELP = (
    "Spending cap in USD over this command's model calls: no call starts once it would pass "
    "the cap, calls in flight finish, finished claims are kept, exit 3 (cache hits cost "
    "nothing; a model with no known price is refused; docs/running.md, Capping cost)"
)
MAX_TOKENS_HELP = "Spending cap in tokens (input + output), as --max-cost"
"""`--max-cost` and `--max-tokens` mean this in verify, check, resume, batch and eval."""


def budget_options(f: _F) -> _F:
    """`--max-cost` and `--max-tokens` for a command that takes them outside `RUN_OPTIONS`
    (`resume`, `batch`, `eval`): values `max_cost` and `max_tokens`, None when not given."""
    return _apply(
        [
            click.option(
                "--max-cost",
                type=float,
                default=None,
                metavar="USD",
                help=MAX_COST_HELP + " [default: no cap].",
            ),
            click.option(
                "--max-tokens",
                type=int,
                default=None,
                metavar="N",
                help=MAX_TOKENS_HELP + " [default: no cap].",
            ),
        ],
        f,
    )


def _setting(*names: str, help: str, default: str | None = "", **kw: Any) -> Callable[[_F], _F]:
    """An option that sets the setting named by its last flag. Its help ends with the setting's
    default from `Settings` (`default_text`), or with `default` when given as text (a default
    decided elsewhere, e.g. by the model layer); `default=None` shows none."""
    name = names[-1].lstrip("-").replace("-", "_")
    assert name in SETTING_NAMES, name
    shown = default_text(name) if default == "" else default
    text = help + (f" [default: {shown}]" if shown is not None else "") + "."
    kw.setdefault("type", int)
    return click.option(*names, default=None, help=text, **kw)


def _text(*names: str, help: str, default: str | None = None, **kw: Any) -> Callable[[_F], _F]:
    return _setting(*names, help=help, default=default, type=str, **kw)


RUN_OPTIONS: list[Callable[[Any], Any]] = [
    _text("--model", help="provider/model, e.g. openai/gpt-4o or local/qwen2.5-coder-1.5b"),
    _text("--base-url", help="OpenAI-compatible endpoint (vLLM, Ollama, ...)"),
    _setting("-q", "--q", help="Consecutive Not Fully Supported verdicts that stop a claim"),
    click.option(
        "--out",
        "out_path",
        default=None,
        type=click.Path(dir_okay=False),
        # No silent report.json in the working directory, overwriting the last one (issue 43).
        help="Also write the JSON report to this file [default: only report.json in the run "
        "directory].",
    ),
    click.option(
        "--html",
        "html_opt",
        is_flag=False,
        flag_value=HTML_BESIDE,
        default=None,
        metavar="[FILE]",
        help="Also write the HTML report: to FILE, or beside the JSON (.html) when no FILE is "
        "given (in the run directory without --out).",
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
    _text("--runs-dir", help="Parent of default run directories", default=default_text("runs_dir")),
    click.option("--quiet", is_flag=True, help="No progress and no summary (errors still print)."),
    _setting("--concurrency", help="Model calls in flight at once", default=None),
    _setting("--max-parallel-claims", help="Claims verified at once", default="all"),
    _setting(
        "--threads", help="CPU threads of an embedded local/ model", default="from the free cores"
    ),
    cache_option,
    _text("--prompt-dir", help="Directory of prompt overrides"),
    _text(
        "--question",
        help="The question the final output answered (context for claim extraction without "
        "--claims)",
    ),
    _setting(
        "--extraction",
        type=click.Choice(["batched", "per-sentence"]),
        help="Claim extraction without --claims: each stage over many sentences per call, or "
        "per-sentence (three calls a sentence, the paper's form; docs/extraction.md)",
    ),
    _text(
        "--decomposer",
        metavar="SPEC",
        help="Plugin decomposer: module:attribute, file.py:attribute or an entry point of group "
        "veritrail.steps (docs/plugins.md)",
    ),
    _text("--selector", metavar="SPEC", help="Plugin evidence selector"),
    _text(
        "--judge",
        metavar="SPEC",
        help="Plugin verdict step, or nli:PATH for the NLI judge over a local model directory",
    ),
    _text("--prices", help="JSON price file over the built-in price table"),
    _setting(
        "--max-unsupported",
        type=float,
        default=None,
        metavar="RATE",
        help="CI gate: exit 1 when the share of claims judged Not Fully Supported is above RATE "
        "(0 to 1); the summary lists them",
    ),
    _text(
        "--citations",
        metavar="auto|off|PATTERN",
        help="Check the answer's own citation markers against the sources holding each claim's "
        "evidence: auto ([1], [^1], 【1】, [text](url), (Source: name)), off, or a regular "
        "expression whose group holds the reference (docs/citations.md)",
        default="off",
    ),
    _setting(
        "--max-miscited",
        type=float,
        default=None,
        metavar="RATE",
        help="CI gate: exit 1 when the share of cited claims that are misattributed or cite a "
        "source that does not support them is above RATE (0 to 1; with --citations)",
    ),
    _setting("--max-reasks", help="Re-asks per model call after an unreadable reply"),
    _setting("--max-cost", type=float, metavar="USD", help=MAX_COST_HELP, default="no cap"),
    _setting("--max-tokens", metavar="N", help=MAX_TOKENS_HELP, default="no cap"),
    _setting("--evidence-sentences", help="Sentences per evidence prompt (root and non-root)"),
    _setting("--evidence-sentences-root", help="Sentences per evidence prompt of root nodes"),
    _setting(
        "--evidence-sentences-nonroot", help="Sentences per evidence prompt of non-root nodes"
    ),
    _setting(
        "--evidence-tokens-root",
        help="Token limit per evidence prompt of root nodes (unset: from a model's known context window)",
    ),
    _setting(
        "--evidence-tokens-nonroot",
        help="Token limit per evidence prompt of non-root nodes (unset: as for root nodes)",
    ),
    _setting("--verdict-sentences", help="Verdict input limit in sentences"),
    _setting(
        "--verdict-tokens",
        help="Verdict input limit in tokens (unset: from a model's known context window)",
    ),
    _setting("--max-compression-reruns", help="Evidence compression reruns"),
    _setting("--max-decomposition-calls", help="Sub-claim decomposition calls per claim"),
    _setting(
        "--samples",
        help="Soft prediction: samples per call (the extra ones at sample_temperature "
        f"{default_text('sample_temperature')}, a file/environment setting)",
    ),
    _setting("--threshold", help="Soft prediction: votes needed"),
    _setting(
        "--claims-per-prompt",
        help="Shared prompts: claims that need the same step over the same text share one "
        "prompt, up to this many; 1 = one claim per prompt, as in the paper (docs/method.md)",
    ),
    _setting(
        "--term-check/--no-term-check",
        "term_check",
        help="The key-term check: a Fully Supported verdict on a claim naming a number or name "
        "that no source contains becomes Not Fully Supported (docs/method.md)",
        default="on for the embedded local/ models, else none",
        type=bool,
    ),
]
"""The options every command that verifies takes after its own (`verify`, `check`): outputs,
run directory and every setting. One list, so a new option reaches both commands; options that
are not settings are taken by name in each command's signature (the rest pass on as settings)."""


def run_options(f: _F) -> _F:
    """Apply `RUN_OPTIONS` (in order, as `--help` lists them)."""
    return _apply(RUN_OPTIONS, f)


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


# -- CI outputs ---------------------------------------------------------------------------------

CI_OPTIONS: list[Callable[[Any], Any]] = [
    click.option(
        "--junit",
        "junit_path",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="Also write JUnit XML: one test case per claim, Not Fully Supported ones failed "
        "(docs/running.md, CI outputs).",
    ),
    click.option(
        "--sarif",
        "sarif_path",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="Also write SARIF 2.1.0: one result per unsupported claim, at the DAG file and the "
        "node where it entered (code-scanning annotations).",
    ),
    click.option(
        "--annotations",
        type=click.Choice(["github"]),
        default=None,
        help="Print one GitHub Actions ::error line per unsupported claim on stdout.",
    ),
]
"""The CI outputs of every command that gates (`verify`, `check`, `batch`, `diff`)."""


def ci_options(f: _F) -> _F:
    """Apply `CI_OPTIONS`; the command takes `junit_path`, `sarif_path` and `annotations`."""
    return _apply(CI_OPTIONS, f)


def ci_targets(
    junit_path: str | None, sarif_path: str | None, annotations: str | None
) -> CiTargets:
    """The `CI_OPTIONS` values as `CiTargets`."""
    return CiTargets(
        junit=Path(junit_path) if junit_path else None,
        sarif=Path(sarif_path) if sarif_path else None,
        annotations=annotations,
    )


def pop_ci_targets(options: dict[str, Any]) -> CiTargets:
    """Take the `CI_OPTIONS` out of a command's options (a command that passes `**options`
    on), as `CiTargets`."""
    return ci_targets(
        options.pop("junit_path", None),
        options.pop("sarif_path", None),
        options.pop("annotations", None),
    )


def check_ci_outputs(
    targets: CiTargets,
    *,
    inputs: Sequence[tuple[str, str]],
    outputs: Sequence[tuple[str, Path | None]] = (),
    create: bool = True,
    run_dirs: Sequence[Path] = (),
) -> None:
    """Refuse CI output files as `--out` is refused (`JobInputError`, exit 2, before any model
    call): an input, a directory, the same file as another output, unwritable, or one of the
    files a run keeps in its run directory (`run_dirs`: run.json, results.jsonl, the lock, ...;
    overwriting one would make the run unreadable or lose its finished claims).

    `outputs` are the command's own files (checked by the command itself): here they are only
    compared with the CI files, and nothing is created for them (a batch creates a job's report
    folder when the job ends). Nothing at all is checked when no CI file was asked for."""
    from ..run.inputs import check_output_files

    if not targets.files():
        return
    from ..run.inputs import check_not_run_files

    for run_dir in run_dirs:
        check_not_run_files(run_dir, targets.files())
    own = [(flag, p) for flag, p in outputs if p is not None]
    check_output_files(own + targets.files(), inputs, create=False)
    check_output_files(targets.files(), inputs, create=create)


def dag_input(report: ReportSource, dag_path: str | None, name: str | None = None) -> Any:
    """A report (typed, or a document `cigate.report_input` validates) as `cigate.GateInput`,
    located at `dag_path` (relative to the working directory when inside it, so code hosts match
    it to the repository's file)."""
    from ..cigate import report_input

    if not dag_path:
        return report_input(report, name=name)
    path = Path(dag_path)
    try:
        uri = path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (OSError, ValueError):
        uri = path.as_posix()
    text = None
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if path.stat().st_size <= DAG_TEXT_LIMIT:
            text = path.read_text(encoding="utf-8")
    return report_input(report, name=name or uri, dag_uri=uri, dag_text=text)


DAG_TEXT_LIMIT = 64 * 1024 * 1024
"""A larger DAG file is not read to find node lines (results point at its line 1)."""


def emit_ci_outputs(targets: CiTargets, inputs: Sequence[Any], *, quiet: bool = False) -> None:
    """Write the CI files and print the annotation lines (stdout, also with `quiet`: they are
    what was asked for); exit 3 when a file cannot be written (the run itself is saved)."""
    from ..cigate import write_ci_outputs

    if not targets.any:
        return
    try:
        lines = write_ci_outputs(targets, inputs)
    except OSError as exc:
        fail(f"cannot write a CI output: {exc}", 3)
    for line in lines:
        click.echo(line)
    for path, what in ((targets.junit, "JUnit XML"), (targets.sarif, "SARIF")):
        if path is not None and not quiet:
            click.echo(f"{what} written to {path}", err=True)
