"""One verification run: prepare the job, execute it, resume it, write its reports.

A run lives in a run directory (`runstore`): every finished claim is saved the moment it
finishes, so `kill -9` loses at most the claims in flight, and those cost nothing to redo because
every model call is cached. Running the same job again (or `veritrail resume RUN_DIR`) finishes
the rest. See docs/running.md.

Nothing here prints or exits: bad input raises `JobInputError` (exit status 2 in the CLI),
a model failure outside any claim raises `ClaimExtractionError` (status 3), and the caller maps
them. `veritrail.cli.verify`, `veritrail.cli.resume`, `veritrail.cli.check` and the Python API
(`veritrail.api`) are thin layers over `prepare_job` / `job_from_run_dir`, `run_job`,
`write_outputs` and `exit_code`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..dag import Dag, DagValidationError, load_dag
from ..errors import InputProblem, RunFailure, VeritrailError
from ..lm.base import ProviderError
from ..lm.registry import describe_fatal
from ..method.claims import ClaimsFileError, load_claims
from ..records import Claim, ClaimResult, Termination
from ..redaction import MASK, redact
from ..report import atomic_write_text, build_report, write_report
from .settings import (
    SETTING_NAMES,
    Settings,
    SettingsError,
    model_cache,
    resolve_settings,
)
from .store import (
    CLAIMS_FILE,
    LOCK_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    RUN_FILE,
    RunStore,
    RunStoreError,
    Status,
    default_run_dir,
    file_sha256,
    lock_run_dir,
    result_config,
    run_fingerprint,
    stored_settings,
)

if TYPE_CHECKING:
    from ..lm.model import Model
    from ..method.config import VerifyConfig
    from ..method.steps import Steps
    from .progress import ProgressReporter

HTML_BESIDE = "\0beside"
"""The value of `--html` given without a file name."""

DAG_FILE = "dag.json"
"""Where a run keeps a DAG it was given in memory (`veritrail check`, `veritrail.verify(dict)`)."""

PARTIAL_REPORT = "partial-report.json"

RUN_DIR_FILES = (RUN_FILE, CLAIMS_FILE, RESULTS_FILE, REPORT_FILE, PARTIAL_REPORT, LOCK_FILE)
"""The files a run writes in its run directory (`DAG_FILE` too, for a DAG given in memory):
no input may be one of them (`check_run_dir`)."""


class ExitCode(IntEnum):
    """Exit status of every command that verifies (README "Exit codes"); also
    `veritrail.Report.exit_code`."""

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


def job_settings(flags: Mapping[str, Any], *, config_path: str | Path | None) -> Settings:
    """The run's settings from the four layers of docs/running.md (`flags`: the options or
    arguments the user gave, None = not given); `JobInputError` naming a bad value. From here
    on the base URL's password is a secret (every `redact()` removes it). Shared by the CLI
    commands that verify and the Python API."""
    from ..redaction import url_secret

    given = {k: v for k, v in flags.items() if v is not None}
    try:  # an unknown name is a `SettingsError` too
        settings = resolve_settings(given, config_path=config_path)
    except SettingsError as exc:
        raise JobInputError(redact(str(exc))) from None
    url_secret(settings.base_url)
    return settings


def html_target(html: str | None, out: Path | None) -> Path | None:
    """Where `--html [FILE]` writes: FILE, beside the JSON report (no FILE given), or nowhere."""
    if html is None:
        return None
    if html == HTML_BESIDE:
        if out is None:
            raise JobInputError("--html without a file name needs --out (the HTML goes beside it)")
        return out.with_suffix(".html")
    return Path(html)


def load_job_dag(dag_path: str) -> Dag:
    """Load and validate a DAG file (`JobInputError` naming every problem).

    The DAG is moved out of the collector's view while claims are verified (and back after) by
    the run's collector policy, `gcpolicy.engine_gc`, for the CLI and the API alike.
    """
    try:
        dag = load_dag(dag_path)
    except DagValidationError as exc:
        raise JobInputError(str(exc)) from None
    except OSError as exc:
        raise JobInputError(f"{dag_path}: {exc}") from None
    return dag


def model_name(settings: Settings, oracle_path: str | None) -> str:
    """The run's `provider/model` ("oracle" with an oracle file), checked before any call."""
    if oracle_path is not None:
        return "oracle"
    from ..lm.registry import ModelNameError, resolve_name, split_name

    name = resolve_name(settings.model)
    try:
        provider, _ = split_name(name)
    except ModelNameError as exc:
        raise JobInputError(str(exc)) from None
    if settings.base_url and provider == "openai":
        # A malformed endpoint is bad input, decided before any model call (exit 2), not a
        # failure of every claim; `check_base_url` also names the problem.
        from ..lm.base import EndpointError
        from ..lm.openai import check_base_url

        try:
            check_base_url(settings.base_url)
        except EndpointError as exc:
            raise JobInputError(redact(exc.cause)) from None
    return name


