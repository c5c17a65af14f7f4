"""Loopback servers speaking Anthropic's Messages API and Gemini's generateContent API.

Each request is translated to the OpenAI chat shape (`messages`, `response_format`) and answered
by a responder of that shape (the word-overlap `responder` by default), so the LiteLLM path and
the OpenAI path can be compared on the same replies. Token counts use the OpenAI fake's
`count_tokens` over the same joined prompt, so usage matches too.

Faults are queued with `inject(status, ...)`: each of the next requests gets that HTTP error in
the API's own error shape (a 401 echoes the key it was sent, to check redaction).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from veritrail.testing.fake_openai_server import count_tokens
from veritrail.testing.overlap import responder as overlap_responder

Responder = Callable[[dict[str, Any]], str]

_GEMINI = re.compile(r"/models/(?P<model>[^/:]+):generateContent$")


@dataclass(frozen=True)
class HttpFault:
    """One HTTP error to answer with; `retry_after` becomes a `Retry-After` header."""

    status: int
    retry_after: float | None = None


def _text(content: Any) -> str:
    """Anthropic content: a string or a list of blocks (text ones are joined)."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    owner: FakeProviderServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?", 1)[0].rstrip("/")
        headers = {k.lower(): v for k, v in self.headers.items()}
        gemini = _GEMINI.search(path)
        if path.endswith("/v1/messages"):
            api = "anthropic"
            request = owner.from_anthropic(body)
        elif gemini is not None:
            api = "gemini"
            request = owner.from_gemini(body, gemini.group("model"))
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        fault = owner.arrive(request, headers)
        if fault is not None:
            key = headers.get("x-api-key") or headers.get("x-goog-api-key") or ""
            self._fault(api, fault, key)
            return
        if owner.reject_format and request.get("response_format"):
            self._reject_format(api)
            return
        text = owner.responder(request)
        prompt = "\n".join(str(m["content"]) for m in request["messages"])
        p, c = count_tokens(prompt), count_tokens(text)
        if api == "anthropic":
            reply = owner.anthropic_reply(body, text, p, c)
            if owner.cache_read_tokens:
                # Anthropic counts cache reads apart from `input_tokens`.
                reply["usage"]["input_tokens"] -= owner.cache_read_tokens
                reply["usage"]["cache_read_input_tokens"] = owner.cache_read_tokens
            self._send(200, reply)
        else:
            self._send(200, owner.gemini_reply(text, p, c))

    def _fault(self, api: str, fault: HttpFault, key: str) -> None:
        status = fault.status
        message = {
            401: f"invalid x-api-key: {key}",
            429: "Rate limit reached, slow down.",
        }.get(status, "The server had an error.")
        headers = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = f"{fault.retry_after:g}"
        if api == "anthropic":
            kind = {401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
            payload: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            kind = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED"}.get(status, "INTERNAL")
            payload = {"error": {"code": status, "message": message, "status": kind}}
        self._send(status, payload, headers)

    def _reject_format(self, api: str) -> None:
        if api == "anthropic":
            msg = "output_format: structured outputs are not supported by this model"
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": msg},
            }
        else:
            msg = 'Invalid JSON payload received. Unknown name "response_json_schema"'
            payload = {"error": {"code": 400, "message": msg, "status": "INVALID_ARGUMENT"}}
        self._send(400, payload)

    def _send(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeProviderServer:
    """Anthropic Messages and Gemini generateContent on 127.0.0.1, in a daemon thread.

    Args:
        responder: OpenAI-shaped request dict → reply text (default: the word-overlap one).
        reject_format: answer 400 to every request that asks for structured output (as a model
            without it does), in the API's own words.
    """

    def __init__(self, responder: Responder | None = None, *, reject_format: bool = False):
        self.responder: Responder = responder or overlap_responder
        self.reject_format = reject_format
        self.cache_read_tokens = 0
        """Anthropic only: prompt tokens reported as read from its prompt cache."""
        self.requests: list[dict[str, Any]] = []
        """Every request as translated to the OpenAI shape (faulted ones included)."""
        self.headers: list[dict[str, str]] = []
        self._faults: deque[HttpFault] = deque()
        self._lock = threading.Lock()
        self._httpd: _Server | None = None

    def __enter__(self) -> FakeProviderServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`: the Anthropic base URL (LiteLLM adds `/v1/messages`)."""
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def gemini_url(self) -> str:
        """The Gemini base URL (LiteLLM adds `/models/{model}:generateContent`)."""
        return f"{self.url}/v1beta"

    def inject(self, *faults: HttpFault) -> None:
        """Queue faults: each of the next requests gets one, in order."""
        with self._lock:
            self._faults.extend(faults)

    def arrive(self, request: dict[str, Any], headers: dict[str, str]) -> HttpFault | None:
        """Record a request; the fault it gets, if one is queued."""
        with self._lock:
            self.requests.append(request)
            self.headers.append(headers)
            return self._faults.popleft() if self._faults else None

    # -- translation to and from the OpenAI shape ----------------------------------------------
    @staticmethod
    def from_anthropic(body: dict[str, Any]) -> dict[str, Any]:
        """An Anthropic Messages request in the chat-completions shape."""
        msgs: list[dict[str, str]] = []
        system = _text(body.get("system"))
        if system:
            msgs.append({"role": "system", "content": system})
        for m in body.get("messages", []):
            msgs.append({"role": m["role"], "content": _text(m.get("content"))})
        req: dict[str, Any] = {"model": body.get("model"), "messages": msgs}
        tools = [t.get("name") for t in body.get("tools") or []]
        if body.get("output_format") or "json_tool_call" in tools:
            req["response_format"] = {"type": "json_schema"}
        return req

    @staticmethod
    def from_gemini(body: dict[str, Any], model: str) -> dict[str, Any]:
        """A Gemini generateContent request in the chat-completions shape."""
        msgs: list[dict[str, str]] = []
        system = body.get("system_instruction") or body.get("systemInstruction")
        if system:
            msgs.append({"role": "system", "content": "".join(p["text"] for p in system["parts"])})
        for c in body.get("contents", []):
            role = "assistant" if c.get("role") == "model" else "user"
            msgs.append({"role": role, "content": "".join(p.get("text", "") for p in c["parts"])})
        req: dict[str, Any] = {"model": model, "messages": msgs}
        gen = body.get("generationConfig") or {}
        if gen.get("response_mime_type") == "application/json":
            kind = (
                "json_schema"
                if gen.get("response_json_schema") or gen.get("response_schema")
                else "json_object"
            )
            req["response_format"] = {"type": kind}
        return req

    @staticmethod
    def anthropic_reply(body: dict[str, Any], text: str, p: int, c: int) -> dict[str, Any]:
        """A Messages reply; a forced `json_tool_call` is answered with that tool's input."""
        forced = (body.get("tool_choice") or {}).get("name") == "json_tool_call"
        block: dict[str, Any] = {"type": "text", "text": text}
        if forced:
            with contextlib.suppress(json.JSONDecodeError):
                block = {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "json_tool_call",
                    "input": json.loads(text),
                }
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [block],
            "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn",
            "usage": {"input_tokens": p, "output_tokens": c},
        }

    @staticmethod
    def gemini_reply(text: str, p: int, c: int) -> dict[str, Any]:
        """A generateContent reply."""
        return {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": {
                "promptTokenCount": p,
                "candidatesTokenCount": c,
                "totalTokenCount": p + c,
            },
        }
