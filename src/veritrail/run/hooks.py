"""What a run calls when it ends, off its own path: registered hooks (the runs index is one).

The periphery (the index of runs, exports, integrations) hangs off these hooks instead of being
called by the run: a hook gets the ended run's directory, status and report file, runs in a
thread of its own and is given `hook_timeout()` seconds. A hook that fails or does not answer in
time (a PostgreSQL that does not answer) never fails the run nor holds it: the run's result is
already in its run directory, and the hook's failure is said in one warning line per hook and
process (a batch of 1,000 jobs does not print 1,000). A hung hook's thread is a daemon: it does not
keep the process alive either.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import environment
from ..redaction import redact


@dataclass(frozen=True, slots=True)
class RunEnded:
    """What a run-end hook is told."""

    run_dir: Path
    runs_dir: Path
    """The runs directory of the run's settings (`--runs-dir`), where its index lives."""
    status: str
    """run.json's status (`run.store.Status`)."""
    report_file: Path


RunEndHook = Callable[[RunEnded], None]

DEFAULT_TIMEOUT = 10.0
"""Seconds a hook is given (`VERITRAIL_HOOK_TIMEOUT` overrides)."""

_HOOKS: dict[str, RunEndHook | str] = {
    # The index of runs (`veritrail runs`): a cache of the run directories, so a missed update is
    # found by the next `veritrail runs`. Named lazily: SQLAlchemy is imported only when the index
    # exists or is configured (runs.hook.record_ended_run decides), never by a plain run.
    "runs index": "veritrail.runs.hook:record_ended_run",
}
_warned: set[str] = set()
_lock = threading.Lock()


def register_run_end_hook(name: str, hook: RunEndHook | str) -> None:
    """Call `hook` (a callable or "module:attr") when any run of this process ends."""
    _HOOKS[name] = hook


def unregister_run_end_hook(name: str) -> None:
    """Remove a hook (no error when it is not there)."""
    _HOOKS.pop(name, None)


def run_end_hooks() -> list[str]:
    """The names of the registered hooks, in calling order."""
    return list(_HOOKS)


def hook_timeout() -> float:
    """Seconds each hook is given: `VERITRAIL_HOOK_TIMEOUT`, else `DEFAULT_TIMEOUT`."""
    raw = (environment.get("VERITRAIL_HOOK_TIMEOUT") or "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def _resolve(hook: RunEndHook | str) -> RunEndHook:
    if not isinstance(hook, str):
        return hook
    mod, _, attr = hook.partition(":")
    found: RunEndHook = getattr(importlib.import_module(mod), attr)
    return found


def _warn(name: str, what: str) -> None:
    with _lock:
        if name in _warned:
            return
        _warned.add(name)
    print(
        f"warning: the run-end hook {name!r} {redact(what)}; the run itself is unaffected "
        "(its result is in its run directory)",
        file=sys.stderr,
        flush=True,
    )


def call_run_end_hooks(event: RunEnded, *, timeout: float | None = None) -> list[str]:
    """Call every registered hook on `event`; return the names of those that failed or timed
    out (each said once per process on standard error). Never raises."""
    limit = hook_timeout() if timeout is None else timeout
    failed: list[str] = []
    for name, hook in list(_HOOKS.items()):
        errors: list[BaseException] = []

        def call(hook: RunEndHook | str = hook, errors: list[BaseException] = errors) -> None:
            try:
                _resolve(hook)(event)
            except BaseException as exc:  # noqa: BLE001 - a hook never fails the run
                errors.append(exc)

        thread = threading.Thread(target=call, name=f"veritrail-hook-{name}", daemon=True)
        thread.start()
        thread.join(limit)
        if thread.is_alive():
            failed.append(name)
            _warn(name, f"did not answer within {limit:g} s and was left behind")
        elif errors:
            failed.append(name)
            first = errors[0]
            _warn(
                name,
                f"failed: {type(first).__name__}: {str(first).splitlines()[0] if str(first) else ''}",
            )
    return failed


__all__ = [
    "DEFAULT_TIMEOUT",
    "RunEndHook",
    "RunEnded",
    "call_run_end_hooks",
    "hook_timeout",
    "register_run_end_hook",
    "run_end_hooks",
    "unregister_run_end_hook",
]
