"""The response cache: SQLite, one namespace per step, keyed by a versioned request hash.

The key is the SHA-256 of a canonical JSON document (sorted keys, no whitespace, UTF-8)::

    {"v": CACHE_KEY_VERSION, "provider": ..., "model": ..., "messages": [[role, content], ...],
     "params": {temperature, max_tokens, seed, response_format, json_schema, schema_name,
                sample_index}}

i.e. everything that can change a reply and nothing about transport: never the API key, the
base URL, timeouts or retry settings, so moving to another mirror of the same model keeps the
cache and a key can never leak into the file. Bump `CACHE_KEY_VERSION` whenever the key document
changes meaning. Values are the reply text and token counts only.

Replies are stored as the model wrote them, not redacted: a hit must give back exactly what a
call would (a redacted reply would change the claims and prompts built from it, so the calls
after it would miss). A reply can quote the texts it was sent, secrets included when the inputs
hold them, so a new cache file is created readable by its owner only, and nothing prints a
stored reply (`veritrail cache` shows counts and sizes; docs/running.md).

The file is safe to share between processes (WAL journal, busy timeout); writes are serialised
within a process by a lock, since the wrapper calls it from many tasks.

A cache that cannot be used (its directory cannot be created, the path is under a regular file or
is a directory, the file is not an SQLite database, the location is read-only) is refused when it
is opened, with a `CacheOpenError` — a `ValueError`, so the CLI turns it into `error: ...` and exit
2 before any model call.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import environment
from ..errors import InputProblem
from .base import GenerateConfig, Message, ModelOutput

CACHE_KEY_VERSION = 1
"""Version of the key document; part of every key."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    finish_reason TEXT,
    created REAL NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class CacheOpenError(InputProblem, ValueError):
    """The cache file cannot be created, opened or written; the message names it and the cause."""


def _create_private(path: Path) -> None:
    """Create an empty cache file readable by its owner only (0600), unless it exists.

    The replies stored may quote the texts the model was given, and those may hold secrets
    (docs/running.md, "Secrets"); SQLite gives its -wal and -shm files the database file's
    permissions. An existing file is left as it is; any failure here is left to
    `sqlite3.connect`, which reports it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return  # it exists (maybe created by another process just now), or cannot be created
    os.close(fd)


def default_cache_path() -> Path:
    """`$VERITRAIL_CACHE_DIR/cache.sqlite`, else `~/.cache/veritrail/cache.sqlite`."""
    env = environment.get("VERITRAIL_CACHE_DIR")
    root = Path(env) if env else Path.home() / ".cache" / "veritrail"
    return root / "cache.sqlite"


def key_document(
    provider: str, model: str, messages: Sequence[Message], config: GenerateConfig
) -> dict[str, object]:
    """The canonical request description that is hashed into a cache key."""
    return {
        "v": CACHE_KEY_VERSION,
        "provider": provider,
        "model": model,
        "messages": [[m.role, m.content] for m in messages],
        "params": {
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
            "seed": config.seed,
            "response_format": config.response_format.value,
            "json_schema": config.json_schema,
            "schema_name": config.schema_name,
            "sample_index": config.sample_index,
        },
    }


def cache_key(
    provider: str, model: str, messages: Sequence[Message], config: GenerateConfig
) -> str:
    """SHA-256 hex of the canonical JSON of `key_document(...)`."""
    doc = key_document(provider, model, messages, config)
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class NamespaceStats:
    """Entries stored under one namespace (step)."""

    namespace: str
    entries: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What `veritrail cache stats` shows."""

    path: Path
    size_bytes: int
    entries: int
    namespaces: tuple[NamespaceStats, ...]
    hits: int
    misses: int


class ResponseCache:
    """A SQLite response cache. `get`/`put` take a namespace (the step) and a key."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            above = next((p for p in self.path.parents if p.exists()), None)
            why = (
                f"{above} is a file, not a directory"
                if above is not None and not above.is_dir()
                else f"cannot create its directory ({exc.strerror or exc})"
            )
            raise self._unusable(why) from None
        if self.path.is_dir():
            raise self._unusable("it is a directory")
        _create_private(self.path)
        try:
            self._conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._unusable(str(exc)) from None
        try:
            with self._lock:
                self._conn.execute("PRAGMA journal_mode=WAL")
                # With WAL, NORMAL still survives a killed process (what resumable runs need);
                # only a power loss can drop the last commits. FULL fsyncs every put (~7 ms on
                # this machine), which dominated the event loop at high concurrency
                # (benchmarks/bench_schedule.py).
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.executescript(_SCHEMA)
                # A write now, so a read-only location fails here and not at the first reply.
                self._conn.execute(
                    "INSERT OR IGNORE INTO meta(name, value) VALUES ('key_version', ?)",
                    (str(CACHE_KEY_VERSION),),
                )
                self._conn.commit()
        except sqlite3.Error as exc:
            self._conn.close()
            raise self._unusable(str(exc)) from None
        self.hits = 0
        self.misses = 0

    def _unusable(self, why: str) -> CacheOpenError:
        return CacheOpenError(
            f"cannot use the model cache {self.path}: {why}; choose another file with "
            "--cache PATH (or VERITRAIL_CACHE_DIR), or turn the cache off with --cache off"
        )

    def get(self, namespace: str, key: str) -> ModelOutput | None:
        """The stored reply, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT text, input_tokens, output_tokens, finish_reason FROM responses "
                "WHERE namespace = ? AND key = ?",
                (namespace, key),
            ).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        return ModelOutput(
            text=row[0], input_tokens=row[1], output_tokens=row[2], finish_reason=row[3]
        )

    def put(self, namespace: str, key: str, model: str, output: ModelOutput) -> None:
        """Store a reply (text and token counts only)."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    namespace,
                    key,
                    model,
                    output.text,
                    output.input_tokens,
                    output.output_tokens,
                    output.finish_reason,
                    time.time(),
                ),
            )
            self._conn.commit()

    def stats(self) -> CacheStats:
        """Entry counts per namespace, file size, and this session's hits and misses."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT namespace, COUNT(*), SUM(input_tokens), SUM(output_tokens) "
                "FROM responses GROUP BY namespace ORDER BY namespace"
            ).fetchall()
        ns = tuple(NamespaceStats(r[0], r[1], r[2] or 0, r[3] or 0) for r in rows)
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return CacheStats(self.path, size, sum(n.entries for n in ns), ns, self.hits, self.misses)

    def clear(self, namespace: str | None = None) -> int:
        """Delete every entry (or one namespace's); returns how many were deleted."""
        with self._lock:
            if namespace is None:
                cur = self._conn.execute("DELETE FROM responses")
            else:
                cur = self._conn.execute("DELETE FROM responses WHERE namespace = ?", (namespace,))
            self._conn.commit()
            n = cur.rowcount
            self._conn.execute("VACUUM")
        return n

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()


__all__ = [
    "CACHE_KEY_VERSION",
    "CacheOpenError",
    "CacheStats",
    "NamespaceStats",
    "ResponseCache",
    "cache_key",
    "default_cache_path",
    "key_document",
]
