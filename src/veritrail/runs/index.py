"""The index of runs: every run directory under a runs directory, in a database (docs/runs.md).

`open_index(runs_dir, db_url=None)` opens (creating and migrating on first use) the index of
one runs directory, its *root*: one database may hold the indexes of several roots (a team's
PostgreSQL), each row belongs to one. A run's id (`RunRow.id`) is its directory's path relative
to the root (``summary-1a2b3c4d5e6f``; an absolute path for a run recorded from outside it).

* `RunIndex.refresh` re-reads only the run directories whose files changed since they were
  indexed (`files.run_signature`: sizes and modification times), adds new ones and drops those
  that are gone: a few thousand `stat` calls for a thousand runs, so every listing does it.
* `RunIndex.reindex` rebuilds the root's rows from the files.
* `RunIndex.record_run` indexes one run directory now (what the run layer calls when a run
  ends, through `index_finished_run`, which never raises).
* `RunIndex.list_runs` / `count_runs` (filters: `RunFilter`), `get_run`, `run_claims`, `dags`,
  `models`; `RunIndex.review` adds a review (`reviewing.add_review`) and re-indexes the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import Connection, Engine, Select, delete, func, or_, select, text
from sqlalchemy.exc import SQLAlchemyError

from .. import environment
from .db import (
    DB_VARIABLE,
    WRITE_OPTION,
    RunsIndexError,
    RunsIndexUnavailable,
    database_url,
    display_url,
    is_corrupt,
    make_engine,
    migrate,
    unavailable,
)
from .files import (
    RunDirError,
    RunRecord,
    find_run_dirs,
    is_run_dir,
    read_run_dir,
    run_signature,
)
from .layout import INDEX_FILE
from .reviewing import add_review
from .reviews import Review
from .rows import (
    ClaimRow,
    RefreshStats,
    RunFilter,
    RunRow,
    claim_row,
    claim_values,
    epoch,
    run_row,
    run_values,
)
from .schema import claims as claims_t
from .schema import runs as runs_t

CLAIM_BATCH = 5000
"""Claims inserted by one statement while indexing."""

_ROW_COLUMNS = [c for c in runs_t.c if c.name not in ("pk", "root", "signature", "indexed")]


class RunIndex:
    """The index of one runs directory (see the module's docstring). Open with `open_index`;
    close with `close` or a `with` block. Thread-safe as its engine is (a web server may share
    one)."""

    def __init__(self, root: Path, engine: Engine, url: str) -> None:
        self.root = root.resolve()
        self.engine = engine
        self.url = url
        self._root_key = str(self.root)
        self._prefix = self._root_key.rstrip("/") + "/"
        self.moved_aside: Path | None = None
        """A corrupt SQLite file `open_index(..., rebuild_corrupt=True)` moved aside."""

    @contextlib.contextmanager
    def _db(self) -> Iterator[None]:
        """A database failure in use (a server gone, a lock held too long) as one line, exit 3
        (`RunsIndexUnavailable`), never a driver's traceback."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise unavailable(self.url, exc) from None

    # -- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()

    def __enter__(self) -> RunIndex:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def display_url(self) -> str:
        """The database as it may be shown (no password)."""
        return display_url(self.url)

    # -- names ---------------------------------------------------------------------------------

    def run_id(self, run_dir: str | Path) -> str:
        """The id of a run directory: its path relative to the root, else its absolute path."""
        s = os.fspath(run_dir)
        # The paths `find_run_dirs` gives under the root need no resolving (a thousand
        # `resolve` calls were most of a refresh's time).
        if s.startswith(self._prefix) and ".." not in s and "/./" not in s:
            return s[len(self._prefix) :].rstrip("/")
        p = Path(s).resolve()
        try:
            return p.relative_to(self.root).as_posix() or "."
        except ValueError:
            return p.as_posix()

    # -- writing -------------------------------------------------------------------------------

    def _known(self, conn: Connection) -> dict[str, tuple[int, str, str]]:
        rows = conn.execute(
            select(runs_t.c.name, runs_t.c.pk, runs_t.c.signature, runs_t.c.path).where(
                runs_t.c.root == self._root_key
            )
        )
        return {r.name: (r.pk, r.signature, r.path) for r in rows}

    def _delete(self, conn: Connection, pks: Sequence[int]) -> None:
        for i in range(0, len(pks), 500):  # bounded parameter lists (SQLite's limit)
            chunk = list(pks[i : i + 500])
            conn.execute(delete(claims_t).where(claims_t.c.run_pk.in_(chunk)))
            conn.execute(delete(runs_t).where(runs_t.c.pk.in_(chunk)))

    def _insert(
        self, conn: Connection, rec: RunRecord, name: str, pending: list[dict[str, Any]]
    ) -> None:
        """Insert the run's row now (its key is needed) and queue its claims in `pending`
        (inserted in large batches by `_flush`: one statement for thousands of claims)."""
        result = conn.execute(runs_t.insert(), run_values(rec, self._root_key, name))
        key = result.inserted_primary_key
        if key is None:  # every backend veritrail supports returns it
            raise RuntimeError("the database returned no key for a new run")
        pending.extend(claim_values(rec, int(key[0])))
        if len(pending) >= CLAIM_BATCH:
            self._flush(conn, pending)

    @staticmethod
    def _flush(conn: Connection, pending: list[dict[str, Any]]) -> None:
        if pending:
            conn.execute(claims_t.insert(), pending)
            pending.clear()

    def _sync(self, paths: Iterable[Path], *, rebuild: bool, only: bool = False) -> RefreshStats:
        """Read what changed (outside any transaction: reading files is the slow part), then
        write it in one short write transaction that re-checks what it replaces, so two
        processes refreshing at once neither fail nor write a run twice. `paths` are all the
        root's runs (the rows of others are removed), or with `only` just those to update."""
        t0 = time.perf_counter()
        failed: list[tuple[str, str]] = []
        warnings: list[str] = []
        try:
            with self.engine.connect() as conn:
                known = {} if rebuild else self._known(conn)
            todo: dict[str, RunRecord | None] = {}  # name -> record (None: unreadable)
            unchanged = 0
            for path in paths:
                name = self.run_id(path)
                if name in todo:
                    continue
                old = known.get(name)
                if old is not None and old[1] == run_signature(path):
                    todo[name] = None
                    unchanged += 1
                    continue
                try:
                    read = read_run_dir(path)
                    todo[name] = read
                    if read.warning:
                        warnings.append(read.warning)
                except RunDirError as exc:
                    failed.append((str(path), str(exc)))
                    todo[name] = None
            failed_names = {self.run_id(p) for p, _ in failed}
            added = updated = removed = 0
            nothing = (
                not rebuild
                and all(r is None for r in todo.values())
                and not (failed_names & known.keys())
                and (only or known.keys() <= todo.keys())
            )
            if nothing:  # the common listing: no write transaction at all
                return RefreshStats(
                    scanned=len(todo),
                    unchanged=unchanged,
                    failed=tuple(failed),
                    seconds=time.perf_counter() - t0,
                    warnings=tuple(warnings),
                )
            with self._writing() as conn:
                now = self._known(conn)
                if rebuild:
                    self._delete(conn, [pk for pk, _, _ in now.values()])
                    now = {}
                gone = [] if only else [n for n in now if n not in todo]
                stale = [now[n][0] for n in [*gone, *failed_names] if n in now]
                removed = len(stale)
                self._delete(conn, stale)
                pending: list[dict[str, Any]] = []
                for name, rec in todo.items():
                    if rec is None:
                        continue
                    old = now.get(name)
                    if old is not None and name not in failed_names:
                        if old[1] == rec.signature:
                            continue  # another process indexed this very state meanwhile
                        self._delete(conn, [old[0]])
                        updated += 1
                    else:
                        added += 1
                    self._insert(conn, rec, name, pending)
                self._flush(conn, pending)
        except SQLAlchemyError as exc:
            raise unavailable(self.url, exc) from None
        return RefreshStats(
            scanned=len(todo),
            added=added,
            updated=updated,
            removed=removed,
            unchanged=unchanged,
            failed=tuple(failed),
            seconds=time.perf_counter() - t0,
            warnings=tuple(warnings),
        )

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction that holds the root's write lock from its start (SQLite: BEGIN
        IMMEDIATE, see `db.make_engine`; PostgreSQL: an advisory lock on the root), so that
        concurrent writers queue instead of failing."""
        with self.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    key = int.from_bytes(
                        hashlib.sha256(self._root_key.encode()).digest()[:8], "big", signed=True
                    )
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
                yield conn

    def _paths(self) -> list[Path]:
        """The run directories under the root, then those recorded from outside it that
        still exist."""
        found = find_run_dirs(self.root)
        with self._db(), self.engine.connect() as conn:
            outside = [
                p
                for (p,) in conn.execute(
                    select(runs_t.c.path).where(runs_t.c.root == self._root_key)
                )
                if not p.startswith(self._prefix)  # stored resolved: a string test suffices
            ]
        return found + [Path(p) for p in outside if is_run_dir(p)]

    def refresh(self) -> RefreshStats:
        """Bring the index up to date with the files, re-reading only the run directories whose
        files changed since they were indexed."""
        return self._sync(self._paths(), rebuild=False)

    def reindex(self) -> RefreshStats:
        """Rebuild the root's rows from the run directories (runs recorded from outside the root
        that still exist are kept)."""
        return self._sync(self._paths(), rebuild=True)

    def record_run(self, run_dir: str | Path) -> RunRow | None:
        """Index one run directory now (`RunDirError` when it is not a readable run); returns
        its row."""
        p = Path(run_dir)
        read_run_dir(p)  # the error, if any, before the database is touched
        stats = self._sync([p], rebuild=False, only=True)
        if stats.failed:
            raise RunDirError(stats.failed[0][1])
        return self.get_run(self.run_id(p))

    def review(
        self,
        run_id: str,
        claim_id: str,
        verdict: str,
        reason: str,
        *,
        author: str | None = None,
        stage: int | None = None,
        node: str | None = None,
    ) -> Review:
        """Review a claim of an indexed run (`reviewing.add_review`: appended to the run's
        reviews.jsonl, reports re-written; `stage`/`node`: where the content entered) and index
        the run again."""
        from .reviews import ReviewError

        row = self.get_run(run_id)
        if row is None:
            raise ReviewError(f"no run {run_id!r} in the index of {self.root}")
        got = add_review(row.path, claim_id, verdict, reason, author=author, stage=stage, node=node)
        self._sync([row.path], rebuild=False, only=True)
        return got

    # -- reading -------------------------------------------------------------------------------

    def _select(self, flt: RunFilter | None) -> Select[Any]:
        q = select(*_ROW_COLUMNS).where(runs_t.c.root == self._root_key)
        f = flt or RunFilter()
        if f.dag:
            q = q.where(
                or_(
                    runs_t.c.dag.icontains(f.dag, autoescape=True),
                    runs_t.c.pipeline.icontains(f.dag, autoescape=True),
                )
            )
        if f.model:
            q = q.where(runs_t.c.model.icontains(f.model, autoescape=True))
        if f.status:
            q = q.where(runs_t.c.status == f.status)
        since, until = epoch(f.since), epoch(f.until)
        if since is not None:
            q = q.where(runs_t.c.created >= since)
        if until is not None:
            q = q.where(runs_t.c.created < until)
        return q

    def list_runs(
        self, flt: RunFilter | None = None, *, limit: int | None = None, offset: int = 0
    ) -> list[RunRow]:
        """The runs matching `flt`, newest first (then by id)."""
        q = self._select(flt).order_by(runs_t.c.created.desc(), runs_t.c.name)
        if limit is not None:
            q = q.limit(limit)
        if offset:
            q = q.offset(offset)
        with self._db(), self.engine.connect() as conn:
            return [run_row(m) for m in conn.execute(q).mappings()]

    def count_runs(self, flt: RunFilter | None = None) -> int:
        """How many runs match `flt`."""
        q = select(func.count()).select_from(self._select(flt).subquery())
        with self._db(), self.engine.connect() as conn:
            return int(conn.execute(q).scalar_one())

    def get_run(self, run_id: str) -> RunRow | None:
        """One run by id (None when the index has no such run)."""
        q = select(*_ROW_COLUMNS).where(runs_t.c.root == self._root_key, runs_t.c.name == run_id)
        with self._db(), self.engine.connect() as conn:
            m = conn.execute(q).mappings().first()
        return run_row(m) if m is not None else None

    def run_claims(self, run_id: str) -> list[ClaimRow]:
        """The claims of a run, in report order (empty for an unknown run)."""
        c = claims_t.c
        q = (
            select(claims_t)
            .join(runs_t, runs_t.c.pk == c.run_pk)
            .where(runs_t.c.root == self._root_key, runs_t.c.name == run_id)
            .order_by(c.position)
        )
        with self._db(), self.engine.connect() as conn:
            return [claim_row(run_id, m) for m in conn.execute(q).mappings()]

    def _distinct(self, column: Any) -> list[str]:
        q = (
            select(column)
            .where(runs_t.c.root == self._root_key, column.is_not(None))
            .distinct()
            .order_by(column)
        )
        with self._db(), self.engine.connect() as conn:
            return [str(v) for (v,) in conn.execute(q)]

    def dags(self) -> list[str]:
        """The DAG names of the indexed runs, sorted (for filter menus)."""
        return self._distinct(runs_t.c.dag)

    def models(self) -> list[str]:
        """The models of the indexed runs, sorted."""
        return self._distinct(runs_t.c.model)


def open_index(
    runs_dir: str | Path, db_url: str | None = None, *, rebuild_corrupt: bool = False
) -> RunIndex:
    """Open the index of `runs_dir` (`db.database_url`: `db_url`, else `VERITRAIL_RUNS_DB`,
    else SQLite at ``<runs_dir>/index.sqlite``), creating it and bringing its schema up to date
    on first use. `RunsIndexError` (exit 2) when `runs_dir` is not a directory or the URL
    cannot be used; `RunsIndexUnavailable` (exit 3) when the database fails (unreachable,
    locked, corrupt). `rebuild_corrupt` (`veritrail runs reindex`): a SQLite file that is not a
    database is moved aside (`RunIndex.moved_aside`) and a new index created: the index is a
    cache of the run directories, which the rebuild reads again."""
    root = Path(runs_dir)
    if not root.is_dir():
        raise RunsIndexError(f"{root} is not a directory of runs (--runs-dir)")
    url = database_url(root, db_url)
    engine = make_engine(url)
    moved: Path | None = None
    try:
        try:
            migrate(engine)
        except RunsIndexUnavailable as exc:
            sqlite_file = engine.url.database if engine.url.get_backend_name() == "sqlite" else None
            if not (rebuild_corrupt and sqlite_file and is_corrupt(exc)):
                raise
            engine.dispose()
            moved = _move_aside(Path(sqlite_file))
            engine = make_engine(url)
            migrate(engine)
    except BaseException:
        engine.dispose()
        raise
    index = RunIndex(root, engine, url)
    index.moved_aside = moved
    return index


def _move_aside(db_file: Path) -> Path:
    """Rename a corrupt SQLite file (and its journal files) to ``<name>.corrupt-<time>``: kept
    for whoever wants to look, out of the way of the new index."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = db_file.with_name(f"{db_file.name}.corrupt-{stamp}")
    try:
        os.replace(db_file, target)
    except OSError as exc:
        raise RunsIndexUnavailable(
            f"{db_file} is not a database and cannot be moved aside ({exc.strerror or exc}); "
            "delete it and run `veritrail runs reindex` again"
        ) from None
    for suffix in ("-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            os.replace(f"{db_file}{suffix}", f"{target}{suffix}")
    return target


def index_finished_run(
    run_dir: str | Path, runs_dir: str | Path, db_url: str | None = None
) -> bool:
    """Record a run that just ended in the index of `runs_dir`, best effort: the index is a
    cache of the run directories, so a failure here must never fail the run (the next
    `veritrail runs` finds it anyway). Does nothing (False) when the run is outside `runs_dir`
    and no index exists there yet, so that a run with its own `--run-dir` creates no `runs/`
    folder. True when recorded."""
    root = Path(runs_dir)
    try:
        inside = Path(run_dir).resolve().is_relative_to(root.resolve())
        configured = bool(db_url or environment.get(DB_VARIABLE)) or (root / INDEX_FILE).is_file()
        if not (inside or configured) or not root.is_dir():
            return False
        with open_index(root, db_url) as index:
            index.record_run(run_dir)
        return True
    except Exception:  # noqa: BLE001 - documented: the index never fails a run
        return False


__all__ = [
    "ClaimRow",
    "RefreshStats",
    "RunFilter",
    "RunIndex",
    "RunRow",
    "RunsIndexError",
    "RunsIndexUnavailable",
    "index_finished_run",
    "open_index",
]
