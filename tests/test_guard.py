"""`veritrail.guard` / `aguard`: an answer verified within a latency budget, over the loopback
server answering with the word-overlap rules (or `demo/overlap` in-process for counted work).

The time-out path never races a sleep against the machine's load: the server holds its replies
(`FakeOpenAIServer.hold()`, or a responder that waits on an event) until the guard has returned,
so the deadline is certainly reached with calls in flight, however slow the machine is.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import veritrail as vt
from veritrail.lm.overlap import responder as overlap
from veritrail.run.guard import (
    ClaimStatus,
    GuardBlocked,
    GuardOutcome,
    aguard,
    aguard_stream,
    guard,
    guard_stream,
)
from veritrail.run.job import JobInputError
from veritrail.testing import FakeOpenAIServer

SOURCES = {"museum.txt": "The Harbour Museum opened in 1921. It was founded by Marta Reyes."}
GOOD = "The Harbour Museum opened in 1921. Marta Reyes founded it."
MIXED = "The Harbour Museum opened in 1921. It has a roof garden."
# What a guard's time-out may add to the budget on a loaded machine: cancelling the calls in
# flight and closing the model's connections (measured: a few ms; stated in docs/api.md).
BOUND_MS = 1000


@pytest.fixture(autouse=True, scope="module")
def _warm() -> None:
    """What a server does at start-up (docs/api.md): import the guard and the model's client
    before the first request, whose budget must not pay for imports (the OpenAI SDK alone takes
    seconds on a cold process)."""
    importlib.import_module("veritrail.lm.openai")


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeOpenAIServer]:
    monkeypatch.chdir(tmp_path)  # a guard writes nothing: the test checks this folder stays empty
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    for var in ("VERITRAIL_MODEL", "VERITRAIL_BASE_URL", "VERITRAIL_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    with FakeOpenAIServer(responder=overlap) as srv:
        try:
            yield srv
        finally:
            srv.release()


def _on(srv: FakeOpenAIServer) -> dict[str, Any]:
    return {"model": "openai/loopback", "base_url": srv.base_url, "cache": "off"}


def test_supported_and_unsupported_answers(loopback: FakeOpenAIServer, tmp_path: Path) -> None:
    good = guard(GOOD, SOURCES, budget_ms=20_000, **_on(loopback))
    assert good.outcome is GuardOutcome.SUPPORTED and good.allowed and good.verified
    assert [c.status for c in good.claims] == [ClaimStatus.SUPPORTED] * 2
    assert good.reason is None and not good.timed_out
    assert good.lm_calls == loopback.count > 0

    mixed = guard(MIXED, SOURCES, budget_ms=20_000, **_on(loopback))
    assert mixed.outcome is GuardOutcome.UNSUPPORTED and not mixed.allowed
    assert [c.text for c in mixed.with_status(ClaimStatus.UNSUPPORTED)] == ["It has a roof garden."]
    assert [c.text for c in mixed.with_status(ClaimStatus.SUPPORTED)] == [
        "The Harbour Museum opened in 1921."
    ]
    assert list(tmp_path.iterdir()) == []  # no run directory, no report, no cache file


def test_counted_work_on_a_fixed_input() -> None:
    """The calls per guarded answer on a fixed input (demo/overlap: no time, no network). A
    sources-and-answer DAG is single-step: one round, its decomposition, evidence selection and
    verdict prompts shared by the claims (here one verdict call: the claim no evidence was found
    for needs none); extraction is batched (selection, disambiguation, decomposition: one call
    each). Claims given skip extraction."""
    extracted = guard(MIXED, SOURCES, model="demo/overlap", budget_ms=60_000, cache="off")
    assert extracted.lm_calls == 6 and len(extracted.claims) == 2
    given = guard(
        MIXED,
        SOURCES,
        claims=["The Harbour Museum opened in 1921.", "It has a roof garden."],
        model="demo/overlap",
        budget_ms=60_000,
        cache="off",
    )
    assert given.lm_calls == 3
    assert [c.status for c in given.claims] == [ClaimStatus.SUPPORTED, ClaimStatus.UNSUPPORTED]
    unshared = guard(
        MIXED,
        SOURCES,
        claims=["The Harbour Museum opened in 1921.", "It has a roof garden."],
        model="demo/overlap",
        budget_ms=60_000,
        cache="off",
        claims_per_prompt=1,
    )
    # The paper's one claim per prompt: decomposition, evidence and verdict per claim, less the
    # verdict of the claim no evidence was found for (judged without a call).
    assert unshared.lm_calls == 5


@pytest.mark.parametrize("policy", ["pass", "block"])
async def test_time_out_with_held_replies(loopback: FakeOpenAIServer, policy: str) -> None:
    loopback.hold()  # no reply before the guard has returned: the deadline is certainly reached
    result = await aguard(
        MIXED,
        SOURCES,
        claims=["The Harbour Museum opened in 1921.", "It has a roof garden."],
        budget_ms=300,
        on_timeout=policy,  # type: ignore[arg-type]
        **_on(loopback),
    )
    assert result.timed_out and not result.verified
    assert result.outcome is (GuardOutcome.UNVERIFIED if policy == "pass" else GuardOutcome.BLOCKED)
    assert result.allowed is (policy == "pass")
    assert [c.status for c in result.claims] == [ClaimStatus.NOT_DONE] * 2
    assert all("time-out" in c.reason for c in result.claims)
    assert result.reason == "time-out: not finished within 300 ms"
    assert 300 <= result.elapsed_ms < 300 + BOUND_MS
    # Cancelled cleanly: no task of the guard outlives it.
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_calls_in_flight_at_the_deadline_are_cancelled(loopback: FakeOpenAIServer) -> None:
    """The budget is ample for the first request to be sent (a few ms on loopback); the reply is
    held, so the call is certainly in flight at the deadline. Cancelled: the guard returns, no
    task of it is left, and the server sees the client go (its connection closed)."""
    loopback.hold()
    result = await aguard(MIXED, SOURCES, budget_ms=2000, on_timeout="block", **_on(loopback))
    assert loopback.count >= 1 and result.timed_out
    assert result.outcome is GuardOutcome.BLOCKED
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_time_out_while_extracting(loopback: FakeOpenAIServer) -> None:
    loopback.hold()
    result = await aguard(MIXED, SOURCES, budget_ms=200, on_timeout="block", **_on(loopback))
    assert result.outcome is GuardOutcome.BLOCKED and result.claims == ()
    assert result.reason == "time-out: not finished within 200 ms (while extracting claims)"
    assert asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
async def test_claims_finished_before_the_deadline_are_kept(loopback: FakeOpenAIServer) -> None:
    """One claim's calls are held (the responder waits on an event set after the guard
    returns); the other claim's are answered: it is judged, the held one is not done."""
    gate = threading.Event()

    def respond(request: dict[str, Any]) -> str:
        if "roof garden" in str(request.get("messages")):
            gate.wait(30)
        return overlap(request)

    loopback.responder = respond
    try:
        result = await aguard(
            MIXED,
            SOURCES,
            claims=["The Harbour Museum opened in 1921.", "It has a roof garden."],
            budget_ms=5000,  # a bound, not a sleep: the held claim ends it however fast the rest
            claims_per_prompt=1,
            **_on(loopback),
        )
    finally:
        gate.set()
    assert result.timed_out and result.outcome is GuardOutcome.UNVERIFIED
    assert [c.status for c in result.claims] == [ClaimStatus.SUPPORTED, ClaimStatus.NOT_DONE]
    assert result.claims[1].reason.startswith("time-out")


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
async def test_unsupported_found_before_the_deadline_is_said(loopback: FakeOpenAIServer) -> None:
    gate = threading.Event()

    def respond(request: dict[str, Any]) -> str:
        if "In 1921 the Harbour" in str(request.get("messages")):  # the held claim's calls
            gate.wait(30)
        return overlap(request)

    loopback.responder = respond
    try:
        result = await aguard(
            MIXED,
            SOURCES,
            claims=["In 1921 the Harbour Museum opened.", "It has a roof garden."],
            budget_ms=5000,
            on_timeout="pass",
            claims_per_prompt=1,
            **_on(loopback),
        )
    finally:
        gate.set()
    # One unsupported claim is enough: the answer is not allowed, whatever the policy.
    assert result.outcome is GuardOutcome.UNSUPPORTED and not result.allowed
    assert [c.status for c in result.claims] == [ClaimStatus.NOT_DONE, ClaimStatus.UNSUPPORTED]


