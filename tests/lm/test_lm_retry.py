"""Retry policy: classification, backoff bounds, Retry-After, attempt and time budgets."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veritrail.lm.base import FatalError, ProviderError, RateLimitError, TransientError
from veritrail.lm.retry import RetryEvent, RetryPolicy, retry_call


class Clock:
    """A fake monotonic clock advanced by the fake sleep."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def failing(errors: list[ProviderError], result: str = "done"):
    calls = {"n": 0}

    async def call() -> str:
        calls["n"] += 1
        if errors:
            raise errors.pop(0)
        return result

    return call, calls


@given(
    attempt=st.integers(min_value=1, max_value=30),
    base=st.floats(min_value=0.001, max_value=10),
    cap=st.floats(min_value=0.01, max_value=100),
    jitter=st.floats(min_value=0, max_value=1),
    seed=st.integers(0, 2**32 - 1),
)
def test_backoff_delay_within_bounds(
    attempt: int, base: float, cap: float, jitter: float, seed: int
) -> None:
    p = RetryPolicy(base_delay=base, max_delay=cap, jitter=jitter, rate_limit_min_delay=0)
    d = p.delay(attempt, TransientError("x"), random.Random(seed))
    top = min(cap, base * 2 ** (attempt - 1))
    assert top * (1 - jitter) - 1e-9 <= d <= top + 1e-9


@given(st.floats(min_value=0, max_value=1000))
def test_retry_after_is_honoured_exactly(seconds: float) -> None:
    p = RetryPolicy(jitter=1.0)
    assert p.delay(3, RateLimitError("429", retry_after=seconds)) == seconds


async def test_transient_then_success_counts_attempts() -> None:
    clock = Clock()
    call, calls = failing([TransientError("500"), RateLimitError("429", retry_after=2.0)])
    events: list[RetryEvent] = []
    out, attempts = await retry_call(
        call,
        RetryPolicy(base_delay=1, jitter=0),
        on_retry=events.append,
        sleep=clock.sleep,
        clock=clock,
    )
    assert (out, attempts, calls["n"]) == ("done", 3, 3)
    assert clock.sleeps == [1.0, 2.0]  # backoff, then exactly the server's Retry-After
    assert [type(e.error) for e in events] == [TransientError, RateLimitError]


async def test_fatal_is_not_retried() -> None:
    clock = Clock()
    call, calls = failing([FatalError("401 bad key")])
    with pytest.raises(FatalError) as info:
        await retry_call(call, RetryPolicy(), sleep=clock.sleep, clock=clock)
    assert calls["n"] == 1
    assert info.value.attempts == 1
    assert clock.sleeps == []


async def test_attempts_are_bounded() -> None:
    clock = Clock()
    call, calls = failing([TransientError(f"e{i}") for i in range(10)])
    with pytest.raises(TransientError) as info:
        await retry_call(
            call, RetryPolicy(max_attempts=3, jitter=0), sleep=clock.sleep, clock=clock
        )
    assert calls["n"] == 3
    assert info.value.attempts == 3
    assert str(info.value) == "e2"  # the last error propagates


async def test_total_time_is_bounded() -> None:
    clock = Clock()
    call, calls = failing([RateLimitError("429", retry_after=50.0) for _ in range(10)])
    with pytest.raises(RateLimitError):
        await retry_call(
            call,
            RetryPolicy(max_attempts=100, max_total_seconds=120),
            sleep=clock.sleep,
            clock=clock,
        )
    # Two waits of 50 s fit in 120 s; a third would not, so it gives up instead of sleeping.
    assert clock.sleeps == [50.0, 50.0]
    assert calls["n"] == 3


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(jitter=1.5)


async def test_connect_failures_get_fewer_attempts() -> None:
    clock = Clock()

    def refused() -> TransientError:
        err = TransientError("cannot connect to http://127.0.0.1:1/v1 (connection refused)")
        err.connect_failure = True
        return err

    policy = RetryPolicy(max_attempts=6, max_connect_attempts=3)
    call, calls = failing([refused() for _ in range(6)])
    with pytest.raises(TransientError) as info:
        await retry_call(call, policy, sleep=clock.sleep, clock=clock)
    assert calls["n"] == 3 and info.value.attempts == 3
    # A refused connection that comes back (a server restarting) still succeeds.
    call, calls = failing([refused(), refused()])
    assert await retry_call(call, policy, sleep=clock.sleep, clock=clock) == ("done", 3)
    # Other transient errors keep the whole budget.
    call, calls = failing([TransientError("HTTP 503") for _ in range(6)])
    with pytest.raises(TransientError):
        await retry_call(call, policy, sleep=clock.sleep, clock=clock)
    assert calls["n"] == 6
    with pytest.raises(ValueError):
        RetryPolicy(max_connect_attempts=0)
