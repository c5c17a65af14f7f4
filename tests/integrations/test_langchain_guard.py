"""`GuardRunnable` with the real langchain-core: its own fake chat model (`FakeListChatModel`)
generates the answer, `demo/overlap` or the loopback server (word-overlap rules) judges it.
The time-out path holds the server's replies until the guard has returned: no sleep races the
machine's load."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel

import veritrail as vt
from veritrail.integrations.langchain_guard import GuardRunnable
from veritrail.lm.overlap import responder as overlap
from veritrail.testing import FakeOpenAIServer

SOURCE = "The Harbour Museum opened in 1921. It was founded by Marta Reyes."
GOOD = "The Harbour Museum opened in 1921. Marta Reyes founded it."
MIXED = "The Harbour Museum opened in 1921. It has a roof garden."
PROMPT = ChatPromptTemplate.from_messages([("human", "{question}")])
DEMO: dict[str, Any] = {"model": "demo/overlap", "cache": "off", "budget_ms": 60_000}


def _chain(answer: str) -> Any:
    return PROMPT | FakeListChatModel(responses=[answer]) | StrOutputParser()


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with FakeOpenAIServer(responder=overlap) as srv:
        try:
            yield srv
        finally:
            srv.release()


def test_a_supported_answer_goes_through_and_an_unsupported_one_is_blocked() -> None:
    seen: list[vt.GuardResult] = []
    guard = GuardRunnable(vt.aguard, sources=SOURCE, on_result=seen.append, **DEMO)
    assert (_chain(GOOD) | guard).invoke({"question": "When?"}) == GOOD
    with pytest.raises(vt.GuardBlocked, match="1 of 2 claims not supported") as err:
        (_chain(MIXED) | guard).invoke({"question": "When?"})
    assert [c.text for c in err.value.result.claims if c.status == "unsupported"] == [
        "It has a roof garden."
    ]
    assert [r.outcome for r in seen] == ["supported", "unsupported"]


def test_a_fallback_answers_when_the_guard_blocks() -> None:
    guard = GuardRunnable(vt.aguard, sources=SOURCE, **DEMO)
    safe: RunnableLambda[Any, str] = RunnableLambda(
        lambda _: "I cannot answer that from the sources."
    )
    chain = (_chain(MIXED) | guard).with_fallbacks([safe], exceptions_to_handle=(vt.GuardBlocked,))
    assert chain.invoke({"question": "When?"}) == "I cannot answer that from the sources."


async def test_answer_and_documents_from_a_parallel_step() -> None:
    docs = [Document(page_content=SOURCE, metadata={"source": "museum.txt"})]
    seen: list[vt.GuardResult] = []
    chain = RunnableParallel(
        answer=_chain(GOOD), sources=RunnableLambda(lambda _: docs)
    ) | GuardRunnable(vt.aguard, on_result=seen.append, **DEMO)
    assert await chain.ainvoke({"question": "When?"}) == GOOD
    assert seen[0].outcome == "supported" and len(seen[0].claims) == 2


async def test_a_stream_passes_its_chunks_under_pass() -> None:
    guard = GuardRunnable(vt.aguard, sources=SOURCE, on_timeout="pass", **DEMO)
    chunks = [c async for c in (_chain(GOOD) | guard).astream({"question": "When?"})]
    assert len(chunks) > 1 and "".join(chunks) == GOOD  # FakeListChatModel streams characters
    got: list[str] = []
    with pytest.raises(vt.GuardBlocked):
        for c in (_chain(MIXED) | guard).stream({"question": "When?"}):
            got.append(c)
    assert "".join(got) == MIXED  # passed through, then the verdict


def test_a_stream_is_held_under_block_until_verified() -> None:
    guard = GuardRunnable(vt.aguard, sources=SOURCE, on_timeout="block", **DEMO)
    ok = list((_chain(GOOD) | guard).stream({"question": "When?"}))
    assert len(ok) > 1 and "".join(ok) == GOOD
    got: list[str] = []
    with pytest.raises(vt.GuardBlocked):
        for c in (_chain(MIXED) | guard).stream({"question": "When?"}):
            got.append(c)
    assert got == []  # held: nothing reached the user


async def test_a_time_out_blocks_or_passes_with_the_loopback_judge(
    loopback: FakeOpenAIServer,
) -> None:
    judge: dict[str, Any] = {
        "model": "openai/loopback",
        "base_url": loopback.base_url,
        "cache": "off",
    }
    loopback.hold()  # no reply before the guard has returned
    seen: list[vt.GuardResult] = []
    passing = GuardRunnable(
        vt.aguard, sources=SOURCE, budget_ms=200, on_timeout="pass", on_result=seen.append, **judge
    )
    assert await (_chain(GOOD) | passing).ainvoke({"question": "When?"}) == GOOD
    assert seen[-1].outcome == "unverified" and seen[-1].timed_out
    blocking = GuardRunnable(vt.aguard, sources=SOURCE, budget_ms=200, on_timeout="block", **judge)
    with pytest.raises(vt.GuardBlocked, match="time-out") as err:
        await (_chain(GOOD) | blocking).ainvoke({"question": "When?"})
    assert err.value.result.outcome == "blocked"


def test_bad_input_is_a_type_error() -> None:
    guard = GuardRunnable(vt.aguard, **DEMO)
    with pytest.raises(TypeError, match="no sources"):
        guard.invoke("An answer.")
    with pytest.raises(TypeError, match="'answer' key"):
        guard.invoke({"sources": SOURCE})


def test_importing_veritrail_does_not_import_langchain() -> None:
    import subprocess
    import sys

    code = "import sys, veritrail; veritrail.guard; print('langchain_core' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
