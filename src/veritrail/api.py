"""The one-call Python API: `verify`, `check` and their async twins `averify`, `acheck`.

They run the same job as `veritrail verify` / `veritrail check` (`veritrail.run.job`): the same
settings (arguments, then `VERITRAIL_*` environment variables, then `./veritrail.toml` or
`config=`, then defaults), the same model cache, the same report, and a `Report` whose
`exit_code` is the CLI's. Differences, all deliberate (docs/api.md):

* the run store is opt-in: without `run_dir=` the run uses a temporary directory that is removed
  afterwards (a second identical call is still answered from the model cache); with `run_dir=`
  finished claims are kept there and an interrupted call resumes where it stopped;
* nothing is printed (`progress=True` shows the CLI's progress on stderr), nothing exits: bad
  input raises `JobInputError` (a `ValueError`; an argument of the wrong type, None included,
  raises its subclass `ArgumentTypeError`, also a `TypeError`), a model failure outside any claim
  raises `ClaimExtractionError`; claims that could not be verified are in `Report.errors` with
  `Report.exit_code == 3`;
* the garbage collector is left alone (the CLI freezes it after loading a DAG) and SIGTERM is not
  taken over.

`verify` and `check` are synchronous: they run their own event loop. Called where an event loop
is already running (Jupyter, an async web handler), they run it in a worker thread and block
until it is done; in async code prefer `await averify(...)` / `await acheck(...)`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import tempfile
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from .dag import Dag, DagValidationError
from .method.claims import ClaimsFileError, claim_to_json, parse_claims
from .records import Claim
from .redaction import redact, redact_obj
from .results import Report
from .run.job import (
    InMemoryDag,
    JobInputError,
    job_settings,
    prepare_job,
    run_and_write,
)
from .run.settings import Settings, SettingsError, coerce_setting, find_config_file
from .run.sources import SourceText, read_named, single_step_dag

PathLike = str | os.PathLike[str]
DagLike = PathLike | Dag | Mapping[str, Any]
ClaimsLike = PathLike | Sequence[str | Claim | Mapping[str, Any]]
SourcesLike = PathLike | Mapping[str, str] | Sequence[PathLike]

_T = TypeVar("_T")
_P = ParamSpec("_P")


# -- inputs -------------------------------------------------------------------------------------


class ArgumentTypeError(JobInputError, TypeError):
    """An argument of `verify` / `check` (or their async twins) of a type it does not take,
    None where a value is needed included: bad input (exit status 2, like every
    `JobInputError`), and a `TypeError` too, which is what Python code expects for a wrong type.
    The message names the function, the argument and what it takes."""


def _is_path(v: object) -> bool:
    # A path is a str or an os.PathLike of str (a PathLike of bytes is not a file name we use).
    return isinstance(v, str) or (isinstance(v, os.PathLike) and isinstance(os.fspath(v), str))


def _is_list(v: object) -> bool:
    # Positional naming (source1, source2, ...; c1, c2, ...) needs an order, and a generator
    # would be used up by the first reading: a list or tuple, never a set, a str or bytes.
    return isinstance(v, Sequence) and not isinstance(v, str | bytes | bytearray)


def _kind(v: object) -> str:
    return "None" if v is None else type(v).__name__


_PATH = "a path (str or os.PathLike)"
_ANSWER = "the answer's text (str) or a pathlib.Path of a file holding it"
_SOURCES = "a text (str), a pathlib.Path, a list of texts and/or Paths, or a dict {name: text}"
_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "dag": (
        lambda v: _is_path(v) or isinstance(v, Dag | Mapping),
        'a DAG file path, a veritrail.Dag or a dict with "nodes"',
    ),
    "claims": (
        lambda v: v is None or _is_path(v) or _is_list(v),
        "None (extract them), a claims file path, or a list of claim texts, Claims or dicts",
    ),
    "answer": (_is_path, _ANSWER),
    "sources": (lambda v: _is_path(v) or isinstance(v, Mapping) or _is_list(v), _SOURCES),
    "chunk_sentences": (
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
        "None or an int",
    ),
    "progress": (lambda v: isinstance(v, bool), "True or False"),
    **{
        name: ((lambda v: v is None or _is_path(v)), f"None or {_PATH}")
        for name in ("oracle", "out", "html", "run_dir", "config")
    },
}
_RULES["chunk_tokens"] = _RULES["chunk_sentences"]


def _check_arguments(fn: str, args: Mapping[str, Any], settings: Mapping[str, Any]) -> None:
    """Every argument of `fn` checked before anything is read or run: `ArgumentTypeError`
    naming the argument for a wrong type (None included), `JobInputError` for a setting that
    `veritrail verify` would refuse. Without this, None or an int reached `os.fspath` or a
    comparison (TypeError, AttributeError) and `check(sources=[None])` verified the text "None".
    """
    for name, value in args.items():
        ok, wanted = _RULES[name]
        if not ok(value):
            raise ArgumentTypeError(f"{fn}(): {name} must be {wanted}, not {_kind(value)}")
    sources = args.get("sources")
    if isinstance(sources, Mapping):
        for key, text in sources.items():
            if not isinstance(key, str):
                raise ArgumentTypeError(
                    f"{fn}(): the names of sources (the dict's keys) must be str, not {_kind(key)}"
                )
            if not isinstance(text, str):
                raise ArgumentTypeError(
                    f"{fn}(): sources[{key!r}] must be a text (str), not {_kind(text)}"
                )
    elif sources is not None and _is_list(sources):
        for i, item in enumerate(sources):
            if not _is_path(item):
                raise ArgumentTypeError(
                    f"{fn}(): sources[{i}] must be a text (str) or a pathlib.Path, "
                    f"not {_kind(item)}"
                )
    # Settings (model=, q=, **settings) are checked here too, so the message names the call,
    # not a command-line option: `veritrail verify` checks the same values as flags.
    for name, value in settings.items():
        if value is None:
            continue  # None = not given (docs/api.md)
        try:
            coerce_setting(name, value, f"{fn}()")
        except SettingsError as exc:
            raise JobInputError(redact(str(exc))) from None


def _fs(path: PathLike | None) -> str | None:
    return os.fspath(path) if path is not None else None


def _settings(config: PathLike | None, given: Mapping[str, Any]) -> Settings:
    """The four layers of docs/running.md, arguments playing the flags' part (None = not given):
    the CLI's `job_settings`."""
    return job_settings(given, config_path=_fs(config))


