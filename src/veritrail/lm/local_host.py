"""The host the embedded model runs on: its free cores, its load and its memory.

`LocalProvider` (`lm.local`) reads these once, when it is made, to choose llama.cpp's thread
count and its number of parallel slots. llama.cpp's threads wait for each other at every layer,
so one more thread than there are free cores stalls every call (issue 19 measured 80 s to
4 min 40 s per call with 2 threads beside one busy process): `auto_threads` takes the cores this
process may run on less the load at start (`start_load`). `fit_parallel` keeps the slots' KV
cache within a share of the available memory.

Tests replace these functions here (`monkeypatch.setattr(local_host, ...)`), where the provider
looks them up.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

DEFAULT_THREADS = 2
"""Threads when the available cores cannot be read (see `auto_threads`)."""
KV_MEMORY_SHARE = 0.25
"""The KV cache of all slots may take at most this share of the available memory."""


def available_cores() -> int:
    """CPU cores this process may run on (`os.sched_getaffinity`, else `os.cpu_count`)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or DEFAULT_THREADS)


def load_average() -> float | None:
    """The 1-minute load average, or None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def runnable_others(
    read: Callable[[], str] | None = None, samples: int = 5, interval: float = 0.01
) -> int | None:
    """Threads other than this one running or waiting for a core right now, or None where
    unknown: the runnable count of `/proc/loadavg` ("r" of its "r/t" field, which counts the
    reader), less one, at its lowest over `samples` reads `interval` seconds apart (a process
    that merely passes is not counted; a busy one is there in every read).

    Why: the 1-minute load average lags. A busy process started 60 s earlier showed as 0.90 on
    2 cores, so the embedded model took 2 threads beside it and the quick start took 202 s
    (benchmarks/README.md, session 5).
    """

    def from_proc() -> str:
        with open("/proc/loadavg", encoding="ascii") as f:
            return f.read()

    reader = read or from_proc
    low: int | None = None
    for i in range(max(1, samples)):
        if i:
            time.sleep(interval)
        try:
            running = int(reader().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        low = running if low is None else min(low, running)
    return None if low is None else max(0, low - 1)


def start_load() -> float | None:
    """The load `auto_threads` reads at start: the larger of the 1-minute load average and the
    threads runnable right now besides this one (`runnable_others`); None when neither is
    known."""
    known = [x for x in (load_average(), runnable_others()) if x is not None]
    return float(max(known)) if known else None


def auto_threads(cores: int, load: float | None) -> tuple[int, bool]:
    """(threads, busy): the cores not taken by the load at start, at least 1.

    `cores - floor(load)`, clipped to [1, cores]: a load of 0.7 on 2 cores leaves 2 threads, a
    load of 1.2 (one busy process) leaves 1. `busy` is True when fewer threads than cores remain.
    """
    if load is None or not math.isfinite(load):
        return cores, False
    threads = max(1, min(cores, cores - math.floor(max(0.0, load))))
    return threads, threads < cores


def available_memory() -> int | None:
    """Bytes of memory available for new allocations (`MemAvailable`), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def fit_parallel(parallel: int, n_ctx: int, kv_bytes_per_token: int, memory: int | None) -> int:
    """`parallel` lowered until the KV cache of every slot (`n_ctx` tokens each) fits in
    `KV_MEMORY_SHARE` of `memory` bytes; at least 1. Unknown memory keeps `parallel`."""
    if memory is None:
        return max(1, parallel)
    p = max(1, parallel)
    while p > 1 and p * n_ctx * kv_bytes_per_token > KV_MEMORY_SHARE * memory:
        p -= 1
    return p


__all__ = [
    "DEFAULT_THREADS",
    "KV_MEMORY_SHARE",
    "auto_threads",
    "available_cores",
    "available_memory",
    "fit_parallel",
    "load_average",
    "runnable_others",
    "start_load",
]
