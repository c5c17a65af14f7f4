"""The garbage-collector policy of a verification run.

Why: a run at high concurrency allocates container objects at a great rate (request and reply
objects, coroutine frames, futures, parsed JSON) while holding a large, long-lived heap (the DAG,
its sentence index, a task per claim). With CPython's default thresholds (700, 10, 10) the
collector ran ~2,900 young and 24 full collections in a 20-second batch run; the full ones scanned
~250,000 live objects each (~130 ms, during which the event loop answers nothing), and
collection took 31% of a worker's CPU (measured with `gc.callbacks` in a Ray worker of
`benchmarks/bench_batch.py`; docs/scale.md). Almost none of that garbage is cyclic: reference
counting frees it.

So while a run is verifying, `engine_gc`:

* collects once, then **freezes** what is alive (`gc.freeze`: the DAG, the sentence index, the
  loaded modules), so later collections do not scan it again and again;
* raises the thresholds to `THRESHOLDS` (a young collection every 20,000 net allocations instead
  of 700), unless the process already uses higher ones.

Cyclic garbage is still collected, only less often; memory stays bounded (a young generation of at
most 20,000 container objects). On leaving, the thresholds are restored and what was frozen is
unfrozen. Nested and concurrent uses (a batch running several jobs, a Ray worker running several
shards) count entries: only the first entry freezes and only the last exit restores. The policy
is process-wide, as the collector is: an application that embeds veritrail and has its own GC
policy keeps higher thresholds it has set, and a process that has frozen objects itself
(`gc.get_freeze_count() > 0`) is not frozen or unfrozen by us.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLDS = (20_000, 20, 20)
"""Young-generation threshold and the two older ones while a run verifies (CPython's: 700, 10,
10)."""

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None
_froze = False


@contextmanager
def engine_gc() -> Iterator[None]:
    """Apply the run's collector policy (module docstring) for the duration of the block."""
    global _depth, _saved, _froze
    with _lock:
        _depth += 1
        if _depth == 1:
            current = gc.get_threshold()
            _saved = (current[0], current[1], current[2])
            if current[0] > 0:  # 0 means automatic collection is off: leave it so
                gc.set_threshold(*(max(a, b) for a, b in zip(current, THRESHOLDS, strict=True)))
            _froze = False
            if gc.isenabled() and gc.get_freeze_count() == 0:
                gc.collect()
                gc.freeze()
                _froze = True
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _saved is not None:
                    gc.set_threshold(*_saved)
                    _saved = None
                if _froze:
                    gc.unfreeze()
                    _froze = False


def active() -> bool:
    """Whether a run's policy is in force in this process (tests, diagnostics)."""
    return _depth > 0


__all__ = ["THRESHOLDS", "active", "engine_gc"]