def _redacted(dag: Dag) -> Dag:
    """`dag` with secrets in its texts and meta written as `***` (`redaction.redact_obj`), as
    `veritrail check` does with its sources: the run directory keeps a copy of an in-memory DAG
    (`dag.json`), and that copy must be what was verified, so the model is sent the redacted
    texts too. The same DAG when it holds no secret."""
    records = dag.to_records()
    clean = redact_obj(records)
    meta = redact_obj(dag.meta) if dag.meta else dag.meta
    if clean == records and meta == dag.meta:
        return dag
    return Dag.from_records(clean, meta=dict(meta) if meta else None)


def _dag_input(dag: DagLike) -> tuple[str | None, InMemoryDag | None]:
    if isinstance(dag, Dag):
        return None, InMemoryDag(_redacted(dag))
    if isinstance(dag, Mapping):
        nodes = dag.get("nodes")
        if not isinstance(nodes, list):
            raise JobInputError('a DAG given as a dict needs a "nodes" list')
        meta = dag.get("meta")
        try:
            built = Dag.from_records(nodes, meta=dict(meta) if isinstance(meta, Mapping) else None)
        except DagValidationError as exc:
            raise JobInputError(str(exc)) from None
        return None, InMemoryDag(_redacted(built))
    return os.fspath(dag), None


def _claims_input(claims: ClaimsLike | None) -> tuple[str | None, list[Claim] | None]:
    if claims is None:
        return None, None
    if isinstance(claims, str | os.PathLike):
        return os.fspath(claims), None
    items: list[Any] = []
    for c in claims:
        if isinstance(c, Claim):
            items.append(claim_to_json(c))
        else:
            items.append(dict(c) if isinstance(c, Mapping) else c)
    try:
        return None, parse_claims(items, origin="claims")
    except ClaimsFileError as exc:
        raise JobInputError(str(exc)) from None


def _source_texts(sources: SourcesLike) -> tuple[list[SourceText], list[tuple[str, str]]]:
    """Sources as (name, text), and the files among them (outputs must not overwrite them)."""
    if isinstance(sources, Mapping):
        return [SourceText(str(k), str(v)) for k, v in sources.items()], []
    if isinstance(sources, str):
        return [SourceText("source1", sources)], []  # a str is a text; a file is a Path
    items: Sequence[PathLike] = [sources] if isinstance(sources, os.PathLike) else sources
    out: list[SourceText] = []
    files: list[tuple[str, str]] = []
    for i, s in enumerate(items, 1):
        if isinstance(s, os.PathLike):
            out.append(read_named(os.fspath(s), "source file"))
            files.append(("source file", os.fspath(s)))
        else:
            out.append(SourceText(f"source{i}", str(s)))
    return out, files


# -- running ------------------------------------------------------------------------------------