def check_prompt_dir(prompt_dir: str) -> None:
    """Every override in `--prompt-dir` is read and parsed before any model call (exit 2 on a
    missing directory, an unreadable or non-UTF-8 file, a template without a `## user` section,
    or a file that overrides no packaged prompt, which is almost always a misspelt name)."""
    from ..method.prompting import PromptError, packaged_prompt_names, parse_prompt_file
    from ..textio import InputError

    d = Path(prompt_dir)
    if not d.is_dir():
        raise JobInputError(f"prompt directory {prompt_dir} is not a directory")
    known = set(packaged_prompt_names())
    for f in sorted(d.glob("*.md")):
        if f.stem not in known:
            raise JobInputError(
                f"prompt override {f} matches no prompt (known: {', '.join(sorted(known))}); "
                "rename or remove it"
            )
        try:
            parse_prompt_file(f)
        except (InputError, PromptError) as exc:
            raise JobInputError(str(exc)) from None


def same_file(a: Path, b: Path) -> bool:
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
    out: Path | None,
    html: Path | None,
    inputs: Sequence[tuple[str, str]],
    *,
    create: bool = True,
) -> None:
    """Refuse (`JobInputError`, before any model call) outputs that would overwrite an input,
    collide with each other, are directories, or cannot be written (`check_output_files` for
    `--out` and `--html`).

    A missing parent directory of `--out`/`--html` is created here, up front (so a typo in a
    directory name costs nothing but an empty directory, and an unwritable place is found before
    the run, not after it). `create=False` (dry run) checks without creating anything.
    """
    outs = ([("--out", out)] if out is not None else []) + (
        [("--html", html)] if html is not None else []
    )
    check_output_files(outs, inputs, create=create)


