"""Failures told apart, fatal endpoint errors remembered, secrets kept out of every message.

All HTTP goes to 127.0.0.1 (the fake server, a port nobody listens on); the DNS failure replaces
only the OS resolver for one made-up host name, so no DNS query leaves the machine.
"""

from __future__ import annotations

import asyncio
import base64
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from lm_helpers import FAST_RETRY

from veritrail.lm.base import EndpointError, FatalError, Message, TransientError
from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.model import CallEvent, Model
from veritrail.lm.openai import OpenAIProvider, check_base_url
from veritrail.lm.retry import RetryPolicy
from veritrail.redaction import MASK, redact
from veritrail.testing import FakeOpenAIServer, Fault

SECRET = "sk-test-ECHOED-KEY-7777"
ASK = [Message("user", "hello")]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy from the environment would change what a failed connection looks like."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def free_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`nohost.example` does not resolve; every other name goes to the real resolver."""
    host = "nohost.example"
    real = socket.getaddrinfo

    def getaddrinfo(name: Any, *args: Any, **kw: Any) -> Any:
        if name == host:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(name, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield host


def _model(url: str, *, timeout: float = 5.0, key: str = SECRET, **kw: Any) -> Model:
    return Model(
        OpenAIProvider("gpt-x", base_url=url, api_key=key, timeout=timeout),
        retry=kw.pop("retry", FAST_RETRY),
        capabilities=CapabilityStore(),
        **kw,
    )


async def _fail(m: Model) -> Exception:
    try:
        await m.generate(ASK, step="s")
    except Exception as exc:  # noqa: BLE001 - the test inspects whatever was raised
        return exc
    finally:
        await m.aclose()
    raise AssertionError("the call did not fail")


# -- causes, on both transports ------------------------------------------------------------------


async def test_refused_is_named_and_fails_fast(free_port: int, transport: str) -> None:
    url = f"http://127.0.0.1:{free_port}/v1"
    events: list[CallEvent] = []
    exc = await _fail(_model(url, on_call=events.append))
    assert isinstance(exc, TransientError) and exc.connect_failure
    assert exc.cause == f"cannot connect to {url} (connection refused)"
    assert "timeout" not in str(exc) and str(exc) == exc.cause
    # Retried, but only max_connect_attempts times, not the whole budget.
    assert exc.attempts == FAST_RETRY.max_connect_attempts < FAST_RETRY.max_attempts
    assert events[-1].error == f"TransientError: {exc.cause}"


async def test_dns_failure_is_named(fake_dns: str, transport: str) -> None:
    exc = await _fail(_model(f"http://{fake_dns}:8080/v1"))
    assert isinstance(exc, TransientError) and exc.connect_failure
    assert exc.cause == f"cannot resolve host {fake_dns} (DNS failure)"


async def test_tls_to_a_plain_http_server_is_fatal_and_named(
    server: FakeOpenAIServer, transport: str
) -> None:
    url = f"https://127.0.0.1:{server.port}/v1"
    m = _model(url)
    exc = await _fail(m)
    assert isinstance(exc, EndpointError) and exc.endpoint == url
    assert exc.cause.startswith(f"TLS failure talking to {url}: ")
    assert "wrong version number" in exc.cause and "_ssl.c" not in exc.cause
    assert m.fatal is exc


async def test_timeout_is_named(server: FakeOpenAIServer, transport: str) -> None:
    server.hold()  # the reply never comes before the client gives up
    try:
        exc = await _fail(_model(server.base_url, timeout=0.3, retry=RetryPolicy(max_attempts=1)))
    finally:
        server.release()
    assert isinstance(exc, TransientError) and not exc.connect_failure
    assert exc.cause == f"no reply from {server.base_url} within 0.3s (timeout)"


async def test_dropped_connection_is_named(server: FakeOpenAIServer, transport: str) -> None:
    server.inject(Fault.reset())
    exc = await _fail(_model(server.base_url, retry=RetryPolicy(max_attempts=1)))
    assert isinstance(exc, TransientError)
    assert exc.cause == f"connection to {server.base_url} dropped before a reply (connection reset)"


async def test_same_failure_same_cause_for_every_claim(free_port: int) -> None:
    url = f"http://127.0.0.1:{free_port}/v1"
    m = _model(url, retry=RetryPolicy(max_attempts=1))
    got: list[str] = []
    for _ in range(3):
        with pytest.raises(TransientError) as info:
            await m.generate(ASK, step="s")
        got.append(info.value.cause)
    await m.aclose()
    assert len(set(got)) == 1


async def test_server_error_cause_names_status_and_endpoint(
    server: FakeOpenAIServer, transport: str
) -> None:
    server.inject(Fault.server_error())
    exc = await _fail(_model(server.base_url, retry=RetryPolicy(max_attempts=1)))
    assert isinstance(exc, TransientError) and exc.status == 500
    assert exc.cause == f"HTTP 500 from {server.base_url}: The server had an error."


# -- fatal endpoint errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        (Fault.unauthorized(echo_key=True), 401),
        (Fault.forbidden(), 403),
        (Fault.not_found_model(), 404),
        (Fault.insufficient_quota(), 429),
    ],
)
async def test_endpoint_error_stops_every_later_call(
    server: FakeOpenAIServer, transport: str, fault: Fault, status: int
) -> None:
    server.inject(fault)
    m = _model(server.base_url)
    with pytest.raises(EndpointError) as info:
        await m.generate(ASK, step="s")
    first = info.value
    assert first.status == status and first.endpoint == server.base_url and first.attempts == 1
    assert first.cause.startswith(f"HTTP {status} from {server.base_url}: ")
    assert m.fatal is first
    # Nothing more reaches the server, in sequence or concurrently.
    for _ in range(3):
        with pytest.raises(EndpointError) as again:
            await m.generate(ASK, step="s")
        assert again.value is first
    results = await asyncio.gather(
        *(m.generate(ASK, step="s") for _ in range(5)), return_exceptions=True
    )
    assert all(r is first for r in results)
    assert server.count == 1
    await m.aclose()


