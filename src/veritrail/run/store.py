"""The durable run directory: a verification run survives `kill -9` and resumes where it stopped.

Layout of a run directory (documented in docs/running.md)::

    run.json        what the run is: inputs (paths and content hashes), model name, settings,
                    fingerprint, status. Never an API key (see `redact`).
    claims.json     the claims being verified, in order (so a resume needs no claim extraction).
    results.jsonl   one finished claim per line (`report.claim_to_dict`), appended, flushed and
                    fsync'ed the moment the claim finishes (`veritrail batch --executor ray`:
                    the claims that reach the driver together, with one fsync: `record_lines`).
    report.json     written when the run completes (also wherever `--out` points).

JSON Lines was chosen over SQLite because an append of one line plus `fsync` is atomic enough
for our needs (a torn last line from a kill mid-write is detected and discarded on load) and the
file stays readable with any text tool. The model cache (SQLite, `lm/cache.py`) is separate:
it is what makes the re-run of a claim that was in flight at the kill cost no model call.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import InputProblem
from ..method.claims import claim_from_json, claim_to_json
from ..records import Claim, ClaimResult, Termination
from ..redaction import known_secrets, redact_obj
from ..report import atomic_write_text, claim_from_dict, claim_to_dict, indented_json
from ..textio import fsync_dir

RUN_FORMAT = "veritrail-run"
RUN_VERSION = 1

RUN_FILE = "run.json"
CLAIMS_FILE = "claims.json"
RESULTS_FILE = "results.jsonl"
REPORT_FILE = "report.json"
LOCK_FILE = ".lock"

# Setting names whose values must never be written anywhere (matched case-insensitively, as
# substrings, so `openai_api_key`, `azure_api_key`, `Authorization` headers are all caught).
_SECRET_MARKERS = ("api_key", "apikey", "secret", "token_value", "password", "authorization")


class RunStoreError(InputProblem, RuntimeError):
    """The run directory cannot be used (belongs to another run, unreadable, wrong format)."""


class Status:
    """Values of run.json's `status` (strings so the file stays plain JSON)."""

    RUNNING = "running"
    INTERRUPTED = "interrupted"
    COMPLETE = "complete"
    """Ended, every claim with a verdict."""
    INCOMPLETE = "incomplete"
    """Ended, some claims in error: the next run (or `veritrail resume`) verifies them again."""


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `config` without secret-looking keys (at any depth)."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if any(m in k.lower() for m in _SECRET_MARKERS):
            continue
        out[k] = redact(v) if isinstance(v, Mapping) else v
    return out


def claims_to_json(claims: Sequence[Claim]) -> list[dict[str, Any]]:
    """Claims as stored in claims.json."""
    return [claim_to_json(c) for c in claims]


def result_line(result: ClaimResult) -> str:
    """One line of results.jsonl (without its newline): the claim as `report.claim_to_dict`,
    redacted (error texts and notes may quote a server's reply, which may echo a key), compact
    JSON. What `RunStore.record` writes and `RunStore.record_lines` takes."""
    doc = redact_obj(claim_to_dict(result))
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def claims_from_json(items: Iterable[Mapping[str, Any]]) -> list[Claim]:
    """Inverse of `claims_to_json`."""
    return [claim_from_json(d) for d in items]


def default_run_dir(root: str | Path, dag_path: str | Path, fingerprint: str) -> Path:
    """`<root>/<dag file stem>-<first 12 hex digits of the fingerprint>`."""
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in Path(dag_path).stem)
    return Path(root) / f"{stem[:40] or 'run'}-{fingerprint[:12]}"


def _write_json_atomic(path: Path, doc: Any) -> None:
    # The reports' atomic writer (a unique temporary name in the same directory, then
    # os.replace), plus an fsync of the directory so the rename itself is durable.
    atomic_write_text(path, indented_json(redact_obj(doc)))
    fsync_dir(path.parent)


