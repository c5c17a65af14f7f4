"""The spending cap (`lm.budget.Budget`) in the `Model` wrapper, against the loopback server:
calls in flight finish and are counted, no call starts once the cap would be passed, cache hits
cost nothing; and the bound of the counted spend, as a property."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lm_helpers import FAST_RETRY

from veritrail.lm.base import GenerateConfig, Message
from veritrail.lm.budget import (
    Budget,
    BudgetExhausted,
    NoPriceError,
    Reservation,
    check_priced,
    prompt_estimate,
)
from veritrail.lm.cache import ResponseCache
from veritrail.lm.model import Model
from veritrail.lm.openai import OpenAIProvider
from veritrail.lm.pricing import Price, PriceTable
from veritrail.testing import FakeOpenAIServer

PRICE = Price(1000.0, 2000.0)
"""$0.001 per input token, $0.002 per output token: figures easy to check."""


def _model(srv: FakeOpenAIServer, budget: Budget, **kw: object) -> Model:
    m = Model(
        OpenAIProvider("capped-x", base_url=srv.base_url, api_key="sk-test", timeout=10.0),
        retry=FAST_RETRY,
        prices=PriceTable({"openai/capped-x": PRICE}),
        **kw,  # type: ignore[arg-type]
    )
    m.budget = budget
    return m


def _msgs(text: str) -> list[Message]:
    return [Message("user", text)]


def test_calls_in_flight_finish_and_a_call_that_cannot_fit_is_refused() -> None:
    """A call held in flight keeps its reservation; a call that would pass the cap whatever the
    held one costs is refused at once (nothing sent); released, the held call finishes and is
    counted, and every later call is refused, however small."""
    reply = 50
    one = prompt_estimate(_msgs("question 0")) + reply
    budget = Budget(max_tokens=one + 10)
    cfg = GenerateConfig(max_tokens=reply)

    async def go(srv: FakeOpenAIServer) -> None:
        m = _model(srv, budget, concurrency=4)
        srv.hold()
        held = asyncio.create_task(m.generate(_msgs("question 0"), cfg, step="s"))
        assert await asyncio.to_thread(srv.wait_for_requests, 1)
        with pytest.raises(BudgetExhausted) as refused:
            await m.generate(_msgs("question 1"), GenerateConfig(max_tokens=5_000), step="s")
        assert "budget reached" in refused.value.cause and "--max-tokens" in refused.value.cause
        assert srv.count == 1  # the refused call sent nothing
        srv.release()
        g = await held
        spent = budget.spend()
        assert spent.calls == 1 and spent.refused == 1
        assert spent.tokens == g.input_tokens + g.output_tokens
        assert spent.reserved_tokens == 0  # settled: the reservation is gone
        # Reached for good: even a tiny call is refused now, and still nothing is sent.
        with pytest.raises(BudgetExhausted):
            await m.generate(_msgs("x"), GenerateConfig(max_tokens=1), step="s")
        assert srv.count == 1
        await m.aclose()

    with FakeOpenAIServer(responder=lambda _req: "ok") as srv:
        asyncio.run(go(srv))


def test_a_call_that_fits_once_the_calls_in_flight_settle_waits_for_them() -> None:
    """Two held calls reserve most of the cap; a third that fits beside what was spent (but not
    beside their reservations) waits, sending nothing, and starts once they have settled at
    what they cost (far below their reply limits)."""
    reply = 50
    one = prompt_estimate(_msgs("question 0")) + reply
    budget = Budget(max_tokens=2 * one + one // 2)
    cfg = GenerateConfig(max_tokens=reply)

    async def go(srv: FakeOpenAIServer) -> None:
        m = _model(srv, budget, concurrency=4)
        srv.hold()
        first = [
            asyncio.create_task(m.generate(_msgs(f"question {i}"), cfg, step="s")) for i in (0, 1)
        ]
        assert await asyncio.to_thread(srv.wait_for_requests, 2)
        third = asyncio.create_task(m.generate(_msgs("question 2"), cfg, step="s"))
        while budget.spend().waiting == 0:  # yield until the third call is waiting for room
            await asyncio.sleep(0)
        assert srv.count == 2 and not third.done()
        srv.release()
        await asyncio.gather(*first, third)
        assert srv.count == 3
        spent = budget.spend()
        assert spent.calls == 3 and spent.refused == 0 and budget.reached is None
        assert spent.tokens <= budget.max_tokens  # type: ignore[operator]
        await m.aclose()

    with FakeOpenAIServer(responder=lambda _req: "ok") as srv:
        asyncio.run(go(srv))


def test_dollars_are_counted_at_the_models_price() -> None:
    budget = Budget(max_cost=100.0)

    async def go(srv: FakeOpenAIServer) -> None:
        m = _model(srv, budget)
        g = await m.generate(_msgs("a question"), GenerateConfig(max_tokens=20), step="s")
        assert budget.spend().dollars == pytest.approx(
            PRICE.dollars(g.input_tokens, g.output_tokens)
        )
        assert budget.spend().dollars == pytest.approx(g.dollars) and g.dollars > 0
        await m.aclose()

    with FakeOpenAIServer(responder=lambda _req: "an answer") as srv:
        asyncio.run(go(srv))


def test_cache_hits_cost_nothing_and_are_never_refused(tmp_path: Path) -> None:
    """A cached reply spends nothing from the cap and is answered even once it is reached."""
    budget = Budget(max_tokens=10_000)
    cfg = GenerateConfig(max_tokens=20)

    async def go(srv: FakeOpenAIServer) -> None:
        cache = ResponseCache(tmp_path / "cache.sqlite")
        m = _model(srv, budget, cache=cache)
        await m.generate(_msgs("cached question"), cfg, step="s")
        after_first = budget.spend()
        hit = await m.generate(_msgs("cached question"), cfg, step="s")
        assert hit.cached and budget.spend() == after_first
        with pytest.raises(BudgetExhausted):  # a call far above the cap: reached
            await m.generate(_msgs("new"), GenerateConfig(max_tokens=50_000), step="s")
        again = await m.generate(_msgs("cached question"), cfg, step="s")
        assert again.cached and srv.count == 1
        await m.aclose()
        cache.close()

    with FakeOpenAIServer(responder=lambda _req: "ok") as srv:
        asyncio.run(go(srv))


def test_a_failed_call_gives_its_reservation_back() -> None:
    budget = Budget(max_tokens=10_000)

    async def go(srv: FakeOpenAIServer) -> None:
        from veritrail.lm.base import ProviderError
        from veritrail.testing import Fault, FaultKind

        m = _model(srv, budget)
        srv.inject(Fault(FaultKind.FORBIDDEN))
        with pytest.raises(ProviderError):
            await m.generate(_msgs("q"), GenerateConfig(max_tokens=20), step="s")
        spent = budget.spend()
        assert spent.reserved_tokens == 0 and spent.tokens == 0 and budget.reached is None
        await m.aclose()

    with FakeOpenAIServer(responder=lambda _req: "ok") as srv:
        asyncio.run(go(srv))


def test_a_dollar_cap_needs_a_price() -> None:
    with pytest.raises(NoPriceError, match="no price known for openai/x: use --max-tokens"):
        check_priced("openai/x", None, Budget(max_cost=1.0))
    check_priced("openai/x", None, Budget(max_tokens=10))  # a token cap needs no price
    check_priced("openai/x", Price(0, 0), Budget(max_cost=1.0))  # free models are priced
    check_priced("openai/x", None, None)


# -- the bound, as a property ---------------------------------------------------------------------

_call = st.tuples(
    st.integers(min_value=1, max_value=3000),  # prompt characters
    st.one_of(st.none(), st.integers(min_value=1, max_value=2000)),  # reply limit
    st.integers(min_value=0, max_value=4000),  # prompt tokens the provider reports
    st.integers(min_value=0, max_value=4000),  # reply tokens the provider reports
    st.booleans(),  # the call fails (its reservation is given back)
)


@settings(max_examples=300, deadline=None)
@given(
    calls=st.lists(_call, max_size=40),
    order=st.randoms(use_true_random=False),
    cap_tokens=st.one_of(st.none(), st.integers(min_value=0, max_value=40_000)),
    cap_cost=st.one_of(st.none(), st.floats(min_value=0, max_value=50.0)),
    in_flight=st.integers(min_value=1, max_value=8),
)
def test_the_counted_spend_stays_within_the_bound(
    calls: list[tuple[int, int | None, int, int, bool]],
    order: object,
    cap_tokens: int | None,
    cap_cost: float | None,
    in_flight: int,
) -> None:
    """Whatever the calls report and in whatever order they finish (up to `in_flight` at once),
    the counted spend never exceeds the cap by more than the settled calls' excess over their
    reservations: ``spent <= cap + sum(max(0, actual - reserved))``. So a call within its
    reservation (reply limit kept, prompt within the estimate) never takes the spend past the
    cap. A call is refused only when the spend plus its own reservation passes the cap (within
    one call's reservation of it); one that must wait does so only while calls are in flight.
    Once a call is refused, every later one is."""
    import random

    rng = order if isinstance(order, random.Random) else random.Random(0)
    budget = Budget(max_cost=cap_cost, max_tokens=cap_tokens)
    flying: list[tuple[Reservation, int, int, bool]] = []
    excess_tokens = 0
    excess_dollars = 0.0

    def finish_one() -> None:
        nonlocal excess_tokens, excess_dollars
        r, tin, tout, fails = flying.pop(rng.randrange(len(flying)))
        if fails:
            budget.release(r)
            return
        dollars = PRICE.dollars(tin, tout)
        budget.settle(r, tin, tout, dollars)
        excess_tokens += max(0, tin + tout - r.tokens)
        excess_dollars += max(0.0, dollars - r.dollars)

    for chars, limit, tin, tout, fails in calls:
        while len(flying) >= in_flight:
            finish_one()
        was_reached = budget.reached is not None
        msgs = _msgs("x" * chars)
        got: Reservation | None = None
        while True:
            own, before = budget.estimate(msgs, limit, PRICE), budget.spend()
            try:
                got = budget.try_reserve(msgs, limit, PRICE)
            except BudgetExhausted:
                assert budget.reached is not None
                if not was_reached:  # refused only when its own reservation cannot fit the spend
                    assert (cap_tokens is not None and before.tokens + own.tokens > cap_tokens) or (
                        cap_cost is not None and before.dollars + own.dollars > cap_cost + 1e-12
                    )
                break
            if got is not None:
                break
            # It fits only once calls in flight settle: one finishes, then it looks again.
            assert flying, "a call waits with nothing in flight to wait for"
            finish_one()
        if got is None:
            continue
        r = got
        assert not was_reached, "a call started after the budget was reached"
        flying.append((r, tin, tout, fails))
        spent = budget.spend()
        # What is spent plus what is reserved stays within the cap plus the excess so far.
        if cap_tokens is not None:
            assert spent.tokens + spent.reserved_tokens <= cap_tokens + excess_tokens
        if cap_cost is not None:
            assert spent.dollars + spent.reserved_dollars <= cap_cost + excess_dollars + 1e-9
    while flying:
        finish_one()
    spent = budget.spend()
    if cap_tokens is not None:
        assert spent.tokens <= cap_tokens + excess_tokens
    if cap_cost is not None:
        assert spent.dollars <= cap_cost + excess_dollars + 1e-9
    assert spent.reserved_tokens == 0
