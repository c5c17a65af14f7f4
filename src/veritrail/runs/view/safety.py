"""What keeps `veritrail view` safe by default (docs/runs.md#safety).

- **Where it listens.** 127.0.0.1 unless `--host` says otherwise; any host that is not a loopback
  address needs `--token` (`check_bind`, exit 2 without one).
- **Who may ask.** With a token every request needs it: `?token=T` on the first visit (answered
  with a redirect to the same address without it and an `HttpOnly`, `SameSite=Strict` cookie
  holding a keyed hash of it), or the cookie, or an `X-Veritrail-Token` / `Authorization: Bearer`
  header. Without a token the server is loopback-only and refuses any `Host` header that does
  not name a loopback host, so a web page cannot reach it by DNS rebinding.
- **Cross-site writes.** A POST needs an `Origin` (else `Referer`) of this very server, and its
  form's CSRF field, a keyed hash of the browser's session cookie (random, `HttpOnly`,
  `SameSite=Strict`), checked by `Guard.csrf_ok` in the endpoint.
- **What a page may do.** Every response says `nosniff`, `no-store`, frames only from itself,
  and a Content-Security-Policy: the view's own pages load their stylesheets from the server
  and run no script; the trail viewer's page keeps the trail report's own policy (inline
  script and style, nothing fetched).

The keys of the hashes are random per server process: a restart ends every session.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from ...errors import InputProblem

TOKEN_COOKIE = "vt_token"
SESSION_COOKIE = "vt_session"
TOKEN_HEADER = "x-veritrail-token"
MIN_TOKEN_LENGTH = 12
"""A token shorter than this is refused: it guards a server others can reach."""

PAGE_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; frame-src 'self'; "
    "form-action 'self'; frame-ancestors 'self'; base-uri 'none'"
)
"""The view's own pages: stylesheets from the server, no script, forms post to the server."""

TRAIL_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
"""The trail viewer (the HTML report): its own inline script and style, nothing fetched."""

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ViewUsageError(InputProblem, ValueError):
    """`veritrail view` cannot start this way (a non-loopback host without a token)."""


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1)."""
    h = host.strip().strip("[]").lower()
    if h in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token (`ViewUsageError`, exit 2)."""
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise ViewUsageError(
            f"--token must be at least {MIN_TOKEN_LENGTH} characters "
            '(e.g. python -c "import secrets; print(secrets.token_urlsafe())")'
        )
    if not is_loopback(host) and not token:
        raise ViewUsageError(
            f"--host {host} makes the view reachable from other machines: give --token T "
            "too (every request then needs it), or keep the default 127.0.0.1"
        )


def _host_name(host_header: str) -> str:
    """The host of a `Host` header, without its port (`[::1]:80` -> `::1`)."""
    h = host_header.strip().lower()
    if h.startswith("["):
        return h[1:].split("]", 1)[0]
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


@dataclass(frozen=True)
class Guard:
    """The token, the session and CSRF keys of one server (`Guard.create`)."""

    token: str | None
    key: bytes = field(repr=False)

    @classmethod
    def create(cls, token: str | None) -> Guard:
        """A guard with a fresh random key."""
        return cls(token or None, secrets.token_bytes(32))

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self.key, f"{purpose}\0{value}".encode(), hashlib.sha256).hexdigest()

    def token_cookie_value(self) -> str:
        """What the token cookie holds: a keyed hash of the token, not the token."""
        return self._mac("token", self.token or "")

    def token_ok(self, offered: str | None, cookie: str | None) -> bool:
        """Whether a request carries the token (as itself, or as the cookie's hash)."""
        if self.token is None:
            return True
        if offered is not None and hmac.compare_digest(offered.encode(), self.token.encode()):
            return True
        return cookie is not None and hmac.compare_digest(cookie, self.token_cookie_value())

    def csrf_token(self, session: str) -> str:
        """The CSRF field of a form for a browser session."""
        return self._mac("csrf", session)

    def csrf_ok(self, session: str | None, field_value: str | None) -> bool:
        """Whether a POSTed form's CSRF field belongs to the session that sent it."""
        if not session or not field_value:
            return False
        return hmac.compare_digest(field_value, self.csrf_token(session))


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _cookies(headers: dict[str, str]) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed Cookie header is no cookie at all
        return {}
    return {k: m.value for k, m in jar.items()}


