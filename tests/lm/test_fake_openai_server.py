"""The loopback fake server itself: protocol, counters, latency overlap and every fault."""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from typing import Any

import openai
import pytest

from veritrail.testing import FakeOpenAIServer, Fault, FaultKind


def _post(srv: FakeOpenAIServer, body: dict[str, Any], path: str = "/v1/chat/completions"):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


def test_reply_shape_usage_and_counting() -> None:
    seen: list[dict[str, Any]] = []

    def responder(req: dict[str, Any]) -> str:
        seen.append(req)
        return "hello there"

    with FakeOpenAIServer(responder) as srv:
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
        for path in ("/v1/chat/completions", "/chat/completions"):
            status, _, data = _post(
                srv, {"model": "m", "messages": [{"role": "user", "content": "a b c"}]}, path
            )
            assert status == 200
            reply = json.loads(data)
            assert reply["choices"][0]["message"]["content"] == "hello there"
            assert reply["usage"]["prompt_tokens"] == 3
            assert reply["usage"]["completion_tokens"] == 2
        assert srv.count == 2
        assert [r["model"] for r in srv.requests] == ["m", "m"]
        assert len(seen) == 2


async def test_sixty_four_concurrent_requests_overlap() -> None:
    with FakeOpenAIServer(latency=0.2) as srv:
        client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
        t0 = time.perf_counter()
        replies = await asyncio.gather(
            *[
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": f"q{i}"}]
                )
                for i in range(64)
            ]
        )
        elapsed = time.perf_counter() - t0
        await client.close()
    assert all(r.choices[0].message.content == "ok" for r in replies)
    assert srv.count == 64
    assert srv.max_in_flight >= 32  # the threads overlap: serialised would take 12.8 s
    assert elapsed < 5


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        (Fault.rate_limit(), 429),
        (Fault.rate_limit(retry_after=3), 429),
        (Fault.server_error(), 500),
        (Fault.unavailable(), 503),
        (Fault.reject_format(), 400),
    ],
)
def test_status_faults(fault: Fault, status: int) -> None:
    with FakeOpenAIServer() as srv:
        srv.inject(fault)
        got, headers, _ = _post(srv, {"model": "m", "messages": []})
        assert got == status
        assert headers.get("Retry-After") == (
            None if fault.retry_after is None else str(int(fault.retry_after))
        )
        # The fault is consumed: the next request is answered normally.
        assert _post(srv, {"model": "m", "messages": []})[0] == 200
        assert srv.faults_served == [fault.kind]


def test_reset_truncated_prose_and_slow() -> None:
    with FakeOpenAIServer(lambda r: '{"a": 1}') as srv:
        srv.inject(Fault.reset())
        with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
            _post(srv, {"model": "m", "messages": []})
        srv.inject(Fault.truncated())
        status, _, data = _post(srv, {"model": "m", "messages": []})
        assert status == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(data)
        srv.inject(Fault.prose("just words"))
        data = _post(srv, {"model": "m", "messages": []})[2]
        assert json.loads(data)["choices"][0]["message"]["content"] == "just words"
        srv.inject(Fault.slow(0.3))
        t0 = time.perf_counter()
        data = _post(srv, {"model": "m", "messages": []})[2]
        assert time.perf_counter() - t0 >= 0.3
        assert json.loads(data)["choices"][0]["message"]["content"] == '{"a": 1}'
        assert srv.faults_served == [
            FaultKind.RESET,
            FaultKind.TRUNCATED,
            FaultKind.PROSE,
            FaultKind.SLOW,
        ]


def test_endpoint_without_json_schema_rejects_every_such_request() -> None:
    with FakeOpenAIServer(supports_json_schema=False) as srv:
        body = {"model": "m", "messages": [], "response_format": {"type": "json_schema"}}
        assert _post(srv, body)[0] == 400
        assert _post(srv, body)[0] == 400
        body["response_format"] = {"type": "json_object"}
        status, _, data = _post(srv, body)
        assert status == 200
        assert json.loads(data)["choices"][0]["message"]["content"] == "{}"


def test_responder_may_fail_one_request() -> None:
    def responder(req: dict[str, Any]) -> str | Fault:
        return Fault.server_error() if "bad" in req["messages"][0]["content"] else "fine"

    with FakeOpenAIServer(responder) as srv:
        assert (
            _post(srv, {"model": "m", "messages": [{"role": "user", "content": "bad"}]})[0] == 500
        )
        assert _post(srv, {"model": "m", "messages": [{"role": "user", "content": "ok"}]})[0] == 200