def _run_arguments(
    claims: Any, oracle: Any, out: Any, html: Any, run_dir: Any, config: Any, progress: Any
) -> dict[str, Any]:
    """The arguments `averify` and `acheck` share, by name, in the order they are checked
    (`_check_arguments`) and as `_arun` takes them."""
    return {
        "claims": claims,
        "oracle": oracle,
        "out": out,
        "html": html,
        "run_dir": run_dir,
        "config": config,
        "progress": progress,
    }


async def _arun(
    settings: Settings,
    *,
    dag_path: str | None = None,
    dag: InMemoryDag | None = None,
    extra_inputs: Sequence[tuple[str, str]] = (),
    claims: ClaimsLike | None,
    oracle: PathLike | None,
    out: PathLike | None,
    html: PathLike | None,
    run_dir: PathLike | None,
    config: PathLike | None,
    progress: bool,
) -> Report:
    """Prepare and run the job of `averify` / `acheck`; a temporary run directory (removed
    afterwards) unless `run_dir` is given."""
    from .run.progress import make_progress

    claims_path, claim_list = _claims_input(claims)
    keep = run_dir is not None
    tmp = None if keep else tempfile.TemporaryDirectory(prefix="veritrail-run-")
    try:
        job = prepare_job(
            dag_path=dag_path,
            dag=dag,
            claims_path=claims_path,
            claims=claim_list,
            oracle_path=_fs(oracle),
            settings=settings,
            run_dir=_fs(run_dir) if tmp is None else Path(tmp.name) / "run",
            out_path=_fs(out),
            html=_fs(html),
            config_file=find_config_file(_fs(config)),
            extra_inputs=extra_inputs,
        )
        reporter = make_progress(quiet=not progress, interval=job.settings.progress_interval)
        # Interrupted: finished claims stay in a kept run directory; run again to resume.
        done = await run_and_write(job, reporter, handle_sigterm=False, keep_run_dir=tmp is None)
        return Report(done.report, max_unsupported=job.settings.max_unsupported, path=job.out_path)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _blocking(afn: Callable[_P, Coroutine[Any, Any, _T]], name: str) -> Callable[_P, _T]:
    """The synchronous form of the coroutine function `afn` (same arguments, same docstring).

    It runs its own event loop; where a loop is running already (Jupyter, an async web
    handler) it runs in a worker thread with its own loop, and the caller blocks until done."""

    @functools.wraps(afn)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(afn(*args, **kwargs))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="veritrail") as pool:
            return pool.submit(lambda: asyncio.run(afn(*args, **kwargs))).result()

    call.__name__ = call.__qualname__ = name
    return call


# -- verify -------------------------------------------------------------------------------------


async def averify(
    dag: DagLike,
    claims: ClaimsLike | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    q: int | None = None,
    oracle: PathLike | None = None,
    out: PathLike | None = None,
    html: PathLike | None = None,
    run_dir: PathLike | None = None,
    config: PathLike | None = None,
    progress: bool = False,
    **settings: Any,
) -> Report:
    """Verify the claims of a DAG's final output; the Python form of `veritrail verify`.

    `verify(...)` is the synchronous call (it runs its own event loop), `await averify(...)` the
    same in async code; they take the same arguments and return the same `Report`.

    Args:
        dag: a DAG file, a `Dag`, or a dict with `"nodes"` (docs/dag-format.md).
        claims: a claims file, a list of claim texts, `Claim`s or claim dicts; None extracts the
            claims from the terminal node first (docs/extraction.md).
        model: `provider/model` (docs/models.md); None = `VERITRAIL_MODEL`, the TOML file, else
            the embedded local model.
        base_url: an OpenAI-compatible endpoint.
        q: consecutive Not Fully Supported verdicts that stop a claim (default 3).
        oracle: an oracle file answering every step instead of a model (needs `claims`).
        out, html: also write the JSON / HTML report there.
        run_dir: keep the run in this directory (resumable; a second identical call is served
            from it). Default: a temporary directory, removed afterwards.
        config: a TOML settings file (default `VERITRAIL_CONFIG`, else `./veritrail.toml`).
        progress: show the CLI's progress display on stderr.
        **settings: any other setting of docs/running.md by name (`concurrency=16`,
            `max_unsupported=0.1`, `cache="off"`, `question=...`).

    Returns a `Report`; claims that could not be verified are in `Report.errors` (and
    `Report.exit_code` is 3). Raises `JobInputError` (a `ValueError`) on bad input, before any
    model call: its subclass `ArgumentTypeError` (also a `TypeError`) when an argument has a
    type it does not take, None included, naming the argument. Raises `ClaimExtractionError`
    when claim extraction failed on the model.
    The model is closed before it returns.
    """
    given = {"model": model, "base_url": base_url, "q": q, **settings}
    run = _run_arguments(claims, oracle, out, html, run_dir, config, progress)
    _check_arguments("verify", {"dag": dag, **run}, given)
    s = _settings(config, given)
    dag_path, mem = _dag_input(dag)
    return await _arun(s, dag_path=dag_path, dag=mem, **run)


