"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

`FakeOpenAIServer` speaks `POST /v1/chat/completions` (and `/chat/completions`) over plain HTTP on
a free loopback port, in a background thread, one thread per connection (so 64 concurrent
requests with a fixed latency overlap instead of queueing). A `responder(request_json) -> str`
callback writes the assistant content; faults are injected from a FIFO queue (`inject`) or
returned by the responder for a particular request, so tests can exercise every failure mode a
real endpoint shows: rate limits with and without `Retry-After`, 5xx, connection resets, replies
slower than the client timeout, truncated bodies, unreadable replies (prose where JSON was asked
for, half a JSON object, empty content), endpoints that reject `response_format: json_schema`,
and endpoint-wide refusals (401 that may echo the key, 403, 404 unknown model, 429 no quota).

`fault_rates` (with `seed`) draws a fault at random for every request that has no queued one,
for runs under a realistic mix of failures; `hold()` / `release()` / `wait_for_requests()` let a
test act while requests are certainly in flight, with no sleeps.

Usage::

    with FakeOpenAIServer(responder=lambda req: '{"ids": [1]}', latency=0.2) as srv:
        provider = OpenAIProvider("gpt-x", base_url=srv.base_url, api_key="test")
        ...
        assert srv.count == 1
"""

from __future__ import annotations

import hashlib
import json
import random
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


class FaultKind(StrEnum):
    """The failure modes the server can produce instead of a normal reply."""

    RATE_LIMIT = "rate_limit"
    """HTTP 429; with `Retry-After` when the fault's `retry_after` is set."""
    SERVER_ERROR = "server_error"
    """HTTP 500."""
    UNAVAILABLE = "unavailable"
    """HTTP 503."""
    RESET = "reset"
    """Close the connection with a TCP reset and no reply."""
    SLOW = "slow"
    """Wait `delay` seconds before a normal reply (set it past the client timeout)."""
    TRUNCATED = "truncated"
    """HTTP 200 whose JSON body is cut in half (Content-Length matches the cut body)."""
    PROSE = "prose"
    """HTTP 200 with prose content instead of the JSON the caller asked for."""
    REJECT_FORMAT = "reject_format"
    """HTTP 400 naming `response_format`, as endpoints without `json_schema` support answer."""
    TRUNCATED_CONTENT = "truncated_content"
    """HTTP 200, a well-formed body whose *content* is the first half of the responder's reply
    (a model that stopped mid-object)."""
    EMPTY = "empty"
    """HTTP 200 with empty content."""
    UNAUTHORIZED = "unauthorized"
    """HTTP 401 `invalid_api_key`; the message echoes the request's bearer value when the
    fault's `echo_key` is set, as some real servers do."""
    FORBIDDEN = "forbidden"
    """HTTP 403."""
    NOT_FOUND_MODEL = "not_found_model"
    """HTTP 404 `model_not_found`."""
    INSUFFICIENT_QUOTA = "insufficient_quota"
    """HTTP 429 with code `insufficient_quota` (no credit left: waiting does not help)."""


UNREADABLE_KINDS = frozenset({FaultKind.PROSE, FaultKind.TRUNCATED_CONTENT, FaultKind.EMPTY})
"""Faults that deliver a 200 whose content cannot be read as the JSON asked for."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected failure. `retry_after` (seconds) only applies to RATE_LIMIT; `delay` to SLOW;
    `text` to PROSE; `echo_key` to UNAUTHORIZED."""

    kind: FaultKind
    retry_after: float | None = None
    delay: float = 5.0
    text: str = "I have read the excerpts carefully and I believe the claim is mostly supported."
    echo_key: bool = False

    @classmethod
    def rate_limit(cls, retry_after: float | None = None) -> Fault:
        """HTTP 429, optionally with a `Retry-After` header."""
        return cls(FaultKind.RATE_LIMIT, retry_after=retry_after)

    @classmethod
    def server_error(cls) -> Fault:
        """HTTP 500."""
        return cls(FaultKind.SERVER_ERROR)

    @classmethod
    def unavailable(cls) -> Fault:
        """HTTP 503."""
        return cls(FaultKind.UNAVAILABLE)

    @classmethod
    def reset(cls) -> Fault:
        """Connection reset without any reply."""
        return cls(FaultKind.RESET)

    @classmethod
    def slow(cls, delay: float = 5.0) -> Fault:
        """A reply that arrives after `delay` seconds."""
        return cls(FaultKind.SLOW, delay=delay)

    @classmethod
    def truncated(cls) -> Fault:
        """A 200 reply with half a JSON body."""
        return cls(FaultKind.TRUNCATED)

    @classmethod
    def prose(cls, text: str | None = None) -> Fault:
        """A 200 reply whose content is prose, not JSON."""
        return cls(FaultKind.PROSE) if text is None else cls(FaultKind.PROSE, text=text)

    @classmethod
    def reject_format(cls) -> Fault:
        """HTTP 400 rejecting the request's `response_format`."""
        return cls(FaultKind.REJECT_FORMAT)

    @classmethod
    def truncated_content(cls) -> Fault:
        """A 200 reply whose content is the first half of what the responder wrote."""
        return cls(FaultKind.TRUNCATED_CONTENT)

    @classmethod
    def empty(cls) -> Fault:
        """A 200 reply with empty content."""
        return cls(FaultKind.EMPTY)

    @classmethod
    def unauthorized(cls, echo_key: bool = False) -> Fault:
        """HTTP 401; with `echo_key` the message quotes the request's API key verbatim."""
        return cls(FaultKind.UNAUTHORIZED, echo_key=echo_key)

    @classmethod
    def forbidden(cls) -> Fault:
        """HTTP 403."""
        return cls(FaultKind.FORBIDDEN)

    @classmethod
    def not_found_model(cls) -> Fault:
        """HTTP 404 `model_not_found`."""
        return cls(FaultKind.NOT_FOUND_MODEL)

    @classmethod
    def insufficient_quota(cls) -> Fault:
        """HTTP 429 `insufficient_quota`."""
        return cls(FaultKind.INSUFFICIENT_QUOTA)