def _auth_post(srv: FakeOpenAIServer, key: str) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    body = json.dumps({"model": "gpt-x", "messages": []})
    conn.request(
        "POST",
        "/v1/chat/completions",
        body,
        {"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    return resp.status, data


def test_endpoint_refusals() -> None:
    with FakeOpenAIServer() as srv:
        srv.inject(
            Fault.unauthorized(echo_key=True),
            Fault.unauthorized(),
            Fault.forbidden(),
            Fault.not_found_model(),
            Fault.insufficient_quota(),
        )
        status, data = _auth_post(srv, "sk-the-key")
        assert status == 401 and "sk-the-key" in data["error"]["message"]
        assert data["error"]["code"] == "invalid_api_key"
        status, data = _auth_post(srv, "sk-the-key")
        assert status == 401 and "sk-the-key" not in data["error"]["message"]
        assert _auth_post(srv, "k")[0] == 403
        status, data = _auth_post(srv, "k")
        assert status == 404 and data["error"]["code"] == "model_not_found"
        assert "gpt-x" in data["error"]["message"]
        status, data = _auth_post(srv, "k")
        assert status == 429 and data["error"]["code"] == "insufficient_quota"


def test_unreadable_reply_kinds() -> None:
    with FakeOpenAIServer(lambda r: '{"verdict": "Fully Supported"}') as srv:
        srv.inject(Fault.truncated_content(), Fault.empty())
        first = json.loads(_post(srv, {"model": "m", "messages": []})[2])
        assert first["choices"][0]["message"]["content"] == '{"verdict": "Fu'  # a whole body
        second = json.loads(_post(srv, {"model": "m", "messages": []})[2])
        assert second["choices"][0]["message"]["content"] == ""
        assert srv.faults_served == [FaultKind.TRUNCATED_CONTENT, FaultKind.EMPTY]


def test_random_fault_mix_is_seeded() -> None:
    mix = {Fault.rate_limit(0.5): 0.3, FaultKind.SERVER_ERROR: 0.2, FaultKind.EMPTY: 0.1}

    def served(seed: int) -> list[FaultKind]:
        with FakeOpenAIServer(fault_rates=mix, seed=seed) as srv:
            statuses = [_post(srv, {"model": "m", "messages": []})[0] for _ in range(60)]
            faults = srv.faults_served
        assert statuses.count(429) == faults.count(FaultKind.RATE_LIMIT)
        assert statuses.count(500) == faults.count(FaultKind.SERVER_ERROR)
        return faults

    a, b = served(7), served(7)
    assert a == b and 10 <= len(a) <= 50  # ~36 expected of 60
    assert served(8) != a
    with FakeOpenAIServer(fault_rates=mix, seed=1) as srv:
        srv.inject(Fault.forbidden())  # a queued fault comes first
        assert _post(srv, {"model": "m", "messages": []})[0] == 403
    with pytest.raises(ValueError, match="more than 1"):
        FakeOpenAIServer(fault_rates={FaultKind.RESET: 0.6, FaultKind.EMPTY: 0.6})
    with pytest.raises(ValueError, match="between 0 and 1"):
        FakeOpenAIServer(fault_rates={FaultKind.RESET: 1.5})


def test_hold_release_and_wait_for_requests() -> None:
    import threading

    with FakeOpenAIServer() as srv:
        srv.hold()
        assert srv.holding
        statuses: list[int] = []
        threads = [
            threading.Thread(
                target=lambda: statuses.append(_post(srv, {"model": "m", "messages": []})[0])
            )
            for _ in range(3)
        ]
        for t in threads:
            t.start()
        assert srv.wait_for_requests(3, timeout=10)
        assert statuses == []  # all three arrived, none answered
        assert not srv.wait_for_requests(4, timeout=0.05)
        srv.release()
        for t in threads:
            t.join(timeout=10)
        assert statuses == [200, 200, 200] and not srv.holding
        srv.reset_counters()
        assert srv.wait_for_requests(0, timeout=0)


def test_fault_draws_follow_the_request_not_its_arrival_order() -> None:
    # Concurrent clients send in a different order every run; a fault mix must still hit the
    # same requests, or a test under it is a race (test_fault_run.py was, before this).
    mix = {FaultKind.SERVER_ERROR: 0.5}
    bodies = [{"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(12)]

    def statuses(order: list[int]) -> dict[int, list[int]]:
        got: dict[int, list[int]] = {i: [] for i in order}
        with FakeOpenAIServer(fault_rates=mix, seed=3) as srv:
            for i in order:
                for _ in range(2):  # a body's second arrival draws anew
                    got[i].append(_post(srv, bodies[i])[0])
        return got

    forward = statuses(list(range(12)))
    assert forward == statuses(list(reversed(range(12))))
    assert {s for v in forward.values() for s in v} == {200, 500}
