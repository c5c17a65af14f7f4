"""Prompt-prefix states of the embedded model, kept on disk from one run to the next (issue 19).

Every call of a verification step starts with the same system prompt (the step's instructions,
300-500 tokens). Within a run llama.cpp computes it once and reuses it from its prefix cache, but
each new run computes every step's system prompt again: ~1,100 tokens, ~15 s of the quick
start's ~95 s on 2 cores (benchmarks/README.md, "Embedded model").

`PrefixStore` keeps llama.cpp's KV state of each system prompt in a file, using the server's own
slot save and restore (`POST /slots/0?action=save|restore`): a later run restores the state in a
few milliseconds instead of recomputing it. What is stored, and why it is safe:

- **Only veritrail's own instructions.** A state is saved right after a priming request made of
  the system prompt and a one-character user message, with no other call in flight, and it is
  committed only when the server saved exactly the priming request's tokens. No document,
  claim or reply of the user's ever reaches the store.
- **Only reused where it matches.** llama.cpp reuses the tokens of a restored state only as far
  as they equal the new prompt's, so a stale or foreign state costs time, never a wrong answer.
  The file name still hashes everything the values depend on (the weights, the llama.cpp build,
  the thread count, this format), so another build or thread count starts a new file instead of
  restoring arithmetic it would not have produced itself.
- **Never in the way.** Any failure (no space, a torn or unreadable file, a server that refuses)
  leaves the run as it would have been without the store: the call goes ahead and computes the
  prefix. Files are written under a temporary name and renamed into place, so concurrent runs
  never see half a file; the store keeps the `max_files` most recently used ones.

`VERITRAIL_PREFIX_STORE` chooses the folder (default `<model dir>/prefix-states`), or turns the
store off with `off` (or any of `environment.OFF_WORDS`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import time
from pathlib import Path

from .. import environment

FORMAT = 1
"""Bumped when what a file holds, or how its name is derived, changes."""
MAX_FILES = 32
"""Files kept (the most recently used); a run of the method uses three to five."""
MIN_SYSTEM_CHARS = 400
"""Shorter system prompts (~100 tokens) cost less to recompute than a round trip to the store."""
MAX_PER_RUN = 16
"""System prompts stored or restored per server; beyond this a run's system prompts vary from call
to call (a custom prompt with data in it), and storing them would only churn the folder."""
PRIME_USER = "."
"""The user message of a priming request: one character, so the state holds the system prompt
and the chat template's opening of the user turn, which every real call shares."""
SUFFIX = ".kv"
TEMP_PREFIX = ".tmp-"
STALE_TEMP_SECONDS = 3600.0
"""A temporary file this old belongs to no save in progress (a save takes milliseconds)."""


def default_dir(model_dir: Path) -> Path | None:
    """The store's folder from `VERITRAIL_PREFIX_STORE`: None when it says `off`."""
    env = environment.get("VERITRAIL_PREFIX_STORE")
    if env is not None and environment.is_off(env):
        return None
    return Path(env) if env else model_dir / "prefix-states"


class PrefixStore:
    """A folder of llama.cpp slot states, one per (system prompt, `identity`)."""

    def __init__(self, directory: Path, identity: str, max_files: int = MAX_FILES) -> None:
        self.directory = directory
        self.identity = identity
        """What the stored values depend on besides the prompt (weights, build, threads)."""
        self.max_files = max_files

    def ready(self) -> bool:
        """Create the folder; False (store unusable) when that fails."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        return os.access(self.directory, os.W_OK)

    def path(self, system: str) -> Path:
        """The file of `system`'s state (it may not exist)."""
        h = hashlib.sha256(f"{FORMAT}\x00{self.identity}\x00{system}".encode()).hexdigest()
        return self.directory / f"p{FORMAT}-{h[:40]}{SUFFIX}"

    def temp_name(self) -> str:
        """A fresh file name for the server to save into (renamed by `commit`)."""
        return f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}{SUFFIX}"

    def commit(self, temp_name: str, system: str) -> bool:
        """Move a saved temporary file into place, then trim the folder; False on failure."""
        temp = self.directory / temp_name
        try:
            os.replace(temp, self.path(system))
        except OSError:
            self.discard(temp_name)
            return False
        self.prune()
        return True

    def discard(self, temp_name: str) -> None:
        """Remove a temporary file the server wrote (or half wrote)."""
        self.forget(self.directory / temp_name)

    def touch(self, path: Path) -> None:
        """Mark a file as used now (the store keeps the most recently used)."""
        with contextlib.suppress(OSError):
            os.utime(path)

    def forget(self, path: Path) -> None:
        """Remove a file (one that could not be restored, or a temporary one)."""
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)

    def files(self) -> list[Path]:
        """The stored states (temporary files of runs in progress left out)."""
        try:
            return [
                p
                for p in self.directory.iterdir()
                if p.name.endswith(SUFFIX) and not p.name.startswith(TEMP_PREFIX)
            ]
        except OSError:
            return []

    def prune(self, now: float | None = None) -> None:
        """Keep the `max_files` most recently used states; remove temporary files a run left
        behind when it was killed mid-save (older than `STALE_TEMP_SECONDS`)."""

        def mtime(p: Path) -> float:
            try:
                return p.stat().st_mtime
            except OSError:
                return 0.0

        for p in sorted(self.files(), key=mtime, reverse=True)[self.max_files :]:
            self.forget(p)
        limit = (time.time() if now is None else now) - STALE_TEMP_SECONDS
        with contextlib.suppress(OSError):
            for p in self.directory.iterdir():
                if p.name.startswith(TEMP_PREFIX) and mtime(p) < limit:
                    self.forget(p)


__all__ = [
    "FORMAT",
    "MAX_FILES",
    "MAX_PER_RUN",
    "MIN_SYSTEM_CHARS",
    "PRIME_USER",
    "PrefixStore",
    "default_dir",
]
