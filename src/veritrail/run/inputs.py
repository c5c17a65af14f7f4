"""A run's inputs and outputs, checked before any model call (`JobInputError`, exit 2): the
settings, the DAG, the claims, the oracle, the prompt directory, the output files and the run
directory; `prepare_job` turns them into a `Job`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dag import Dag, DagValidationError, load_dag
from ..method.claims import ClaimsFileError, load_claims
from ..records import Claim
from ..redaction import redact
from .build import check_oracle_alone
from .fingerprint import file_sha256, result_config, run_fingerprint
from .settings import (
    Settings,
    SettingsError,
    resolve_settings,
)
from .spec import DAG_FILE, HTML_BESIDE, RUN_DIR_FILES, InMemoryDag, Job, JobInputError
from .store import CLAIMS_FILE, LOCK_FILE, REPORT_FILE, RUN_FILE, default_run_dir

if TYPE_CHECKING:
    pass


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


def load_job_dag(dag_path: str, *, os_reason: bool = False) -> Dag:
    """Load and validate a DAG file (`JobInputError` naming every problem; `os_reason`: an
    unreadable file is named with the system's reason alone, as a batch's jobs word it).

    The DAG is moved out of the collector's view while claims are verified (and back after) by
    the run's collector policy, `gcpolicy.engine_gc`, for the CLI and the API alike.
    """
    try:
        dag = load_dag(dag_path)
    except DagValidationError as exc:
        raise JobInputError(str(exc)) from None
    except OSError as exc:
        raise JobInputError(f"{dag_path}: {(exc.strerror if os_reason else None) or exc}") from None
    return dag


def model_name(settings: Settings, oracle_path: str | None) -> str:
    """The run's `provider/model` ("oracle" with an oracle file), checked before any call."""
    if oracle_path is not None:
        return "oracle"
    from ..lm.registry import ModelNameError, resolve_name, split_name

    name = resolve_name(settings.model)
    try:
        split_name(name)
    except ModelNameError as exc:
        raise JobInputError(str(exc)) from None
    if settings.base_url:
        # A malformed endpoint is bad input, decided before any model call (exit 2), not a
        # failure of every claim, whatever the provider; `check_base_url` also names the
        # problem.
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


RUN_OWNED_FILES = (*RUN_DIR_FILES, DAG_FILE, "reviews.jsonl", "report.html")
"""Every file a run directory may hold (its own files, a DAG given in memory, people's reviews,
the HTML report `veritrail review` re-renders): no other output may be one of them."""


def check_not_run_files(run_dir: Path, outs: Sequence[tuple[str, Path]]) -> None:
    """Refuse (`JobInputError`) an output (a CI file) that is one of `run_dir`'s own files."""
    for flag, path in outs:
        for name in RUN_OWNED_FILES:
            if same_file(path, run_dir / name):
                raise JobInputError(
                    f"{flag} {path} is the run's own {name} in {run_dir}; give another name "
                    "(writing it there would break the run)"
                )


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
    started = (run_dir / RUN_FILE).exists() or (run_dir / LOCK_FILE).exists()
    if new_run and run_dir.is_dir() and not started:
        # Not a run directory: a file of the user's that the run would write over (an input
        # among them was refused above, with its own message). A directory holding the run's
        # lock file is one veritrail began (the lock is taken before any file is written), killed
        # before its run.json: it resumes.
        written = [f.name for f in own if f.name != LOCK_FILE]
        theirs = [n for n in written if (run_dir / n).exists()]
        if theirs:
            raise JobInputError(
                f"{label} {run_dir} is not a run directory (no {RUN_FILE}) and holds "
                f"{', '.join(theirs)}, which the run would overwrite; give a new or empty directory"
            )
    for flag, path in outs:
        for f in own:
            if flag == "--out" and f.name == REPORT_FILE:
                continue
            if same_file(path, f):
                raise JobInputError(
                    f"{flag} {path} is the run's own {f.name} in {run_dir}; give another name"
                )


def input_paths(
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


def load_job_claims(claims_path: str | Path) -> list[Claim]:
    """Load a claims file (`JobInputError` when it is unreadable or holds no claim)."""
    try:
        claims = load_claims(claims_path)
    except ClaimsFileError as exc:
        raise JobInputError(str(exc)) from None
    if not claims:
        raise JobInputError(f"{claims_path}: no claims to verify")
    return claims


def run_identity(
    dag_sha256: str,
    claims: Sequence[Claim] | None,
    model: str,
    settings: Settings,
    oracle_path: str | None,
    run_dir: str | Path | None,
    name_for_dir: str,
) -> tuple[str, Path]:
    """A run's fingerprint (what identifies its results) and its run directory (`run_dir`, or
    the default one under `settings.runs_dir`, named after `name_for_dir` and the fingerprint):
    as `veritrail verify` and a batch's jobs compute them."""
    fp = run_fingerprint(
        dag_sha256=dag_sha256,
        claims=claims,
        model=model,
        config=result_config(settings, oracle_path),
    )
    rdir = Path(run_dir) if run_dir else default_run_dir(settings.runs_dir, name_for_dir, fp)
    return fp, rdir


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
    inputs = input_paths(dag_path, claims_path, oracle_path, config_file, settings, extra_inputs)
    out = Path(out_path) if out_path is not None else None
    # `--html` with no file and no `--out`: report.html beside the run directory's report.json,
    # known once the run directory is (below).
    html_in_run_dir = html == HTML_BESIDE and out is None
    html_path = None if html_in_run_dir else html_target(html, out)
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
        the_claims = load_job_claims(claims_path)
    elif the_claims is not None and not the_claims:
        raise JobInputError("no claims to verify (an empty list was given)")
    elif the_claims is None and oracle_path is not None:
        raise JobInputError("--oracle needs --claims (the oracle answers for the claims it lists)")
    if oracle_path is not None and not Path(oracle_path).is_file():
        raise JobInputError(f"oracle file {oracle_path} not found")
    check_oracle_alone(settings, oracle_path is not None)
    name = model_name(settings, oracle_path)
    if create_dirs:
        # No key at all is bad input, said once up front (a dry run calls nothing: no check).
        from ..lm.registry import missing_key

        no_key = missing_key(name, settings.base_url)
        if no_key is not None:
            raise JobInputError(no_key)
    if create_dirs and name.startswith("local/"):
        # A core install has no embedded model: say so once, before any work (exit 2), rather
        # than let every claim fail with the same warning. A dry run calls nothing: no check.
        from ..lm.local_weights import missing_model

        missing = missing_model(name.removeprefix("local/"))
        if missing is not None:
            raise JobInputError(missing)
    if settings.prompt_dir:
        check_prompt_dir(settings.prompt_dir)
    fp, rdir = run_identity(dag_sha, the_claims, name, settings, oracle_path, run_dir, name_for_dir)
    if html_in_run_dir:
        html_path = rdir / "report.html"
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
