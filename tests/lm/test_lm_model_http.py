"""The `Model` wrapper over `OpenAIProvider`, against the real loopback fake server.

Every injected fault must end in the right classified behaviour (retried or not), the
failures must be recorded, and calls that did not fail must finish.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from lm_helpers import FAST_RETRY

from veritrail.lm.base import (
    EndpointError,
    FatalError,
    GenerateConfig,
    Message,
    ProviderError,
    RateLimitError,
    ResponseFormat,
    TransientError,
    UnsupportedFormatError,
)
from veritrail.lm.cache import ResponseCache
from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.model import CallEvent, Model, claim_scope
from veritrail.lm.openai import OpenAIProvider
from veritrail.lm.pricing import Price, PriceTable
from veritrail.lm.retry import RetryPolicy
from veritrail.testing import FakeOpenAIServer, Fault, FaultKind

SECRET = "sk-test-DO-NOT-LEAK-4242"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
    "required": ["ids"],
    "additionalProperties": False,
}


def provider(srv: FakeOpenAIServer, model: str = "gpt-4o", timeout: float = 5.0) -> OpenAIProvider:
    return OpenAIProvider(model, base_url=srv.base_url, api_key=SECRET, timeout=timeout)


def model(
    srv: FakeOpenAIServer,
    caps: CapabilityStore,
    *,
    retry: RetryPolicy = FAST_RETRY,
    **kw: Any,
) -> Model:
    return Model(
        provider(srv, timeout=kw.pop("timeout", 5.0)), retry=retry, capabilities=caps, **kw
    )


def ask(text: str = "hello") -> list[Message]:
    return [Message("system", "You answer briefly."), Message("user", text)]


def ids_of(value: Any) -> list[int]:
    if not isinstance(value, dict) or not isinstance(value.get("ids"), list):
        raise ValueError("expected an object with an ids list")
    return [int(i) for i in value["ids"]]


async def test_plain_call_sends_request_and_accounts(
    server: FakeOpenAIServer, caps: CapabilityStore, transport: str
) -> None:
    server.responder = lambda req: "the answer"
    events: list[CallEvent] = []
    m = model(server, caps, on_call=events.append, prices=PriceTable({"gpt-4o": Price(1e6, 2e6)}))
    assert isinstance(m.provider, OpenAIProvider) and m.provider.http_client == transport
    with claim_scope("c1"):
        g = await m.generate(
            ask(), GenerateConfig(temperature=0.0, max_tokens=20, seed=7), step="verdict"
        )
    await m.aclose()
    assert (g.text, g.cached, g.attempts) == ("the answer", False, 1)
    req = server.requests[0]
    assert req["model"] == "gpt-4o"
    assert req["messages"][1] == {"role": "user", "content": "hello"}
    assert (req["max_tokens"], req["seed"], req["temperature"]) == (20, 7, 0.0)
    assert "response_format" not in req
    assert server.request_headers[0]["authorization"] == f"Bearer {SECRET}"
    cost = m.usage.for_claim("c1")["verdict"]
    assert (cost.lm_calls, cost.cached_calls) == (1, 0)
    assert cost.input_tokens == g.input_tokens > 0 and cost.output_tokens == g.output_tokens == 2
    assert cost.dollars == pytest.approx(g.input_tokens * 1 + 2 * 2)
    assert events == [CallEvent("verdict", "c1", False, 1, g.input_tokens, 2, cost.dollars)]


@pytest.mark.parametrize(
    "fault",
    [
        Fault.rate_limit(),
        Fault.rate_limit(retry_after=0.2),
        Fault.server_error(),
        Fault.unavailable(),
        Fault.reset(),
        Fault.slow(4.0),
        Fault.truncated(),
    ],
    ids=lambda f: f"{f.kind.value}{'' if f.retry_after is None else '+retry_after'}",
)
async def test_retryable_faults_are_retried_then_succeed(
    server: FakeOpenAIServer, caps: CapabilityStore, fault: Fault, transport: str
) -> None:
    server.inject(fault, fault)
    m = model(server, caps, timeout=1.5)
    t0 = time.perf_counter()
    g = await m.generate(ask(), step="evidence")
    elapsed = time.perf_counter() - t0
    await m.aclose()
    assert g.text == "ok"
    assert g.attempts == 3
    assert server.count == 3
    assert server.faults_served == [fault.kind, fault.kind]
    assert m.stats.retries == 2 and m.stats.failures == 0
    # Accounting counts the method's one call, not the transport's three.
    assert m.usage.total().lm_calls == 1
    if fault.retry_after is not None:
        assert elapsed >= 2 * fault.retry_after  # Retry-After honoured on both retries


async def test_exhausted_retries_raise_the_last_classified_error(
    server: FakeOpenAIServer, caps: CapabilityStore
) -> None:
    server.inject(*[Fault.unavailable()] * 10)
    events: list[CallEvent] = []
    m = model(server, caps, on_call=events.append)
    with claim_scope("c9"), pytest.raises(TransientError) as info:
        await m.generate(ask(), step="evidence")
    await m.aclose()
    assert info.value.status == 503 and info.value.attempts == FAST_RETRY.max_attempts
    assert server.count == FAST_RETRY.max_attempts
    assert "503" in str(info.value)
    assert m.stats.failures == 1
    assert events[-1].error is not None and events[-1].claim == "c9"
    assert m.usage.total().lm_calls == 0  # nothing was answered


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, FatalError), (401, EndpointError), (403, EndpointError), (404, EndpointError)],
)
async def test_fatal_statuses_are_not_retried(
    caps: CapabilityStore, status: int, error: type[ProviderError], transport: str
) -> None:
    import http.server
    import threading

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.dumps(
                {"error": {"message": "nope", "type": "invalid_request_error"}}
            ).encode()
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            return None

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    try:
        p = OpenAIProvider(
            "m", base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", api_key="k"
        )
        m = Model(p, retry=FAST_RETRY, capabilities=caps)
        with pytest.raises(error) as info:
            await m.generate(ask(), step="s")
        assert info.value.attempts == 1 and info.value.status == status
        assert type(info.value) is error
        await m.aclose()
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_rate_limit_without_quota_is_fatal_not_retried(caps: CapabilityStore) -> None:
    import httpx2
    import openai

    from veritrail.lm.openai import _classify_status  # the mapping, on a real SDK error

    req = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    resp = httpx2.Response(429, request=req, headers={"retry-after": "4"})
    quota = openai.RateLimitError(
        "quota", response=resp, body={"error": {"message": "quota", "code": "insufficient_quota"}}
    )
    limit = openai.RateLimitError("slow", response=resp, body={"error": {"message": "slow"}})
    url = "http://127.0.0.1/v1"
    fatal = _classify_status(quota, url, structured=False)
    assert type(fatal) is EndpointError and fatal.endpoint == url and fatal.status == 429
    err = _classify_status(limit, url, structured=False)
    assert isinstance(err, RateLimitError) and err.retry_after == 4.0


async def test_one_failing_claim_does_not_stop_the_others(
    server: FakeOpenAIServer, caps: CapabilityStore
) -> None:
    def responder(req: dict[str, Any]) -> str | Fault:
        text = req["messages"][-1]["content"]
        return Fault.server_error() if "claim-3" in text else f"answer to {text}"

    server.responder = responder
    server.latency = 0.05
    m = model(server, caps, concurrency=4)

    async def run(i: int) -> str:
        with claim_scope(f"c{i}"):
            g = await m.generate(ask(f"claim-{i}"), step="evidence")
            return g.text

    results = await asyncio.gather(*(run(i) for i in range(8)), return_exceptions=True)
    await m.aclose()
    assert isinstance(results[3], TransientError)
    assert [r for i, r in enumerate(results) if i != 3] == [
        f"answer to claim-{i}" for i in range(8) if i != 3
    ]
    for i in range(8):
        cost = m.usage.for_claim(f"c{i}")
        assert (cost["evidence"].lm_calls if cost else 0) == (0 if i == 3 else 1)
    assert server.count == 7 + FAST_RETRY.max_attempts


async def test_concurrency_limit_is_respected_at_the_server(
    server: FakeOpenAIServer, caps: CapabilityStore
) -> None:
    server.latency = 0.1
    m = model(server, caps, concurrency=3)
    await asyncio.gather(*(m.generate(ask(f"q{i}"), step="s") for i in range(12)))
    await m.aclose()
    assert server.count == 12
    assert server.max_in_flight == 3


async def test_json_schema_rejection_falls_back_and_is_remembered(caps: CapabilityStore) -> None:
    with FakeOpenAIServer(lambda req: '{"ids": [2, 5]}', supports_json_schema=False) as srv:
        m = model(srv, caps)
        r1 = await m.generate_json(ask("pick"), schema=SCHEMA, step="evidence", validate=ids_of)
        r2 = await m.generate_json(
            ask("pick again"), schema=SCHEMA, step="evidence", validate=ids_of
        )
        await m.aclose()
        reqs = srv.requests
    assert (r1.value, r1.error, r1.response_format) == ([2, 5], None, ResponseFormat.JSON_OBJECT)
    assert r2.value == [2, 5]
    # Detection costs one rejected request, once; the second call goes straight to json_object.
    assert [r["response_format"]["type"] for r in reqs] == [
        "json_schema",
        "json_object",
        "json_object",
    ]
    # Without json_schema, the schema travels in the prompt instead.
    assert '"ids"' in reqs[1]["messages"][-1]["content"]
    assert caps.best(m.endpoint) is ResponseFormat.JSON_OBJECT
    assert any("json_schema" in n for n in m.notes)


async def test_json_schema_request_shape(server: FakeOpenAIServer, caps: CapabilityStore) -> None:
    server.responder = lambda req: '{"ids": [1]}'
    m = model(server, caps)
    r = await m.generate_json(ask(), schema=SCHEMA, step="evidence", validate=ids_of)
    await m.aclose()
    rf = server.requests[0]["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["schema"] == SCHEMA and rf["json_schema"]["strict"] is True
    assert r.value == [1] and r.response_format is ResponseFormat.JSON_SCHEMA


async def test_no_structured_mode_at_all_falls_back_to_text(caps: CapabilityStore) -> None:
    with FakeOpenAIServer(
        lambda req: 'Sure! ```json\n{"ids": [4],}\n```',
        supports_json_schema=False,
        supports_json_object=False,
    ) as srv:
        m = model(srv, caps)
        r = await m.generate_json(ask(), schema=SCHEMA, step="evidence", validate=ids_of)
        await m.aclose()
        fmts = [(q.get("response_format") or {}).get("type") for q in srv.requests]
    assert fmts == ["json_schema", "json_object", None]
    assert r.value == [4] and r.response_format is ResponseFormat.TEXT


async def test_prose_reply_is_reasked_then_recorded_not_raised(
    server: FakeOpenAIServer, caps: CapabilityStore
) -> None:
    server.inject(Fault.prose("I think sentences two and five."), Fault.prose("Still prose."))
    m = model(server, caps, max_reasks=1)
    r = await m.generate_json(ask("pick"), schema=SCHEMA, step="evidence", validate=ids_of)
    await m.aclose()
    assert r.value is None
    assert r.error is not None and "JsonReplyError" in r.error
    assert r.raw == "Still prose."
    assert r.attempts == 2 and server.count == 2
    reask = server.requests[1]["messages"]
    assert reask[-2] == {"role": "assistant", "content": "I think sentences two and five."}
    assert "could not be read" in reask[-1]["content"]


async def test_reask_recovers(server: FakeOpenAIServer, caps: CapabilityStore) -> None:
    server.responder = lambda req: '{"ids": [3]}'
    server.inject(Fault.prose())
    m = model(server, caps)
    r = await m.generate_json(ask(), schema=SCHEMA, step="evidence", validate=ids_of)
    await m.aclose()
    assert (r.value, r.error, r.attempts) == ([3], None, 2)


async def test_validation_failure_is_an_outcome(
    server: FakeOpenAIServer, caps: CapabilityStore
) -> None:
    server.responder = lambda req: '{"idz": [3]}'
    m = model(server, caps, max_reasks=2)
    r = await m.generate_json(ask(), schema=SCHEMA, step="evidence", validate=ids_of)
    await m.aclose()
    assert r.value is None and r.error is not None and "ValueError" in r.error
    assert server.count == 3


async def test_cache_second_run_makes_no_requests(tmp_path: Path, caps: CapabilityStore) -> None:
    path = tmp_path / "cache.sqlite"

    async def run(srv: FakeOpenAIServer, model_name: str, prompt: str) -> list[Any]:
        m = Model(
            OpenAIProvider(model_name, base_url=srv.base_url, api_key=SECRET),
            cache=ResponseCache(path),
            retry=FAST_RETRY,
            capabilities=caps,
        )
        out: list[Any] = []
        with claim_scope("c1"):
            out.append((await m.generate(ask(prompt), step="decompose")).text)
            r = await m.generate_json(ask(prompt), schema=SCHEMA, step="evidence", validate=ids_of)
            out.append((r.value, r.cached))
        out.append(m.usage.for_claim("c1"))
        await m.aclose()
        return out

    n = {"i": 0}

    def responder(req: dict[str, Any]) -> str:
        n["i"] += 1
        return json.dumps({"ids": [n["i"]]})

    with FakeOpenAIServer(responder) as srv:
        first = await run(srv, "gpt-4o", "p")
        assert srv.count == 2
        second = await run(srv, "gpt-4o", "p")
        assert srv.count == 2  # zero HTTP requests the second time
        assert second[:1] == first[:1] and second[1] == (first[1][0], True)
        cost1, cost2 = first[2], second[2]
        assert cost2["evidence"].cached_calls == cost2["evidence"].lm_calls == 1
        assert cost2["evidence"].input_tokens == cost1["evidence"].input_tokens
        assert cost2["evidence"].dollars == 0.0 < cost1["evidence"].dollars
        await run(srv, "gpt-4o-mini", "p")  # another model: misses
        assert srv.count == 4
        await run(srv, "gpt-4o", "p, edited")  # another prompt: misses
        assert srv.count == 6
        # Another base URL for the same model is the same work: hits.
        with FakeOpenAIServer(responder) as mirror:
            await run(mirror, "gpt-4o", "p")
            assert mirror.count == 0
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert SECRET.encode() not in raw
    assert b"127.0.0.1" not in raw


async def test_failures_and_empty_replies_are_not_cached(
    tmp_path: Path, caps: CapabilityStore
) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer(lambda req: "") as srv:
        srv.inject(*[Fault.server_error()] * 4)
        m = Model(provider(srv), cache=cache, retry=FAST_RETRY, capabilities=caps)
        with pytest.raises(TransientError):
            await m.generate(ask(), step="s")
        assert (await m.generate(ask(), step="s")).text == ""
        assert cache.stats().entries == 0
        await m.aclose()


async def test_unsupported_format_from_plain_call_is_fatal(caps: CapabilityStore) -> None:
    with FakeOpenAIServer(supports_json_object=False) as srv:
        m = model(srv, caps)
        with pytest.raises(UnsupportedFormatError):
            await m.generate(
                ask(), GenerateConfig(response_format=ResponseFormat.JSON_OBJECT), step="s"
            )
        assert srv.count == 1 and srv.faults_served == [FaultKind.REJECT_FORMAT]
        await m.aclose()


async def test_http_proxy_from_the_environment_is_used(
    server: FakeOpenAIServer,
    caps: CapabilityStore,
    transport: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The fake server doubles as an HTTP proxy; the endpoint's host does not exist, so the reply
    # can only have come through the proxy (nothing leaves the loopback interface).
    proxy = f"http://127.0.0.1:{server.port}"
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, proxy)
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    server.responder = lambda req: "via proxy"
    p = OpenAIProvider("gpt-4o", base_url="http://llm.veritrail-test.invalid/v1", api_key=SECRET)
    m = Model(p, retry=FAST_RETRY, capabilities=caps)
    g = await m.generate(ask(), step="verdict")
    await m.aclose()
    assert g.text == "via proxy"
    assert server.proxied == 1 and server.count == 1


@pytest.mark.slow
@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
async def test_a_budget_above_the_sdks_pool_size_reaches_the_server(
    client: str, caps: CapabilityStore
) -> None:
    # The SDK's default pool holds 1,000 connections: a larger budget was silently capped there
    # (seen in benchmarks/bench_batch.py: 1,000 in flight for a budget of 1,024). Every call is
    # held at the server until all of them have arrived, so nothing here depends on timing.
    n = 1_020
    with FakeOpenAIServer() as srv:
        srv.hold()
        p = OpenAIProvider(
            "gpt-4o", base_url=srv.base_url, api_key=SECRET, timeout=120, http_client=client
        )
        m = Model(p, retry=FAST_RETRY, capabilities=caps, concurrency=n)
        calls = asyncio.gather(*(m.generate(ask(f"q{i}"), step="s") for i in range(n)))
        arrived = await asyncio.to_thread(srv.wait_for_requests, n, 120)
        srv.release()
        await calls
        await m.aclose()
        assert arrived and srv.max_in_flight == n