verify = _blocking(averify, "verify")


# -- check --------------------------------------------------------------------------------------


async def acheck(
    answer: PathLike,
    sources: SourcesLike,
    *,
    claims: ClaimsLike | None = None,
    question: str | None = None,
    chunk_sentences: int | None = None,
    chunk_tokens: int | None = None,
    model: str | None = None,
    base_url: str | None = None,
    q: int | None = None,
    oracle: PathLike | None = None,
    out: PathLike | None = None,
    html: PathLike | None = None,
    run_dir: PathLike | None = None,
    config: PathLike | None = None,
    progress: bool = False,
    **settings: Any,
) -> Report:
    """Check one answer against its sources; the Python form of `veritrail check`.

    `check(...)` is the synchronous call, `await acheck(...)` the same in async code.

    The sources become the root chunks of a two-stage DAG and the answer its terminal node
    (`veritrail.run.sources`: chunk ids `NAME#N`). A `str` is a text, a `pathlib.Path` a file:

    * `answer`: the answer's text, or a `Path` to read it from;
    * `sources`: one text, a `Path`, a list (or tuple) of texts and/or `Path`s (texts are named
      `source1`, `source2`, ... by position), or a dict `{name: text}` of str to str;
    * `chunk_sentences` (default 10) or `chunk_tokens`: the chunk size;
    * `question`: the question the answer answered (context for claim extraction);
    * `claims`: as in `verify` (None = extract them from the answer).

    Every other argument, the result and the errors are those of `verify`.
    """
    given = {"model": model, "base_url": base_url, "q": q, "question": question, **settings}
    run = _run_arguments(claims, oracle, out, html, run_dir, config, progress)
    _check_arguments(
        "check",
        {
            "answer": answer,
            "sources": sources,
            "claims": claims,
            "chunk_sentences": chunk_sentences,
            "chunk_tokens": chunk_tokens,
            **run,
        },
        given,
    )
    s = _settings(config, given)
    inputs: list[tuple[str, str]] = []
    if isinstance(answer, os.PathLike):
        answer_text = read_named(os.fspath(answer), "answer file").text
        inputs.append(("answer file", os.fspath(answer)))
    else:
        answer_text = answer
    texts, files = _source_texts(sources)
    inputs.extend(files)
    mem = single_step_dag(
        answer_text, texts, chunk_sentences=chunk_sentences, chunk_tokens=chunk_tokens
    )
    return await _arun(s, dag=mem, extra_inputs=inputs, **run)


check = _blocking(acheck, "check")


def trace_verifier(
    settings: Settings | None = None,
    *,
    config: PathLike | None = None,
    config_file: Path | None = None,
    **given: Any,
) -> Callable[[Dag, str], Coroutine[Any, Any, Any]]:
    """The verifier `veritrail.adapters.phoenix.watch` hands each trace's DAG to: the trace is
    verified as `veritrail verify` verifies a DAG (the same settings, model cache and a run
    directory under `runs_dir`, named after the trace), its claims extracted from its final
    output. Settings: a `Settings`, or keyword arguments as `verify` takes them (`model`,
    `base_url`, ...) over `config` and the environment. Bad input for one trace, decided
    before any model call, skips that trace (`TraceSkipped`). What `veritrail watch` uses::

        from veritrail.adapters.phoenix import WatchOptions, watch
        from veritrail.api import trace_verifier

        watch(WatchOptions("http://127.0.0.1:6006", "my-app", sample=0.25),
              trace_verifier(model="openai/gpt-4o-mini"))
    """
    from .adapters.phoenix.watch import TraceSkipped, VerifiedRun
    from .run.job import InMemoryDag, JobError, prepare_job, run_and_write
    from .run.progress import make_progress

    chosen = settings if settings is not None else _settings(config, given)
    cfg = config_file if config_file is not None else (Path(config) if config else None)

    async def verify(dag: Dag, name: str) -> VerifiedRun:
        try:
            job = prepare_job(
                dag=InMemoryDag(dag, name=name),
                oracle_path=None,
                settings=chosen,
                run_dir=None,
                out_path=None,
                html=None,
                config_file=cfg,
            )
        except JobError as exc:
            if exc.exit_code == 2:
                raise TraceSkipped(exc.message) from None
            raise
        done = await run_and_write(job, make_progress(quiet=True), handle_sigterm=False)
        return VerifiedRun(done.report, str(done.run_dir), int(done.exit_code), done.fatal)

    return verify


__all__ = ["ArgumentTypeError", "acheck", "averify", "check", "trace_verifier", "verify"]
