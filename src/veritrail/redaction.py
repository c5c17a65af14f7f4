"""One redaction function for every text that leaves the process.

Every error text, URL and header that reaches a report, a run file, a log or the terminal passes
through `redact()` first. It removes, in this order:

1. **Known secret values**: API keys from the environment (`OPENAI_API_KEY`, `VERITRAIL_API_KEY`,
   `AZURE_OPENAI_API_KEY` and any variable whose name ends in `_API_KEY`, `_TOKEN`, `_SECRET` or
   `_PASSWORD`) and every value handed to `register_secret()` (keys given as arguments or in a
   settings file, the password of a base URL). Matching is on the value itself, so a server that
   echoes the key anywhere in its reply body is caught too.
2. **Header values**: `Authorization: Bearer ...`, `api-key: ...`, `x-api-key: ...` and the same
   names as JSON keys (`"api_key": "..."`).
3. **URL credentials**: `scheme://user:password@host` becomes `scheme://***@host`.
4. **Key-shaped tokens** that no list knows: OpenAI-style `sk-...` keys.

Why value matching rather than only patterns: a 401 body that says "Incorrect API key provided:
abc123" has no marker a pattern could anchor on; only knowing the value catches it. Values shorter
than `MIN_SECRET_LENGTH` are not registered (a one-character "key" would blank every such letter
in a report).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
"""What a removed secret is replaced with."""

MIN_SECRET_LENGTH = 6
"""Registered or environment values shorter than this are not treated as secrets."""

_ENV_NAMES = ("OPENAI_API_KEY", "VERITRAIL_API_KEY", "AZURE_OPENAI_API_KEY")
_ENV_SUFFIXES = ("_API_KEY", "_APIKEY", "_TOKEN", "_SECRET", "_PASSWORD", "_ACCESS_KEY")

_registered: set[str] = set()
_lock = threading.Lock()

# `Authorization: Bearer xyz`, `api-key: xyz`, `"api_key": "xyz"`, `api_key=xyz`.
_HEADER = re.compile(
    r"""(?ix)
    (?P<name>\b(?:authorization|proxy-authorization|x-api-key|api[-_]?key|access[-_]?token|
              client[-_]?secret|password)\b["']?\s*[:=]\s*["']?)
    (?P<scheme>(?:bearer|basic|token)\s+)?
    (?P<value>[^\s"',;}{]+)
    """
)
# scheme://userinfo@host: the userinfo part (user, or user:password) goes.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/\s@:]+(?::[^/\s@]*)?)@")
# OpenAI-style keys (sk-..., sk-proj-...); long enough not to hit ordinary words.
_KEY_SHAPED = re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")


def register_secret(value: str | None) -> None:
    """Treat `value` as a secret from now on (an API key given as an argument or in settings)."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value)


def _env_secrets(environ: Mapping[str, str]) -> set[str]:
    out: set[str] = set()
    for name, value in environ.items():
        upper = name.upper()
        if (upper in _ENV_NAMES or upper.endswith(_ENV_SUFFIXES)) and len(
            value
        ) >= MIN_SECRET_LENGTH:
            out.add(value)
    return out


def known_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every secret value `redact` removes, longest first (so a key that contains another is
    removed whole)."""
    with _lock:
        values = set(_registered)
    values |= _env_secrets(os.environ if environ is None else environ)
    return sorted(values, key=len, reverse=True)


def redact(text: str, *, secrets: Iterable[str] | None = None) -> str:
    """`text` with every secret value, credential header value and URL password removed."""
    if not text:
        return text
    for s in known_secrets() if secrets is None else secrets:
        if s in text:
            text = text.replace(s, MASK)
    text = _USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
    text = _HEADER.sub(lambda m: m.group("name") + (m.group("scheme") or "") + MASK, text)
    return _KEY_SHAPED.sub(MASK, text)


def redact_url(url: str) -> str:
    """A URL without its userinfo (user and password) and without secret query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    return redact(urlunsplit(parts._replace(netloc=netloc)))


def url_secret(url: str | None) -> None:
    """Register the password (and user) of a URL's userinfo as secrets."""
    if not url:
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    register_secret(parts.password)
    register_secret(parts.username)


_HEADER_WORDS = ("authorization", "api-key", "api_key", "apikey", "token", "secret", "password")


def needs_redaction(text: str, *, secrets: Iterable[str] | None = None) -> bool:
    """Whether `redact` would change `text`. Cheap on large texts: substring tests (in C) gate
    each regex, so a report of millions of characters with nothing to remove costs a few scans."""
    if any(s in text for s in (known_secrets() if secrets is None else secrets)):
        return True
    if "://" in text and "@" in text and _USERINFO.search(text):
        return True
    if "sk-" in text and _KEY_SHAPED.search(text):
        return True
    lower = text.lower()
    return any(w in lower for w in _HEADER_WORDS) and _HEADER.search(text) is not None


def redact_obj(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings) with `redact` applied to every string in it.

    A report of a long trail holds millions of strings; running `redact` on each and rebuilding
    every dict took longer than the verification itself (6 of 24 s on a 25,000-node chain). So
    the strings are first collected (no copies) and tested together with `needs_redaction`,
    joined by newlines (a join can only add a match, never hide one); only a value that contains
    something to remove is rebuilt. The result is the same either way.
    """
    secrets = known_secrets()
    strings: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)  # exact types first: `isinstance` against the Mapping ABC is slow
        if t is str:
            strings.append(v)
        elif t is dict:
            stack.extend(v.values())  # keys are never redacted (nor rewritten by the walk)
        elif t is list or t is tuple:
            stack.extend(v)
        elif t is int or t is float or t is bool or v is None:
            continue
        elif isinstance(v, str):
            strings.append(v)
        elif isinstance(v, Mapping):
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
    if not needs_redaction("\n".join(strings), secrets=secrets):
        return value
    return _redact_obj(value, secrets)


def _redact_obj(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets=secrets)
    if isinstance(value, Mapping):
        return {k: _redact_obj(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_obj(v, secrets) for v in value]
    return value


__all__ = [
    "MASK",
    "known_secrets",
    "needs_redaction",
    "redact",
    "redact_obj",
    "redact_url",
    "register_secret",
    "url_secret",
]