Responder = Callable[[dict[str, Any]], "str | Fault"]


def default_responder(request: dict[str, Any]) -> str:
    """Reply `{}` when JSON output was requested, else `ok`."""
    fmt = (request.get("response_format") or {}).get("type")
    return "{}" if fmt in ("json_object", "json_schema") else "ok"


def count_tokens(text: str) -> int:
    """A rough token count (whitespace words plus punctuation runs), never below 1."""
    return max(1, len(text.split()) + sum(text.count(c) for c in '{}[],:".'))


@dataclass
class _Stats:
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    faults_served: list[FaultKind] = field(default_factory=list)
    service_seconds: list[float] = field(default_factory=list)
    proxied: int = 0


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # do not join handler threads that are sleeping through a SLOW fault
    request_queue_size = 256  # listen backlog: 64+ clients connect at once in the benchmark
    allow_reuse_address = True
    owner: FakeOpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    # Headers and body go out in two writes; with Nagle's algorithm on, the body waits for the
    # client's delayed ACK of the headers (40 ms on Linux), a delay no real endpoint adds.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return None  # quiet: tests read the counters instead

    def do_GET(self) -> None:
        if self._route() in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self) -> None:
        t0 = time.perf_counter()
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self._route() not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "nf"}})
            return
        try:
            request = json.loads(body or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, _error("request body is not JSON", "invalid_request_error"))
            return
        owner._enter(request, {k.lower(): v for k, v in self.headers.items()})
        try:
            owner._gate.wait()  # open unless a test called hold()
            self._answer(owner, request)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass  # the client gave up (timeout) before the reply: nothing to deliver
        finally:
            owner._leave(time.perf_counter() - t0)

    def _route(self) -> str:
        """The request path; a request in absolute form (`POST http://host/v1/...`, as clients
        send to an HTTP proxy) is answered too and counted in `proxied`."""
        path = self.path
        if path.startswith(("http://", "https://")):
            self.server.owner._proxied()
            path = urlsplit(path).path
        return path.rstrip("/")

    def _answer(self, owner: FakeOpenAIServer, request: dict[str, Any]) -> None:
        if owner.latency > 0:
            time.sleep(owner.latency)
        fmt = (request.get("response_format") or {}).get("type")
        fault = owner._next_fault(request)
        if fault is None and (
            (fmt == "json_schema" and not owner.supports_json_schema)
            or (fmt == "json_object" and not owner.supports_json_object)
        ):
            fault = Fault.reject_format()
        content: str | Fault | None = None
        if fault is None:
            content = owner.responder(request)
            if isinstance(content, Fault):
                fault = content
        if fault is not None:
            owner._served(fault.kind)
            if self._fault(fault, request):
                return
            if fault.kind is FaultKind.PROSE:
                content = fault.text
            elif fault.kind is FaultKind.EMPTY:
                content = ""
            else:
                content = owner.responder(request)
                if isinstance(content, Fault):
                    content = fault.text
                if fault.kind is FaultKind.TRUNCATED_CONTENT:
                    content = content[: len(content) // 2]
        assert isinstance(content, str)
        self._send_json(200, owner._completion(request, content))

    def _fault(self, fault: Fault, request: dict[str, Any]) -> bool:
        """Act out `fault`; True when the exchange is over, False to go on with a normal reply."""
        k = fault.kind
        if k is FaultKind.RATE_LIMIT:
            headers = {}
            if fault.retry_after is not None:
                headers["Retry-After"] = _fmt_seconds(fault.retry_after)
            self._send_json(
                429, _error("Rate limit reached, slow down.", "rate_limit_exceeded"), headers
            )
            return True
        if k is FaultKind.SERVER_ERROR:
            self._send_json(500, _error("The server had an error.", "server_error"))
            return True
        if k is FaultKind.UNAVAILABLE:
            self._send_json(503, _error("The server is overloaded.", "service_unavailable"))
            return True
        if k is FaultKind.RESET:
            # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return True
        if k is FaultKind.SLOW:
            time.sleep(fault.delay)
            return False
        if k is FaultKind.TRUNCATED:
            full = json.dumps(self.server.owner._completion(request, "{}")).encode()
            self._send_raw(200, full[: len(full) // 2], {"Content-Type": "application/json"})
            return True
        if k in UNREADABLE_KINDS:
            return False
        if k is FaultKind.UNAUTHORIZED:
            auth = self.headers.get("Authorization") or ""
            key = auth.split(" ", 1)[1] if auth.lower().startswith("bearer ") else auth
            msg = "Incorrect API key provided" + (f": {key}." if fault.echo_key else ".")
            self._send_json(401, _error(msg, "invalid_request_error", code="invalid_api_key"))
            return True
        if k is FaultKind.FORBIDDEN:
            self._send_json(
                403, _error("You are not allowed to use this model.", "permission_error")
            )
            return True
        if k is FaultKind.NOT_FOUND_MODEL:
            model = str(request.get("model", ""))
            self._send_json(
                404,
                _error(
                    f"The model '{model}' does not exist or you do not have access to it.",
                    "invalid_request_error",
                    code="model_not_found",
                ),
            )
            return True
        if k is FaultKind.INSUFFICIENT_QUOTA:
            self._send_json(
                429,
                _error(
                    "You exceeded your current quota.",
                    "insufficient_quota",
                    code="insufficient_quota",
                ),
            )
            return True
        if k is FaultKind.REJECT_FORMAT:
            fmt = (request.get("response_format") or {}).get("type", "json_schema")
            self._send_json(
                400,
                _error(
                    f"Invalid parameter: 'response_format' of type '{fmt}' is not supported "
                    "with this model.",
                    "invalid_request_error",
                    param="response_format",
                ),
            )
            return True
        raise AssertionError(f"unhandled fault {k}")

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self._send_raw(
            status,
            json.dumps(payload).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )

    def _send_raw(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


def _fmt_seconds(s: float) -> str:
    return str(int(s)) if float(s).is_integer() else f"{s:g}"


def _error(
    message: str, type_: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code or type_}}


class FakeOpenAIServer:
    """A chat-completions server on 127.0.0.1 running in a background thread.

    Args:
        responder: builds the assistant content from the request JSON; may return a `Fault` to
            fail that particular request.
        latency: seconds every request waits before it is answered (fixed, per call).
        supports_json_schema / supports_json_object: when False, every request asking for that
            `response_format` gets HTTP 400, like endpoints that lack it.
        model: the `model` field of replies ("" = echo the request's).
        fault_rates: for every request with no queued fault, the chance of each fault, drawn
            with a seeded RNG (`{FaultKind.RATE_LIMIT: 0.15, Fault.rate_limit(0.05): ...}`: a
            `Fault` key carries its parameters, a `FaultKind` key uses the defaults). The
            rates must add up to at most 1.
        seed: the seed of those draws. A request's draw depends on the seed, the request body and
            how many times that body was seen before, not on when it arrived: concurrent clients
            get the same faults on the same requests in every run (a test under the fault mix is
            then reproducible, not a race between its requests).
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency: float = 0.0,
        supports_json_schema: bool = True,
        supports_json_object: bool = True,
        model: str = "",
        fault_rates: Mapping[FaultKind | Fault, float] | None = None,
        seed: int | None = 0,
    ) -> None:
        self.responder: Responder = responder or default_responder
        self._mix: list[tuple[Fault, float]] = []
        for key, rate in (fault_rates or {}).items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"fault rate for {key} must be between 0 and 1, got {rate}")
            self._mix.append((key if isinstance(key, Fault) else Fault(key), float(rate)))
        if sum(r for _, r in self._mix) > 1.0 + 1e-9:
            raise ValueError("fault rates add up to more than 1")
        self._seed = seed
        self._seen: Counter[str] = Counter()
        self.latency = latency
        self.supports_json_schema = supports_json_schema
        self.supports_json_object = supports_json_object
        self.model = model
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        # Signalled on every arriving request, for wait_for_requests().
        self._arrived = threading.Condition(self._lock)
        # Handlers wait on this before answering; set = answer at once (see hold()).
        self._gate = threading.Event()
        self._gate.set()
        self._stats = _Stats()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        """Bind a free loopback port and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"fake-openai-{httpd.server_address[1]}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (in-flight handler threads are daemons)."""
        if self._httpd is None:
            return
        self._gate.set()  # let held handlers finish instead of waiting forever
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port (server must be started)."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, what an OpenAI client takes as `base_url`."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- synchronisation with tests ------------------------------------------------------------
    def hold(self) -> None:
        """Hold every reply: requests are received and counted, but not answered until
        `release()` (or `stop()`). Lets a test act while calls are certainly in flight instead
        of racing a sleep against the work."""
        self._gate.clear()

    def release(self) -> None:
        """Answer the held requests and every later one at once."""
        self._gate.set()

    @property
    def holding(self) -> bool:
        """True between `hold()` and `release()`."""
        return not self._gate.is_set()

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> bool:
        """Block until at least `n` chat requests have arrived (since start or the last
        `reset_counters`); True when they did, False when `timeout` seconds passed first."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self._stats.requests) >= n, timeout)

    # -- faults and counters -------------------------------------------------------------------
    def inject(self, *faults: Fault) -> None:
        """Queue faults; each of the next requests consumes one, in order, before its reply."""
        with self._lock:
            self._faults.extend(faults)

    @property
    def pending_faults(self) -> int:
        """Injected faults not yet served."""
        with self._lock:
            return len(self._faults)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON body of every chat-completions request received, in arrival order."""
        with self._lock:
            return list(self._stats.requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers (lower-cased names) of every request, aligned with `requests`."""
        with self._lock:
            return list(self._stats.headers)

    @property
    def count(self) -> int:
        """Number of chat-completions requests received."""
        with self._lock:
            return len(self._stats.requests)

    @property
    def max_in_flight(self) -> int:
        """The largest number of requests the server was handling at the same moment."""
        with self._lock:
            return self._stats.max_in_flight

    @property
    def proxied(self) -> int:
        """Requests that arrived in absolute form, i.e. with this server used as an HTTP proxy."""
        with self._lock:
            return self._stats.proxied

    @property
    def service_seconds(self) -> list[float]:
        """Per answered chat request, seconds from its handler starting to the reply being sent
        (the configured latency plus the server's own work and waiting for its GIL)."""
        with self._lock:
            return list(self._stats.service_seconds)

    @property
    def faults_served(self) -> list[FaultKind]:
        """The faults acted out so far, in order."""
        with self._lock:
            return list(self._stats.faults_served)

    def reset_counters(self) -> None:
        """Forget recorded requests and the in-flight maximum (faults stay queued)."""
        with self._lock:
            self._stats = _Stats(in_flight=self._stats.in_flight)

    # -- internals used by the handler -----------------------------------------------------------
    def _enter(self, request: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self._stats.requests.append(request)
            self._stats.headers.append(headers)
            self._stats.in_flight += 1
            self._stats.max_in_flight = max(self._stats.max_in_flight, self._stats.in_flight)
            self._arrived.notify_all()

    def _leave(self, seconds: float) -> None:
        with self._lock:
            self._stats.in_flight -= 1
            self._stats.service_seconds.append(seconds)

    def _proxied(self) -> None:
        with self._lock:
            self._stats.proxied += 1

    def _next_fault(self, request: Mapping[str, Any]) -> Fault | None:
        with self._lock:
            if self._faults:
                return self._faults.popleft()
            if not self._mix:
                return None
            body = json.dumps(request, sort_keys=True, default=str).encode("utf-8")
            digest = hashlib.sha256(body).hexdigest()
            n = self._seen[digest]
            self._seen[digest] = n + 1
            # A str seed is hashed deterministically by `random` (unlike hash() of a str).
            r = random.Random(f"{self._seed}:{digest}:{n}").random()
            for fault, rate in self._mix:
                if r < rate:
                    return fault
                r -= rate
            return None

    def _served(self, kind: FaultKind) -> None:
        with self._lock:
            self._stats.faults_served.append(kind)

    def _completion(self, request: dict[str, Any], content: str) -> dict[str, Any]:
        with self._lock:
            self._ids += 1
            n = self._ids
        prompt = "\n".join(
            str(m.get("content", "")) for m in request.get("messages", []) if isinstance(m, dict)
        )
        p, c = count_tokens(prompt), count_tokens(content)
        return {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model or str(request.get("model", "fake")),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
        }


__all__ = [
    "UNREADABLE_KINDS",
    "FakeOpenAIServer",
    "Fault",
    "FaultKind",
    "Responder",
    "count_tokens",
    "default_responder",
]
