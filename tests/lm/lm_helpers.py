"""Shared constants of the model-layer tests (a module, not conftest, so imports are unambiguous)."""

from __future__ import annotations

from veritrail.lm.retry import RetryPolicy

FAST_RETRY = RetryPolicy(
    max_attempts=4,
    base_delay=0.01,
    max_delay=0.05,
    max_total_seconds=10.0,
    rate_limit_min_delay=0.01,
)
"""Retries in milliseconds, so fault tests run fast."""
