"""Classified retries: exponential backoff with jitter, `Retry-After`, bounded attempts and time.

`FatalError` (bad request, auth, unknown model, unsupported format) is raised at once.
`RateLimitError` and `TransientError` are retried: the wait is the server's `Retry-After` when it
gave one, else `base_delay * 2**(attempt-1)` capped at `max_delay`, minus up to `jitter` of it at
random (so many clients that failed together do not retry together). Retries stop after
`max_attempts` calls or when the next wait would pass `max_total_seconds` since the first call;
the last error then propagates to the caller, which records it against the claim.

A call that could not connect at all (connection refused, DNS failure:
`TransientError.connect_failure`) is retried too, since a local server may be starting or
restarting, but only up to `max_connect_attempts` calls (about 3 s with the default pacing), so a
wrong port or host name fails fast instead of spending the whole retry budget.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .base import FatalError, ProviderError, RateLimitError, TransientError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds and pacing of retries."""

    max_attempts: int = 6
    """Calls in total, the first included (1 = no retries)."""
    base_delay: float = 1.0
    """Seconds before the first retry (doubled each retry)."""
    max_delay: float = 60.0
    """Cap of one computed wait."""
    max_total_seconds: float = 300.0
    """No retry starts later than this after the first call."""
    jitter: float = 0.5
    """Fraction of a computed wait that is randomly taken off (0 = none)."""
    rate_limit_min_delay: float = 1.0
    """Floor of the wait after a 429 that named no `Retry-After`."""
    max_connect_attempts: int = 3
    """Calls in total when no connection could be made (refused, DNS failure)."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.max_connect_attempts < 1:
            raise ValueError("max_connect_attempts must be >= 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("retry delays must be >= 0")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be between 0 and 1")

    def delay(self, attempt: int, error: ProviderError, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed call number `attempt` (1-based)."""
        if error.retry_after is not None:
            # The server said when; honour it exactly (no jitter below it), but not past the cap
            # of the whole retry budget, which `retry_call` checks.
            return max(0.0, error.retry_after)
        base = min(self.max_delay, self.base_delay * float(2 ** (attempt - 1)))
        if isinstance(error, RateLimitError):
            base = max(base, self.rate_limit_min_delay)
        r: float = (rng or random).random()
        return base * (1.0 - self.jitter * r)


NO_RETRIES = RetryPolicy(max_attempts=1)


@dataclass(frozen=True, slots=True)
class RetryEvent:
    """One failed call that will be retried."""

    attempt: int
    error: ProviderError
    wait: float


async def retry_call(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    on_retry: Callable[[RetryEvent], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> tuple[T, int]:
    """Run `call` until it succeeds or retries are exhausted; return (result, calls made).

    Raises the last `ProviderError` when attempts or time run out, and any `FatalError` at once.
    The error gains an `attempts` attribute (calls made) for the trace.
    """
    start = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call(), attempt
        except FatalError as exc:
            exc.attempts = attempt
            raise
        except ProviderError as exc:
            wait = policy.delay(attempt, exc, rng)
            elapsed = clock() - start
            limit = policy.max_attempts
            if isinstance(exc, TransientError) and exc.connect_failure:
                limit = min(limit, policy.max_connect_attempts)
            if attempt >= limit or elapsed + wait > policy.max_total_seconds:
                exc.attempts = attempt
                raise
            if on_retry is not None:
                on_retry(RetryEvent(attempt, exc, wait))
            await sleep(wait)


__all__ = ["NO_RETRIES", "RetryEvent", "RetryPolicy", "retry_call"]