def check_output_files(
    outs: Sequence[tuple[str, Path]],
    inputs: Sequence[tuple[str, str]],
    *,
    create: bool = True,
) -> None:
    """`check_outputs` for any (label, path) outputs, e.g. a batch's reports and summary files:
    none is an input or a directory, no two are the same file, and each one's directory exists
    (created when missing and `create`; else the nearest existing directory above it must take
    it) and can be written. Raises `JobInputError` naming the first problem by its label."""
    for flag, path in outs:
        for what, given in inputs:
            if same_file(path, Path(given)):
                raise JobInputError(f"{flag} {path} is the {what}; an input is never overwritten")
        if path.is_dir():
            raise JobInputError(f"{flag} {path} is a directory; give a file name")
    for i, (flag, path) in enumerate(outs):
        for other, other_path in outs[i + 1 :]:
            if same_file(path, other_path):
                raise JobInputError(
                    f"{flag} and {other} are the same file ({path}); give them different names"
                )
    for flag, path in outs:
        parent = path.parent
        # Every ancestor, not only the parent: `a/b/out.json` where `a` is a regular file
        # would fail in mkdir below with a less clear message.
        blocker = next((d for d in (parent, *parent.parents) if d.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise JobInputError(f"{flag} {path}: {blocker} is not a directory")
        where = parent
        if not parent.exists():
            if not create:
                if blocker is None:
                    continue
                where = blocker  # nothing is created: the directory to create it in is tried
            else:
                try:
                    parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise JobInputError(
                        f"{flag} {path}: cannot create the directory {parent}: "
                        f"{exc.strerror or exc}"
                    ) from None
        # Really try: os.access is wrong on read-only mounts, ACLs and for root.
        try:
            fd, probe = tempfile.mkstemp(dir=where, prefix=".veritrail-probe.")
        except OSError as exc:
            raise JobInputError(
                f"{flag} {path}: cannot write in {where}: {exc.strerror or exc}"
            ) from None
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)


def run_dir_files(
    run_dir: Path, *, dag_in_memory: bool = False, new_run: bool = True
) -> list[Path]:
    """The files the run writes in `run_dir` (`RUN_DIR_FILES`; `DAG_FILE` when the run's DAG
    was given in memory: only then is `dag.json` the run's own file). `new_run=False` (`resume`
    of an existing run): `claims.json` is only read, never written again."""
    names = [*RUN_DIR_FILES, *([DAG_FILE] if dag_in_memory else [])]
    if not new_run:
        names.remove(CLAIMS_FILE)
    return [run_dir / n for n in names]


def check_run_dir(
    run_dir: Path,
    inputs: Sequence[tuple[str, str]],
    outs: Sequence[tuple[str, Path]] = (),
    *,
    dag_in_memory: bool = False,
    new_run: bool = True,
    label: str = "--run-dir",
) -> None:
    """Refuse (`JobInputError`, before any model call) a run directory whose own files
    (`run_dir_files`) include an input the user gave — `--run-dir .` beside a DAG named
    `report.json`, or a claims file named `claims.json`, would be overwritten by the run — and
    outputs (`outs`, (label, path)) that are one of them; `--out` may be the run's own
    `report.json` (the same report is written there)."""
    own = run_dir_files(run_dir, dag_in_memory=dag_in_memory, new_run=new_run)
    for f in own:
        for what, given in inputs:
            if same_file(f, Path(given)):
                raise JobInputError(
                    f"{label} {run_dir}: the run writes its {f.name} there, and {given} is the "
                    f"{what}; an input is never overwritten: give another run directory or "
                    "rename the file"
                )
    for flag, path in outs:
        for f in own:
            if flag == "--out" and f.name == REPORT_FILE:
                continue
            if same_file(path, f):
                raise JobInputError(
                    f"{flag} {path} is the run's own {f.name} in {run_dir}; give another name"
                )


def _input_paths(
    dag_path: str | None,
    claims_path: str | None,
    oracle_path: str | None,
    config_file: Path | None,
    settings: Settings,
    extra: Sequence[tuple[str, str]] = (),
) -> tuple[tuple[str, str], ...]:
    named = [
        ("input DAG", dag_path),
        ("claims file", claims_path),
        ("oracle file", oracle_path),
        ("config file", str(config_file) if config_file is not None else None),
        ("price file", settings.prices),
        *extra,
    ]
    return tuple((what, p) for what, p in named if p)


def prepare_job(
    *,
    dag_path: str | None = None,
    dag: InMemoryDag | None = None,
    claims_path: str | None = None,
    claims: Sequence[Claim] | None = None,
    oracle_path: str | None,
    settings: Settings,
    run_dir: str | Path | None,
    out_path: str | Path | None,
    html: str | None,
    config_file: Path | None = None,
    create_dirs: bool = True,
    extra_inputs: Sequence[tuple[str, str]] = (),
) -> Job:
    """Load and check the inputs and outputs of a run; raises `JobInputError` on bad input,
    before any model call.

    The DAG is a file (`dag_path`) or built in memory (`dag`); the claims a file
    (`claims_path`), a list (`claims`), or neither (extracted by the run). `extra_inputs` are
    further (what, path) input files an output must not overwrite (the answer and sources of
    `veritrail check`).
    """
    if (dag_path is None) == (dag is None):
        raise JobInputError("give exactly one of a DAG file or an in-memory DAG")
    inputs = _input_paths(dag_path, claims_path, oracle_path, config_file, settings, extra_inputs)
    out = Path(out_path) if out_path is not None else None
    html_path = html_target(html, out)
    # Outputs first: a refused --out costs no DAG parse.
    check_outputs(out, html_path, inputs, create=create_dirs)
    dag_bytes: bytes | None = None
    if dag_path is not None:
        the_dag = load_job_dag(dag_path)
        dag_sha = file_sha256(dag_path)
        name_for_dir = dag_path
    else:
        assert dag is not None
        the_dag = dag.dag
        dag_bytes = dag.to_bytes()
        dag_sha = hashlib.sha256(dag_bytes).hexdigest()
        name_for_dir = dag.name
    the_claims: list[Claim] | None = list(claims) if claims is not None else None
    if claims_path is not None:
        try:
            the_claims = load_claims(claims_path)
        except ClaimsFileError as exc:
            raise JobInputError(str(exc)) from None
        if not the_claims:
            raise JobInputError(f"{claims_path}: no claims to verify")
    elif the_claims is not None and not the_claims:
        raise JobInputError("no claims to verify (an empty list was given)")
    elif the_claims is None and oracle_path is not None:
        raise JobInputError("--oracle needs --claims (the oracle answers for the claims it lists)")
    if oracle_path is not None and not Path(oracle_path).is_file():
        raise JobInputError(f"oracle file {oracle_path} not found")
    check_oracle_alone(settings, oracle_path is not None)
    name = model_name(settings, oracle_path)
    if settings.prompt_dir:
        check_prompt_dir(settings.prompt_dir)
    fp = run_fingerprint(
        dag_sha256=dag_sha,
        claims=the_claims,
        model=name,
        config=result_config(settings, oracle_path),
    )
    rdir = Path(run_dir) if run_dir else default_run_dir(settings.runs_dir, name_for_dir, fp)
    outs = [(f, p) for f, p in (("--out", out), ("--html", html_path)) if p is not None]
    check_run_dir(rdir, inputs, outs, dag_in_memory=dag_bytes is not None)
    return Job(
        dag=the_dag,
        dag_path=dag_path if dag_path is not None else str(rdir / DAG_FILE),
        dag_sha256=dag_sha,
        claims=the_claims,
        claims_path=claims_path,
        oracle_path=oracle_path,
        settings=settings,
        model_name=name,
        fingerprint=fp,
        run_dir=rdir,
        out_path=out,
        html_path=html_path,
        inputs=inputs,
        dag_bytes=dag_bytes,
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
        raise JobInputError(str(exc)) from None
    info = store.info
    dag_path = info.dag_path
    if not Path(dag_path).is_file():
        raise JobInputError(f"the run's DAG file {dag_path} is gone")
    dag_sha = file_sha256(dag_path)
    if dag_sha != info.dag_sha256:
        raise JobInputError(
            f"the run's DAG file {dag_path} changed since the run started (content hash differs)"
        )
    known = {k: v for k, v in info.config.items() if k in SETTING_NAMES}
    known.update(overrides or {})
    try:
        settings = Settings(**known)
    except (TypeError, ValueError) as exc:
        raise JobInputError(f"{run_dir}: unreadable settings in {RUN_FILE}: {exc}") from None
    stored_url = settings.base_url
    if stored_url and MASK + "@" in stored_url and not (overrides or {}).get("base_url"):
        # run.json keeps the base URL without its user and password; they are needed again.
        raise JobInputError(
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
        raise JobInputError(
            f"{run_dir}: the run's inputs changed (oracle file or settings no longer match "
            "run.json); start a new run instead"
        )
    out = Path(out_path or info.extra.get("out_path") or Path(run_dir) / "report.json")
    stored_html = info.extra.get("html_path")
    html_path = html_target(html, out) or (Path(stored_html) if stored_html else None)
    inputs = _input_paths(dag_path, info.claims_path, oracle_path, None, settings)
    outs = [(f, p) for f, p in (("--out", out), ("--html", html_path)) if p is not None]
    # A run made before this check may keep its DAG among the files finishing it writes.
    check_run_dir(Path(run_dir), inputs, outs, new_run=False, label="the run directory")
    check_outputs(out, html_path, inputs)
    # The report names the DAG as the original command did, so a resumed report equals an
    # uninterrupted one.
    return Job(
        dag=load_job_dag(dag_path),
        dag_path=str(info.extra.get("dag_path_given") or dag_path),
        dag_sha256=dag_sha,
        claims=claims,
        claims_path=info.claims_path,
        oracle_path=oracle_path,
        settings=settings,
        model_name=info.model,
        fingerprint=info.fingerprint,
        run_dir=Path(run_dir),
        out_path=out,
        html_path=html_path,
        inputs=inputs,
    )


# -- running ------------------------------------------------------------------------------------


class RunState:
    """What an interrupt handler and the end-of-run summary need to know about a run."""

    def __init__(self) -> None:
        self.store: RunStore | None = None
        self.fatal: str | None = None
        """The fatal endpoint error that stopped the run (redacted), if one did."""
        self.report_file: Path | None = None
        """The run directory's copy of the final report, as `run_job` wrote it."""
        self.config: VerifyConfig | None = None
        """The run's one `VerifyConfig` (settings fitted to the model's context window), built
        by `run_job` before any claim starts; the partial and the final report record it."""
        self.interruption: Interruption | None = None
        """What `run_to_report` recorded when the run was interrupted (None: not interrupted, or
        interrupted before any claim started)."""


def build_model(job: Job) -> Model:
    """The job's model, as the settings describe it (cache, concurrency, endpoint, prices)."""
    from ..lm.registry import get_model

    s = job.settings
    cache = model_cache(s.cache)
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


ORACLE_ALONE = "it cannot be combined with --decomposer, --selector or --judge"


def step_specs(settings: Settings) -> dict[str, str]:
    """The plugged steps of `settings`: kind -> spec, for the kinds given (`decomposer`,
    `selector`, `judge`; from flags, `VERITRAIL_*`, the config file or a manifest line)."""
    given = {
        "decomposer": settings.decomposer,
        "selector": settings.selector,
        "judge": settings.judge,
    }
    return {k: v for k, v in given.items() if v}


def check_oracle_alone(
    settings: Settings, oracle: bool, *, name: str = "--oracle", steps: str = ORACLE_ALONE
) -> None:
    """An oracle answers every step, so a plugged step beside it is a usage conflict
    (`JobInputError`, exit 2): `verify` and `batch` refuse it alike. `name` names the oracle
    and `steps` the plugged steps in the message (`verify`'s flags, a manifest's settings)."""
    plugged = step_specs(settings)
    if oracle and plugged:
        given = ", ".join(f"{k} {v}" for k, v in plugged.items())
        raise JobInputError(f"{name} answers every step: {steps} ({given})")


def build_steps(
    model: Model | None,
    plugins: Mapping[str, str],
    *,
    sample_temperature: float,
    oracle: Steps | None = None,
) -> Steps:
    """The steps a run verifies with: `oracle`'s when given (no plugged step may go with it),
    else the LM steps over `model` with the steps `plugins` names (kind -> spec) in their place,
    each checked while it runs (`plugins.plugged_steps`).

    The one place steps are built for a run: `veritrail verify` and `resume` (`run_job`) and
    both executors of `veritrail batch` (the local one and each Ray shard), so a plugged step is
    applied wherever a claim is verified. Raises `JobInputError` (exit 2), before any model
    call, for a spec that cannot be loaded.
    """
    if oracle is not None:
        if plugins:
            raise JobInputError(f"an oracle answers every step: {ORACLE_ALONE}")
        return oracle
    from ..method.loop import lm_steps

    if model is None:
        raise JobInputError("the LM steps need a model (none is configured)")
    steps = lm_steps(model, sample_temperature=sample_temperature)
    if plugins:
        from .plugins import plugged_steps

        try:  # before any model call: a bad spec is exit 2 with its reason
            steps = plugged_steps(steps, plugins, model=model)
        except ValueError as exc:
            raise JobInputError(redact(str(exc))) from None
    return steps


def _steps(job: Job, model: Model | None) -> Steps:
    oracle: Steps | None = None
    if job.oracle_path is not None:
        from ..method.oracle import Oracle, OracleError

        check_oracle_alone(job.settings, True)
        try:
            oracle = Oracle.from_file(job.oracle_path).steps()
        except OracleError as exc:
            raise JobInputError(str(exc)) from None
    return build_steps(
        model,
        step_specs(job.settings),
        sample_temperature=job.settings.sample_temperature,
        oracle=oracle,
    )


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


def _write_dag_copy(job: Job) -> None:
    """Keep a DAG given in memory in the run directory (`veritrail resume` reads it there)."""
    if job.dag_bytes is None:
        return
    p = Path(job.dag_path)
    if p.is_file() and p.read_bytes() == job.dag_bytes:
        return
    atomic_write_text(p, job.dag_bytes.decode("utf-8"))


async def _open_store(
    job: Job, model: Model | None, progress: ProgressReporter, state: RunState
) -> RunStore:
    extra: dict[str, Any] = {
        "oracle_path": str(Path(job.oracle_path).resolve()) if job.oracle_path else None,
        "claims_given": job.claims is not None,
        "dag_path_given": job.dag_path,
        "out_path": str(job.out_path.resolve()) if job.out_path is not None else None,
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
        _write_dag_copy(job)
        if claims is None:
            assert model is not None
            progress.extracting()
            claims, kept = await extract_claims(model, job.dag, job.settings.question)
            extra.update(kept)
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


async def extract_claims(
    model: Model, dag: Dag, question: str | None
) -> tuple[list[Claim], dict[str, Any]]:
    """The claims of `dag`'s final output, and what run.json keeps about their extraction:
    `extraction_cost` (the calls made outside any claim) and `extraction_issues` (unreadable
    replies met while extracting a claim head that claim's issues, so a resumed run still
    reports them). Shared by `veritrail verify` and `veritrail batch`; raises `ProviderError`."""
    from ..method.extraction import LMClaimSource

    source = LMClaimSource(model, question=question)
    claims = await source.claims_for(dag.node(dag.terminal).text)
    kept: dict[str, Any] = {"extraction_cost": _cost_dict(model.usage.for_claim(None).values())}
    if source.last is not None:
        kept["extraction_issues"] = {
            cid: [i.to_json() for i in got] for cid, got in source.last.issues_by_claim().items()
        }
    return claims, kept


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
    state: RunState,
) -> None:
    """Verify the claims not finished yet (never run, or ended in error last time).

    `loop.verify_claims` schedules them: a claim counts as in flight from the moment it starts
    (so progress shows a claim whose call is being retried), and once the endpoint has failed
    fatally (`Model.fatal`: bad key, unknown model) no further claim is started; those are
    recorded as errors naming the cause and verified again by the next run.
    """
    from ..method.loop import verify_claims
    from ..method.segment import SentenceIndex
    from ..records import SelectionIssue
    from .gcpolicy import engine_gc

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
    with engine_gc():
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
            claim_issues={
                cid: [SelectionIssue.from_json(i) for i in items] for cid, items in stored.items()
            },
        )


async def run_job(
    job: Job,
    progress: ProgressReporter,
    state: RunState,
    *,
    handle_sigterm: bool = True,
) -> dict[str, Any]:
    """Run (or finish) the job and return the report; the model is closed at the end.

    Raises `JobInputError` (unreadable oracle, unknown provider option, a run directory that
    holds another run or is locked by another process) and `ClaimExtractionError`; Ctrl-C and
    SIGTERM (`handle_sigterm`: the CLI's, not an embedding program's) surface as
    `KeyboardInterrupt`/`asyncio.CancelledError` with every finished claim saved
    (`record_interruption`).
    """
    from ..method.prompting import set_prompt_dir

    if job.settings.prompt_dir:
        set_prompt_dir(job.settings.prompt_dir)
    from ..method.config import fit_to_context, model_context_window

    config = job.settings.verify_config()
    try:
        model = None if job.oracle_path else build_model(job)
    except ValueError as exc:  # an unknown provider, or an option it does not take
        raise JobInputError(str(exc)) from None
    if model is not None:
        config = fit_to_context(config, model_context_window(model.provider))
    # Built once: the partial report (`record_interruption`) and the final one record this object.
    state.config = config
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    if handle_sigterm:
        _cancel_on_sigterm()
    ticker = asyncio.create_task(progress.ticker())
    try:
        if model is not None:
            model.on_call = progress.call
        steps = _steps(job, model)  # reads the oracle file: fail before touching the run dir
        try:
            store = await _open_store(job, model, progress, state)
        except RunStoreError as exc:
            raise JobInputError(redact(str(exc))) from None
        except ProviderError as exc:
            # Claim-level failures are recorded per claim; this is one outside any claim (claim
            # extraction): no claim can be verified without it.
            raise ClaimExtractionError(
                "claims could not be extracted: "
                + describe_fatal(exc, job.settings.base_url)
                + ". Fix the endpoint and run the same command again."
            ) from None
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
            # The gate this run applied, so that a loaded report's exit_code is the run's.
            "max_unsupported": job.settings.max_unsupported,
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
        state.report_file = store.write_report(report)
        errored = report["summary"]["verdicts"].get("error", 0)
        store.set_status(Status.INCOMPLETE if errored else Status.COMPLETE)
        return report
    finally:
        ticker.cancel()
        if model is not None:
            await model.aclose()


def write_partial_report(job: Job, store: RunStore, config: VerifyConfig) -> Path | None:
    """The report of the claims finished so far, in the run directory (for a look meanwhile);
    `config` is the run's (`RunState.config`), so it equals the final report's."""
    results = store.results_in_order()
    if not results:
        return None
    report = build_report(
        results,
        job.dag,
        model=job.model_name,
        config=dataclasses.asdict(config),
        run={"partial": True, "claims_total": len(store.claims)},
        dag_path=job.dag_path,
    )
    path = job.run_dir / PARTIAL_REPORT
    write_report(report, path)
    return path


@dataclass(frozen=True, slots=True)
class Interruption:
    """Where an interrupted run stands (all of it is saved in the run directory)."""

    done: int
    total: int
    partial_report: Path | None


def record_interruption(job: Job, state: RunState) -> Interruption | None:
    """Mark an interrupted run as such and write its partial report; None when it was
    interrupted before any claim was started (nothing to record)."""
    store = state.store
    if store is None:
        return None
    store.set_status(Status.INTERRUPTED)
    # The store opens after the config is built, so a run with a store always has it.
    config = state.config if state.config is not None else job.settings.verify_config()
    return Interruption(
        len(store.done), len(store.claims), write_partial_report(job, store, config)
    )


def write_outputs(job: Job, report: Mapping[str, Any], *, written: Path | None = None) -> None:
    """Write the job's JSON report (`--out`) and HTML report (`--html`), when it has them.

    `written`: a file already holding exactly `report` as `write_report` writes it (the run
    directory's copy, `RunState.report_file`, when the report was not changed since): its bytes
    are copied rather than the report encoded a second time (indented JSON goes through Python's
    pure-Python encoder: seconds for a long trail's report)."""
    if job.out_path is not None:
        if written is not None and written.is_file():
            atomic_write_text(job.out_path, written.read_text(encoding="utf-8"))
        else:
            write_report(report, job.out_path)
    if job.html_path is not None:
        from ..html import write_html

        write_html(report, job.html_path)


def exit_code(report: Mapping[str, Any], max_unsupported: float | None) -> ExitCode:
    """The run's exit status from its report: 3 when a claim ended in error (wins), else 1 when
    the share of Not Fully Supported claims is above `max_unsupported`, else 0."""
    from .progress import gate_failures

    if report["summary"]["verdicts"].get("error", 0):
        return ExitCode.ERRORS
    if gate_failures(report, max_unsupported) is not None:
        return ExitCode.GATE
    return ExitCode.OK


async def run_to_report(
    job: Job, progress: ProgressReporter, state: RunState, *, handle_sigterm: bool = True
) -> dict[str, Any]:
    """Run the job (`run_job`) and return its final report: the one way the CLI and the API run.

    On Ctrl-C, SIGTERM or cancellation the run is recorded as interrupted (status and partial
    report, `state.interruption`) and the interruption propagates; either way the run
    directory's lock is released before returning, not at process exit, so an embedding process
    (tests, a notebook) can run the same directory again.
    """
    try:
        return await run_job(job, progress, state, handle_sigterm=handle_sigterm)
    except (KeyboardInterrupt, asyncio.CancelledError):
        state.interruption = record_interruption(job, state)
        raise
    finally:
        if state.store is not None:
            state.store.unlock()
