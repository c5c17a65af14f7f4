"""Deterministic sampling of traces: the same trace id gives the same answer in every process.

A trace is sampled when the first 8 bytes of SHA-256 of its id (lower-case hex, no ``0x``), read
as a big-endian integer and divided by 2^64, are below the rate. Replicas of `veritrail watch`
and a restarted one therefore agree on the set without talking to each other, and a higher rate
takes a superset of a lower one's traces.
"""

from __future__ import annotations

import hashlib


def sample_point(trace_id: str) -> float:
    """The trace's point in [0, 1)."""
    key = trace_id.strip().lower().removeprefix("0x").encode("utf-8")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64


def sampled(trace_id: str, rate: float) -> bool:
    """Whether `trace_id` is in the sample at `rate` (0 takes none, 1 every trace)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError("the sample rate is between 0 and 1")
    return sample_point(trace_id) < rate


__all__ = ["sample_point", "sampled"]
