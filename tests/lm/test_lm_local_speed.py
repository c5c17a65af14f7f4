"""The embedded model's speed levers (issue 19), without the weights: thread choice from the free
cores, slots fitted to memory, the prefix gate, and the start-up warnings. The llama.cpp server is
replaced by the loopback fake server (`LocalProvider._start_blocking` is the only seam), so the
HTTP path is the real one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from veritrail.lm import local, local_host
from veritrail.lm.base import GenerateConfig, Message
from veritrail.lm.local import (
    KV_MEMORY_SHARE,
    LocalProvider,
    PrefixGate,
    auto_threads,
    fit_parallel,
)
from veritrail.lm.registry import get_model
from veritrail.testing import FakeOpenAIServer

QWEN = "qwen2.5-coder-1.5b"


@pytest.mark.parametrize(
    ("cores", "load", "threads", "busy"),
    [
        (2, 0.0, 2, False),
        (2, 0.7, 2, False),  # a mostly idle machine keeps every core
        (2, 1.2, 1, True),  # one busy process beside us: one thread, not two fighting
        (2, 5.0, 1, True),  # never below one
        (8, 2.9, 6, True),
        (4, None, 4, False),  # no load average on this OS
        (4, float("nan"), 4, False),
    ],
)
def test_auto_threads(cores: int, load: float | None, threads: int, busy: bool) -> None:
    assert auto_threads(cores, load) == (threads, busy)


def test_fit_parallel_keeps_the_kv_cache_within_a_share_of_memory() -> None:
    per_slot = 8192 * 28_672  # one Qwen slot: 235 MB
    assert fit_parallel(4, 8192, 28_672, 64 * 10**9) == 4
    assert fit_parallel(4, 8192, 28_672, None) == 4
    memory = int(2.5 * per_slot / KV_MEMORY_SHARE)  # room for 2.5 slots
    assert fit_parallel(4, 8192, 28_672, memory) == 2
    assert fit_parallel(4, 8192, 28_672, 1000) == 1
    assert fit_parallel(0, 8192, 28_672, None) == 1


def test_threads_come_from_free_cores_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERITRAIL_THREADS", raising=False)
    monkeypatch.delenv("VERITRAIL_LOCAL_PARALLEL", raising=False)
    monkeypatch.setattr(local_host, "available_cores", lambda: 2)
    monkeypatch.setattr(local_host, "load_average", lambda: 1.4)
    monkeypatch.setattr(local_host, "runnable_others", lambda: 0)
    p = LocalProvider(QWEN)
    assert (p.threads, p.busy, p.load) == (1, True, 1.4)
    assert LocalProvider(QWEN, threads=2).threads == 2  # given: no auto, no busy warning
    assert not LocalProvider(QWEN, threads=2).busy
    monkeypatch.setenv("VERITRAIL_THREADS", "3")
    assert LocalProvider(QWEN).threads == 3


def test_a_busy_process_the_load_average_has_not_caught_up_with_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # /proc/loadavg: "1m 5m 15m runnable/total last-pid"; the runnable count includes the reader.
    reads = iter(["0.90 0.5 0.4 3/300 1", "0.90 0.5 0.4 2/300 1", "0.90 0.5 0.4 4/300 1"])
    assert local_host.runnable_others(lambda: next(reads), samples=3, interval=0) == 1  # lowest - 1
    assert local_host.runnable_others(lambda: "0.1 0.1 0.1 1/90 7", interval=0) == 0  # only us
    assert local_host.runnable_others(lambda: "garbled", interval=0) is None

    def unreadable() -> str:
        raise OSError("no /proc here")

    assert local_host.runnable_others(unreadable, interval=0) is None

    monkeypatch.setattr(local_host, "available_cores", lambda: 2)
    monkeypatch.delenv("VERITRAIL_THREADS", raising=False)
    monkeypatch.setattr(local_host, "load_average", lambda: 0.9)  # a busy process started 60 s ago
    monkeypatch.setattr(local_host, "runnable_others", lambda: 1)
    assert local_host.start_load() == 1.0
    p = LocalProvider(QWEN)
    assert (p.threads, p.busy) == (1, True)
    monkeypatch.setattr(local_host, "runnable_others", lambda: None)  # no /proc: the average alone
    monkeypatch.setattr(local_host, "load_average", lambda: None)
    assert local_host.start_load() is None and LocalProvider(QWEN).threads == 2


def test_model_concurrency_matches_the_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_host, "available_memory", lambda: 64 * 10**9)
    monkeypatch.delenv("VERITRAIL_LOCAL_PARALLEL", raising=False)
    model = get_model(f"local/{QWEN}", threads=1)
    assert isinstance(model.provider, LocalProvider)
    assert model.provider.parallel == local.DEFAULT_PARALLEL
    assert model.concurrency == local.DEFAULT_PARALLEL
    assert get_model(f"local/{QWEN}", threads=1, parallel=2).concurrency == 2
    monkeypatch.setenv("VERITRAIL_LOCAL_PARALLEL", "3")
    assert get_model(f"local/{QWEN}", threads=1).concurrency == 3
    assert get_model(f"local/{QWEN}", threads=1, concurrency=1).concurrency == 1


async def test_prefix_gate_holds_back_only_a_request_that_repeats_one_in_flight() -> None:
    gate = PrefixGate(min_chars=100, share=0.5)
    excerpts = "x" * 1000
    first_in = asyncio.Event()
    release_first = asyncio.Event()
    order: list[str] = []

    async def first() -> None:
        async with gate.hold(excerpts + "claim one"):
            order.append("first")
            first_in.set()
            await release_first.wait()

    async def second() -> None:
        async with gate.hold(excerpts + "claim two"):
            order.append("second")

    async def other() -> None:
        async with gate.hold("y" * 1000 + "claim three"):
            order.append("other")

    t1 = asyncio.create_task(first())
    await first_in.wait()
    t2 = asyncio.create_task(second())
    await other()  # shares nothing with the one in flight: passes at once
    for _ in range(5):
        await asyncio.sleep(0)  # let `second` run as far as it can
    assert order == ["first", "other"]  # `second` waits for `first`
    release_first.set()
    await asyncio.gather(t1, t2)
    assert order == ["first", "other", "second"]
    assert gate.waits == 1


async def test_prefix_gate_lets_a_shared_system_prompt_alone_through() -> None:
    gate = PrefixGate(min_chars=100, share=0.5)
    system = "s" * 200
    async with gate.hold(system + "a" * 1000):
        # 200 shared characters of 1,200: below half, so no wait.
        assert gate.blocker(system + "b" * 1000) is None
        assert gate.blocker(system + "a" * 900 + "c") is not None
    assert gate.blocker(system + "a" * 900 + "c") is None  # answered: nothing to wait for


async def test_local_provider_with_fake_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warnings at start, then calls through the prefix gate to a held server: the request that
    repeats the one in flight is sent only after that one's reply."""
    monkeypatch.setattr(local_host, "available_cores", lambda: 2)
    monkeypatch.setattr(local_host, "load_average", lambda: 3.0)
    monkeypatch.setattr(local_host, "runnable_others", lambda: 0)
    monkeypatch.delenv("VERITRAIL_THREADS", raising=False)
    warnings: list[str] = []
    with FakeOpenAIServer(responder=lambda req: '{"ok": true}') as srv:
        provider = LocalProvider(QWEN, parallel=4, warn=warnings.append)

        def fake_start() -> tuple[Any, str, str]:
            return object(), srv.base_url, "test-key"

        monkeypatch.setattr(provider, "_start_blocking", fake_start)
        shared = "Excerpts:\n" + "The mill stood by the river. " * 100
        cfg = GenerateConfig()

        def ask(tail: str) -> list[Message]:
            return [Message("system", "sys"), Message("user", shared + tail)]

        srv.hold()
        try:
            a = asyncio.create_task(provider.generate(ask("Claim: one"), cfg))
            assert await asyncio.to_thread(srv.wait_for_requests, 1)
            b = asyncio.create_task(provider.generate(ask("Claim: two"), cfg))
            c = asyncio.create_task(
                provider.generate([Message("user", "something else entirely")], cfg)
            )
            assert await asyncio.to_thread(srv.wait_for_requests, 2)  # `c` got through
            sent = [r["messages"][-1]["content"] for r in srv.requests]
            assert not any(s.endswith("Claim: two") for s in sent)  # `b` is held back
        finally:
            srv.release()
        outs = await asyncio.gather(a, b, c)
        assert [o.text for o in outs] == ['{"ok": true}'] * 3
        assert srv.requests[-1]["messages"][-1]["content"].endswith("Claim: two")
        assert provider.prefix_gate.waits == 1
        await provider.aclose()
    assert len(warnings) == 4
    assert "1 thread, 4 parallel slots" in warnings[0]
    assert "busy (load average 3.0 on 2 cores)" in warnings[1]
    assert "--threads" in warnings[1]
    # Then what it does while it starts, and when it is ready.
    assert warnings[2].startswith("veritrail: starting the embedded model local/qwen2.5-coder")
    assert warnings[3].startswith("veritrail: the embedded model is ready")