def _cookie(name: str, value: str) -> bytes:
    return f"{name}={value}; Path=/; HttpOnly; SameSite=Strict".encode()


def _security_headers(csp: str) -> list[tuple[bytes, bytes]]:
    return [
        (b"content-security-policy", csp.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"SAMEORIGIN"),
        # same-origin: a POST still carries its Origin (no-referrer would make it "null").
        (b"referrer-policy", b"same-origin"),
        (b"cache-control", b"no-store"),
        (b"cross-origin-opener-policy", b"same-origin"),
        (b"cross-origin-resource-policy", b"same-origin"),
    ]


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]]) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *extra,
        *_security_headers(PAGE_CSP),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def same_origin(headers: dict[str, str], scheme: str) -> bool:
    """Whether a request's `Origin` (else `Referer`) is the server it was sent to (`Host`)."""
    host = headers.get("host", "").lower()
    source = headers.get("origin") or headers.get("referer") or ""
    if not source or source == "null" or not host:
        return False
    parts = urlsplit(source)
    return parts.scheme == scheme and parts.netloc.lower() == host


class GuardMiddleware:
    """The ASGI middleware that applies `Guard` to every request (see the module docstring).

    A request's session id is put in ``scope["state"]["vt_session"]`` (created on the first
    visit, then set as a cookie on the response), for the endpoints' CSRF fields."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        g = self.guard
        if g.token is None and not is_loopback(_host_name(headers.get("host", ""))):
            await _plain(send, 400, "This server answers to localhost only.", [])
            return
        cookies = _cookies(headers)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if g.token is not None:
            offered = query.get("token")
            if offered is not None and g.token_ok(offered, None):
                # First visit with ?token=: keep it in a cookie, drop it from the address.
                rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
                # A path on this server only: "//evil.com/" (or "/\\evil.com/") would be read
                # by a browser as another host (a scheme-relative address).
                path = "/" + str(scope.get("path", "/")).lstrip("/\\")
                location = quote(path, safe="/:@!$&'()*+,;=-._~") + (f"?{rest}" if rest else "")
                extra = [
                    (b"location", location.encode()),
                    (b"set-cookie", _cookie(TOKEN_COOKIE, g.token_cookie_value())),
                ]
                await _plain(send, 303, "See Other", extra)
                return
            bearer = headers.get("authorization", "")
            header_token = headers.get(TOKEN_HEADER) or (
                bearer[7:] if bearer.lower().startswith("bearer ") else None
            )
            if not g.token_ok(header_token, cookies.get(TOKEN_COOKIE)):
                await _plain(
                    send,
                    401,
                    "This veritrail view needs its token: open the address it printed when it "
                    "started (with ?token=...).",
                    [],
                )
                return
        if scope["method"] not in ("GET", "HEAD") and not same_origin(
            headers, scope.get("scheme", "http")
        ):
            await _plain(send, 403, "Cross-site request refused (Origin is not this server).", [])
            return
        session = cookies.get(SESSION_COOKIE)
        new_session = None
        if not session or len(session) != 43:
            session = new_session = secrets.token_urlsafe(32)
        scope.setdefault("state", {})["vt_session"] = session

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                hdrs = list(message.get("headers", []))
                names = {k.lower() for k, _ in hdrs}
                csp = TRAIL_CSP if scope.get("path") == "/run/trail" else PAGE_CSP
                hdrs += [h for h in _security_headers(csp) if h[0] not in names]
                if new_session is not None:
                    hdrs.append((b"set-cookie", _cookie(SESSION_COOKIE, new_session)))
                message = {**message, "headers": hdrs}
            await send(message)

        await self.app(scope, receive, send_with_headers)


__all__ = [
    "MIN_TOKEN_LENGTH",
    "PAGE_CSP",
    "SESSION_COOKIE",
    "TOKEN_COOKIE",
    "TOKEN_HEADER",
    "TRAIL_CSP",
    "Guard",
    "GuardMiddleware",
    "ViewUsageError",
    "check_bind",
    "is_loopback",
    "same_origin",
]