async def test_a_model_object_is_reused_and_left_open() -> None:
    model = vt.get_model("demo/overlap", cache=False)
    try:
        first = await aguard(MIXED, SOURCES, model=model, budget_ms=60_000)
        second = await aguard(GOOD, SOURCES, model=model, budget_ms=60_000)
    finally:
        await model.aclose()
    assert (first.outcome, second.outcome) == (GuardOutcome.UNSUPPORTED, GuardOutcome.SUPPORTED)
    assert first.lm_calls == 6 and second.lm_calls == 6  # each counts its own calls


def test_a_dag_is_guarded_by_its_final_output() -> None:
    dag = vt.load_dag(Path(__file__).parents[1] / "examples" / "quickstart" / "dag.json")
    result = guard(
        dag=dag,
        claims=["Scrooge painted over Marley's name on the warehouse door."],
        model="demo/overlap",
        budget_ms=60_000,
        cache="off",
    )
    assert result.answer == dag.node(dag.terminal).text
    assert len(result.claims) == 1 and result.verified and not result.timed_out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"budget_ms": 0}, "budget_ms must be a positive number"),
        ({"on_timeout": "maybe"}, 'on_timeout must be "pass" or "block"'),
        ({"claims": "one text"}, "claims must be a list"),
        ({"sources": None}, "give the answer's sources"),
        ({"sources": {"a": 1}}, "must map str names to str texts"),
        ({"sources": 5}, "sources must be a text, a list of texts or a dict"),
        ({"answer": "   "}, "the answer is empty"),
        ({"q": -1}, "q"),
        ({"model": "nonsense"}, "nonsense"),
    ],
)
def test_bad_input_is_refused_before_any_call(
    loopback: FakeOpenAIServer, kwargs: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = {"answer": MIXED, "sources": SOURCES, **_on(loopback), **kwargs}
    with pytest.raises(JobInputError, match=message):
        guard(**args)
    assert loopback.count == 0


def test_a_model_object_is_refused_by_the_sync_forms() -> None:
    with pytest.raises(JobInputError, match="use aguard"):
        guard(MIXED, SOURCES, model=vt.get_model("demo/overlap", cache=False))
    with pytest.raises(JobInputError, match="use aguard_stream"):
        guard_stream(iter([MIXED]), SOURCES, model=vt.get_model("demo/overlap", cache=False))


# -- streamed answers -------------------------------------------------------------------------


def _chunks(text: str) -> list[str]:
    return [w + " " for w in text.split(" ")[:-1]] + [text.split(" ")[-1]]


def test_a_stream_passes_its_chunks_then_is_verified(loopback: FakeOpenAIServer) -> None:
    seen: list[tuple[str, int]] = []
    stream = guard_stream(iter(_chunks(MIXED)), SOURCES, budget_ms=20_000, **_on(loopback))
    for chunk in stream:
        seen.append((chunk, loopback.count))  # passed on before any model call
        assert stream.result is None
    assert "".join(c for c, _ in seen) == MIXED and {n for _, n in seen} == {0}
    assert stream.result is not None and stream.result.outcome is GuardOutcome.UNSUPPORTED


async def test_a_held_stream_gives_its_chunks_only_when_allowed(
    loopback: FakeOpenAIServer,
) -> None:
    async def gen(text: str) -> AsyncIterator[str]:
        for c in _chunks(text):
            yield c

    ok = aguard_stream(gen(GOOD), SOURCES, budget_ms=20_000, on_timeout="block", **_on(loopback))
    got = [c async for c in ok]
    assert got == _chunks(GOOD) and ok.result is not None and ok.result.allowed
    calls = loopback.count

    bad = aguard_stream(gen(MIXED), SOURCES, budget_ms=20_000, on_timeout="block", **_on(loopback))
    given: list[str] = []
    with pytest.raises(GuardBlocked, match="1 of 2 claims not supported") as err:
        async for c in bad:
            given.append(c)
    assert given == []  # held: nothing reached the user
    assert err.value.result.outcome is GuardOutcome.UNSUPPORTED and loopback.count > calls


async def test_a_held_stream_is_blocked_at_the_time_out(loopback: FakeOpenAIServer) -> None:
    async def gen() -> AsyncIterator[str]:
        for c in _chunks(GOOD):
            yield c

    loopback.hold()
    stream = aguard_stream(gen(), SOURCES, budget_ms=200, on_timeout="block", **_on(loopback))
    with pytest.raises(GuardBlocked, match="time-out") as err:
        async for _ in stream:
            pytest.fail("a blocked stream gives no chunk")
    assert err.value.result.outcome is GuardOutcome.BLOCKED
    assert err.value.exit_code == 3
    assert asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.parametrize("policy", ["pass", "block"])
def test_a_model_failure_is_answered_as_a_time_out_is(
    loopback: FakeOpenAIServer, policy: str
) -> None:
    """A bad key (the server echoes it in its error) never raises out of a request path: the
    answer is unverified or blocked by the policy, the reason says why, without the key."""
    from veritrail.testing import Fault

    loopback.inject(*[Fault.unauthorized(echo_key=True)] * 4)
    result = guard(MIXED, SOURCES, budget_ms=20_000, on_timeout=policy, **_on(loopback))
    assert not result.timed_out and result.claims == ()
    assert result.outcome is (GuardOutcome.UNVERIFIED if policy == "pass" else GuardOutcome.BLOCKED)
    assert result.reason is not None and result.reason.startswith("claims could not be extracted")
    assert "sk-test-loopback" not in repr(result)


def test_a_spending_cap_is_kept_or_refused(loopback: FakeOpenAIServer) -> None:
    """`max_tokens=` caps the answer's calls (no call starts past it: unverified, by the
    policy); a dollar cap on a model with no known price is refused before any call."""
    capped = guard(MIXED, SOURCES, budget_ms=20_000, max_tokens=1, **_on(loopback))
    assert capped.outcome is GuardOutcome.UNVERIFIED and capped.reason is not None
    assert loopback.count == 0
    with pytest.raises(JobInputError, match="price"):
        guard(MIXED, SOURCES, budget_ms=20_000, max_cost=0.01, **_on(loopback))
    assert loopback.count == 0


async def test_a_cap_with_a_model_object_is_refused() -> None:
    model = vt.get_model("demo/overlap", cache=False)
    try:
        with pytest.raises(JobInputError, match=r"Model\.budget"):
            await aguard(MIXED, SOURCES, model=model, max_tokens=10)
    finally:
        await model.aclose()


def test_a_plugged_judge_is_used(tmp_path: Path) -> None:
    """`judge=` (docs/plugins.md) replaces the verdict step as in `check`: here one that calls
    everything supported, so the unsupported claim passes; a bad spec is refused."""
    (tmp_path / "lenient.py").write_text(
        "from veritrail.records import Verdict\n"
        "from veritrail.method.steps import VerdictOutcome\n"
        "class Lenient:\n"
        "    async def judge(self, claim, subclaims, evidence, *, sample=0):\n"
        "        return VerdictOutcome(Verdict.FULLY_SUPPORTED, 'lenient')\n",
        encoding="utf-8",
    )
    demo: dict[str, Any] = {"model": "demo/overlap", "cache": "off", "budget_ms": 60_000}
    # The sources name the roof garden too, so both claims find evidence to judge.
    sources = {**SOURCES, "notes.txt": "It has a garden."}
    result = guard(MIXED, sources, judge=f"{tmp_path / 'lenient.py'}:Lenient", **demo)
    assert [c.reason for c in result.claims] == ["lenient", "lenient"]
    assert result.outcome is GuardOutcome.SUPPORTED
    with pytest.raises(JobInputError, match="no step named"):
        guard(MIXED, SOURCES, judge="nope", **demo)