async def test_echoed_key_never_reaches_a_message(server: FakeOpenAIServer, transport: str) -> None:
    server.inject(Fault.unauthorized(echo_key=True))
    events: list[CallEvent] = []
    m = _model(server.base_url, on_call=events.append)
    exc = await _fail(m)
    assert server.request_headers[0]["authorization"] == f"Bearer {SECRET}"  # it was sent
    for text in (str(exc), exc.cause if isinstance(exc, EndpointError) else "", events[-1].error):
        assert text and SECRET not in text
    assert f"Incorrect API key provided: {MASK}" in str(exc)


async def test_key_from_environment_is_redacted_too(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERITRAIL_API_KEY", "envkey-ABCDEF-123")
    server.inject(Fault.unauthorized(echo_key=True))
    m = Model(OpenAIProvider("gpt-x", base_url=server.base_url), retry=FAST_RETRY)
    exc = await _fail(m)
    assert "envkey-ABCDEF-123" not in str(exc) and MASK in str(exc)


@pytest.mark.parametrize(
    "url",
    [
        "localhost:8000/v1",
        "127.0.0.1:8000",
        "ftp://example.org/v1",
        "http:///v1",
        "http://exa mple.org/v1",
        "http://example.org:port/v1",
        "http://example.org/v1\n",
        "http://[::1/v1",
    ],
)
def test_malformed_base_url_is_an_endpoint_error_before_any_call(url: str) -> None:
    with pytest.raises(EndpointError, match="malformed base URL") as info:
        OpenAIProvider("gpt-x", base_url=url, api_key="k")
    assert info.value.status is None and info.value.cause == str(info.value)


def test_malformed_url_message_hides_credentials() -> None:
    with pytest.raises(EndpointError) as info:
        OpenAIProvider("gpt-x", base_url="http://user:hunter22pw@exa mple.org/v1", api_key="k")
    assert "hunter22pw" not in str(info.value) and "hunter22pw" not in info.value.endpoint


def test_good_base_urls_pass() -> None:
    assert check_base_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"
    assert check_base_url("HTTPS://api.example.org/v1") == "HTTPS://api.example.org/v1"


async def test_url_credentials_never_shown(free_port: int) -> None:
    url = f"http://alice:pa55word-xyz@127.0.0.1:{free_port}/v1"
    p = OpenAIProvider("gpt-x", base_url=url, api_key=SECRET)
    for text in (p.endpoint, p.url, repr(p)):
        assert "pa55word-xyz" not in text and SECRET not in text
    exc = await _fail(Model(p, retry=RetryPolicy(max_attempts=1)))
    assert isinstance(exc, TransientError)
    assert exc.cause == f"cannot connect to http://127.0.0.1:{free_port}/v1 (connection refused)"


async def test_url_credentials_are_sent_as_basic_auth(
    server: FakeOpenAIServer, transport: str
) -> None:
    url = server.base_url.replace("http://", "http://alice:pa55word-xyz@")
    m = _model(url)
    g = await m.generate(ASK, step="s")
    await m.aclose()
    assert g.text == "ok"
    token = base64.b64encode(b"alice:pa55word-xyz").decode()
    assert server.request_headers[0]["authorization"] == f"Basic {token}"
    assert redact(f"got {token}") == f"got {MASK}"


def test_other_fatal_errors_are_not_endpoint_errors() -> None:
    assert not issubclass(FatalError, EndpointError)