def _acquire_lock(path: Path) -> IO[str] | None:
    """An exclusive, non-blocking `flock` on `path/.lock`; None where flock does not exist.

    Raises `RunStoreError` naming the holder's pid when another process holds it.
    """
    try:
        import fcntl
    except ImportError:  # not on POSIX: no protection against two writers
        return None
    try:
        fh = (path / LOCK_FILE).open("a+", encoding="utf-8")
    except OSError as exc:
        raise RunStoreError(f"{path}: cannot write the run's lock file: {exc}") from None
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip() or "?"
        fh.close()
        raise RunStoreError(
            f"{path} is being run by another veritrail process (pid {holder}); "
            "wait for it to finish or stop it first"
        ) from None
    fh.seek(0)
    fh.truncate()
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


class RunLock:
    """This process's exclusive hold on a run directory (see `lock_run_dir`)."""

    def __init__(self, path: Path, fh: IO[str] | None) -> None:
        self.path = path
        self.fh = fh

    def release(self) -> None:
        """Drop the lock (also dropped by the OS when the process ends, kill -9 included)."""
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def lock_run_dir(path: str | Path) -> RunLock:
    """Create the run directory if needed and lock it, before any file of the run is read or
    written. Of two runs of the same directory started at once, one gets the lock and the other
    gets `RunStoreError` ("being run by another veritrail process"); nobody waits."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise RunStoreError(f"{p} is not a directory; use another --run-dir")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunStoreError(f"cannot create the run directory {p}: {exc.strerror or exc}") from None
    return RunLock(p, _acquire_lock(p))


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The contents of run.json."""

    fingerprint: str
    dag_path: str
    dag_sha256: str
    model: str
    config: dict[str, Any]
    claims_path: str | None
    status: str
    created: float
    updated: float
    extra: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """run.json's document."""
        return {
            "format": RUN_FORMAT,
            "version": RUN_VERSION,
            "fingerprint": self.fingerprint,
            "inputs": {
                "dag": {"path": self.dag_path, "sha256": self.dag_sha256},
                "claims": {"path": self.claims_path},
            },
            "model": self.model,
            "config": redact(self.config),
            "status": self.status,
            "created": self.created,
            "updated": self.updated,
            "extra": redact(self.extra),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RunInfo:
        """Read run.json's document (format-checked by the caller)."""
        return cls(
            fingerprint=doc["fingerprint"],
            dag_path=doc["inputs"]["dag"]["path"],
            dag_sha256=doc["inputs"]["dag"]["sha256"],
            model=doc["model"],
            config=dict(doc.get("config", {})),
            claims_path=doc["inputs"].get("claims", {}).get("path"),
            status=doc.get("status", Status.RUNNING),
            created=float(doc.get("created", 0.0)),
            updated=float(doc.get("updated", 0.0)),
            extra=dict(doc.get("extra", {})),
        )


class RunStore:
    """One run directory. Open with `RunStore.create_or_open` or `RunStore.open`.

    Writers are expected to be one process at a time; `record` is safe to call from the event
    loop's callbacks (it is synchronous and short: one line, one fsync).
    """

    def __init__(self, path: Path, info: RunInfo, claims: list[Claim]) -> None:
        self.path = path
        self.info = info
        self.claims = claims
        self._done: dict[str, ClaimResult] = {}
        self._lock_fh: IO[str] | None = None
        self._load_results()

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def create_or_open(
        cls,
        path: str | Path,
        *,
        fingerprint: str,
        dag_path: str | Path,
        dag_sha256: str,
        model: str,
        config: Mapping[str, Any],
        claims: Sequence[Claim],
        claims_path: str | Path | None = None,
        extra: Mapping[str, Any] | None = None,
        lock: RunLock | None = None,
    ) -> RunStore:
        """Open the run at `path` if it is this run (same fingerprint), else create it there.
        The returned store holds the run's lock (`lock`, when the caller took it already with
        `lock_run_dir`, else taken here before any file is read or written).

        Raises `RunStoreError` when `path` holds a different run, so two configurations never mix
        their results in one directory, and when another process holds the lock.
        """
        p = Path(path)
        # The lock comes before any file of the run is read or written: of two identical runs
        # started at once, one gets it and the other stops with a message (exit 2) before it has
        # touched anything.
        held = lock if lock is not None else lock_run_dir(p)
        fh = held.fh
        try:
            if (p / RUN_FILE).exists():
                store = cls.open(p)
                if store.info.fingerprint != fingerprint:
                    raise RunStoreError(
                        f"{p} holds a different run (fingerprint {store.info.fingerprint[:12]}, "
                        f"this run is {fingerprint[:12]}: the DAG, claims, model or settings "
                        "differ). Use another --run-dir or delete that directory."
                    )
            else:
                now = time.time()
                info = RunInfo(
                    fingerprint=fingerprint,
                    dag_path=str(Path(dag_path).resolve()),
                    dag_sha256=dag_sha256,
                    model=model,
                    config=redact(config),
                    claims_path=(
                        str(Path(claims_path).resolve()) if claims_path is not None else None
                    ),
                    status=Status.RUNNING,
                    created=now,
                    updated=now,
                    extra=dict(extra or {}),
                )
                # claims.json first: a run.json without its claims would be unusable on resume.
                _write_json_atomic(p / CLAIMS_FILE, claims_to_json(claims))
                _write_json_atomic(p / RUN_FILE, info.to_json())
                store = cls(p, info, list(claims))
        except BaseException:
            held.release()
            raise
        store._lock_fh = fh
        held.fh = None  # now owned by the store (released by `unlock` or at exit)
        return store

    @classmethod
    def open(cls, path: str | Path) -> RunStore:
        """Open an existing run directory (for `veritrail resume`)."""
        p = Path(path)
        try:
            doc = json.loads((p / RUN_FILE).read_text(encoding="utf-8"))
            claims_doc = json.loads((p / CLAIMS_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise RunStoreError(f"{p} is not a run directory (missing {exc.filename})") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise RunStoreError(f"{p}: cannot read run files: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != RUN_FORMAT:
            raise RunStoreError(
                f'{p / RUN_FILE}: not a VeriTrail run (no "format": "{RUN_FORMAT}")'
            )
        if doc.get("version") != RUN_VERSION:
            raise RunStoreError(
                f"{p / RUN_FILE}: run format version {doc.get('version')!r}, "
                f"this veritrail reads {RUN_VERSION}"
            )
        return cls(p, RunInfo.from_json(doc), claims_from_json(claims_doc))

    # -- exclusive use -------------------------------------------------------------------------

    def lock(self) -> None:
        """Claim the run for this process; `RunStoreError` if another process is running it.

        An advisory `flock` on `.lock` in the run directory: the OS drops it when the process
        ends in any way (kill -9 included), so a stale lock never blocks a resume.
        `create_or_open` already takes it; calling this again is a no-op.
        """
        if self._lock_fh is None:
            self._lock_fh = _acquire_lock(self.path)
        # Whatever a previous holder appended before we got the lock is now final: reread it.
        self._done.clear()
        self._load_results()

    @property
    def locked(self) -> bool:
        """True while this process holds the run's lock."""
        return self._lock_fh is not None

    def unlock(self) -> None:
        """Release `lock` (also released when the process exits)."""
        if self._lock_fh is not None:
            self._lock_fh.close()
            self._lock_fh = None

    # -- results -------------------------------------------------------------------------------

    def _load_results(self) -> None:
        f = self.path / RESULTS_FILE
        if not f.exists():
            return
        data = f.read_bytes()
        good_end = 0
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:
                break  # a torn last line (killed mid-write): ignored and cut off below
            line = data[pos:nl]
            pos = nl + 1
            if not line.strip():
                good_end = pos
                continue
            try:
                result = claim_from_dict(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                break  # same: everything from the first unreadable line on is discarded
            self._done[result.claim.id] = result
            good_end = pos
        if good_end < len(data):
            # Cut the torn tail so the next append starts on a fresh line.
            with f.open("r+b") as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())

    def record(self, result: ClaimResult) -> None:
        """Append one finished claim and make it durable before returning."""
        line = result_line(result)
        with (self.path / RESULTS_FILE).open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._done[result.claim.id] = result

    def record_lines(self, lines: Sequence[str]) -> list[ClaimResult]:
        """Append several finished claims with one write and one fsync (a group commit): every
        line is durable before this returns. Returns the claims as a resume will read them.

        Each line is one claim encoded by `result_line`, possibly in another process (a Ray
        worker encodes its results so that the driver, which records every claim of a batch,
        neither re-encodes nor re-redacts them; docs/scale.md). `result_line` applied the
        redaction there, with that process's known secrets; the secret values this process knows
        (its environment, `register_secret`) are checked here again, and a line holding one is
        redacted before it is written. Raises `ValueError` (nothing written) for a line that is
        not one claim's JSON.
        """
        if not lines:
            return []
        secrets = known_secrets()
        # The values as they appear inside a JSON string (a `"` or `\` is escaped there).
        needles = {*secrets, *(json.dumps(s, ensure_ascii=False)[1:-1] for s in secrets)}
        joined = "\n".join(lines)
        suspect = any(s in joined for s in needles)  # one C scan per group: the common case
        out: list[str] = []
        results: list[ClaimResult] = []
        for line in lines:
            if "\n" in line:
                raise ValueError("a results.jsonl line holds a newline")
            try:
                doc = json.loads(line)
                if suspect and any(s in line for s in needles):
                    doc = redact_obj(doc)
                    line = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
                results.append(claim_from_dict(doc))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"not a claim's result line: {exc}") from None
            out.append(line)
        with (self.path / RESULTS_FILE).open("a", encoding="utf-8") as fh:
            fh.write("\n".join(out) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        for r in results:
            self._done[r.claim.id] = r
        return results

    @property
    def done(self) -> dict[str, ClaimResult]:
        """Finished claims by claim id: those with a verdict. A claim whose last result ended in
        error is not finished: the next run or `veritrail resume` verifies it again."""
        return {k: r for k, r in self._done.items() if r.termination is not Termination.ERROR}

    @property
    def errored(self) -> dict[str, ClaimResult]:
        """Claims whose last recorded result ended in error (retried by the next run)."""
        return {k: r for k, r in self._done.items() if r.termination is Termination.ERROR}

    def remaining(self) -> list[Claim]:
        """Claims to verify, in input order: never recorded, or last recorded with an error.

        results.jsonl only ever grows; the last line of a claim wins on load, so a retried
        claim's new result replaces its old error."""
        done = self.done
        return [c for c in self.claims if c.id not in done]

    def results_in_order(self) -> list[ClaimResult]:
        """The last result of every recorded claim (errors included), in the order of the
        claims; claims never recorded are left out."""
        return [self._done[c.id] for c in self.claims if c.id in self._done]

    # -- status --------------------------------------------------------------------------------

    def set_status(self, status: str, **extra: Any) -> None:
        """Update run.json's status (atomically), e.g. `interrupted` on Ctrl-C."""
        self.info = RunInfo(
            fingerprint=self.info.fingerprint,
            dag_path=self.info.dag_path,
            dag_sha256=self.info.dag_sha256,
            model=self.info.model,
            config=self.info.config,
            claims_path=self.info.claims_path,
            status=status,
            created=self.info.created,
            updated=time.time(),
            extra={**self.info.extra, **extra},
        )
        _write_json_atomic(self.path / RUN_FILE, self.info.to_json())

    def write_report(self, report: Mapping[str, Any]) -> Path:
        """Write the final report into the run directory; returns its path."""
        p = self.path / REPORT_FILE
        _write_json_atomic(p, report)
        return p
