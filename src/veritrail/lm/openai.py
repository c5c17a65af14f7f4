"""`openai/<model>`: any endpoint that speaks OpenAI chat completions, via the official async SDK.

Works with OpenAI itself, Azure OpenAI, and compatible servers (vLLM, Ollama, llama.cpp's
`llama-server`, LM Studio). Settings, first found wins:

- base URL: argument `base_url` → `VERITRAIL_BASE_URL` → `OPENAI_BASE_URL` → OpenAI's default.
- API key: argument `api_key` → `VERITRAIL_API_KEY` → `OPENAI_API_KEY`; a server on a custom base
  URL may need none (a placeholder is sent, since the SDK insists on one).
- Azure: `azure_endpoint` (or `AZURE_OPENAI_ENDPOINT`) switches to Azure; `azure_deployment`
  (default: the model name), `api_version` (or `OPENAI_API_VERSION`), key from
  `AZURE_OPENAI_API_KEY`.

HTTP transport: the SDK's aiohttp client (`openai[aiohttp]`, a dependency of veritrail) when it
is installed, else the SDK's default httpx client; `http_client` (or `VERITRAIL_HTTP_CLIENT`) picks
one of `aiohttp` / `httpx`. aiohttp is the default because of its per-call CPU cost: with 64 calls
in flight the httpx pool re-checks every pooled connection on each request and release, and the
client's CPU per call is 1.44 ms with aiohttp against 1.98 ms (benchmarks/README.md §7). Both honour
the `HTTP(S)_PROXY` environment variables.

The provider does transport only. The SDK's own retries are off (`max_retries=0`): the `Model`
wrapper owns retries. SDK errors are mapped to the classified `ProviderError`s of `lm.base`,
with `Retry-After` read from the reply, and each gets a `cause` that names the endpoint and the
kind of failure, told apart on both transports by walking the exception chain down to the OS
error (the SDK's aiohttp adapter maps every `aiohttp.ClientConnectionError`, a refused connection
included, to a *connect timeout*, so the SDK's own class cannot be trusted):

- ``cannot connect to URL (connection refused)``, ``cannot resolve host HOST (DNS failure)``,
  ``cannot connect to URL (<OS reason>)``: transient, but retried only
  `RetryPolicy.max_connect_attempts` times;
- ``connection to URL dropped before a reply (connection reset)``, ``no reply from URL within Ns
  (timeout)``, ``cannot connect to URL within Ns (connect timeout)``, ``HTTP 5xx from URL: ...``,
  ``unreadable reply body from URL``: transient;
- ``TLS failure talking to URL: <reason>``: an `EndpointError` when the handshake can never work
  (certificate rejected, a plain-HTTP server behind https://), else transient;
- ``HTTP 401/403/404 from URL: <server message>``, a 429 ``insufficient_quota`` and a malformed
  base URL (checked here, before any request): `EndpointError`, fatal for every call.

Secrets: the key lives only inside the SDK client: it is not an attribute of the provider, not in
its `repr`, and never part of a cache key (see lm/cache.py). The key (argument or environment) and
the user and password of the base URL are registered with `veritrail.redaction`, and every
message, cause, `endpoint` and `repr` the provider builds passes through `redact`/`redact_url`, so
a server that echoes the key in its 401 body does not get it into a report.
"""

from __future__ import annotations

import base64
import email.utils
import json
import os
import socket
import ssl
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import openai

from .. import environment
from ..redaction import redact, redact_url, register_secret, url_secret
from .base import (
    EndpointError,
    FatalError,
    GenerateConfig,
    Message,
    ModelOutput,
    ProviderError,
    RateLimitError,
    ResponseFormat,
    TransientError,
    UnsupportedFormatError,
)

DEFAULT_TIMEOUT = 120.0
"""Seconds for one HTTP call (connect + reply)."""

HTTP_CLIENTS = ("aiohttp", "httpx")
"""The HTTP transports the provider can use under the SDK."""

_NO_KEY = "no-key-needed"

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"

_SCHEMES = ("http", "https")


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """(`url` without user:password, the `Authorization: Basic` value they stand for or None).

    Credentials in a base URL (a gateway with basic auth in front of a model server) are sent
    as HTTP Basic auth, in place of the API key, on both transports: httpx does this on its
    own, while aiohttp refuses a URL with credentials next to the SDK's Authorization header.
    Taking them out of the URL also keeps them out of every message that quotes it."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    register_secret(token)
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


def check_base_url(url: str) -> str:
    """`url` without a trailing slash; raises `EndpointError` when it cannot be a base URL (no
    scheme or host, a scheme other than http/https, whitespace or control characters, a bad
    port), so a typo fails before any claim instead of as a connection error on every call."""
    shown = redact_url(url)
    why: str | None = None
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        why = "it contains whitespace or control characters"
    else:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError as exc:
            why = str(exc)
        else:
            if parts.scheme.lower() not in _SCHEMES:
                why = (
                    "it has no scheme (write http://HOST:PORT/v1)"
                    if not parts.scheme or not parts.netloc
                    else f"unsupported scheme {parts.scheme!r} (use http or https)"
                )
            elif not parts.hostname:
                why = "it has no host"
    if why is not None:
        msg = f"malformed base URL {shown!r}: {why}"
        raise EndpointError(msg, endpoint=shown, cause=msg)
    return url.rstrip("/")


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


_STRICT: dict[int, tuple[dict[str, Any], bool]] = {}


def _strict_for(schema: dict[str, Any]) -> bool:
    """`_strict_compatible`, remembered per schema object: the steps send the same few module-level
    schemas on every call, and walking them each time was ~6 % of a batch worker's CPU (py-spy).
    The entry keeps the schema alive, so its id cannot be reused; at most 64 are kept."""
    hit = _STRICT.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    strict = _strict_compatible(schema)
    if len(_STRICT) < 64:
        _STRICT[id(schema)] = (schema, strict)
    return strict


def _strict_compatible(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts `schema` (closed objects, every property required)."""
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            props = schema.get("properties", {})
            if schema.get("additionalProperties", True) is not False:
                return False
            if set(schema.get("required", [])) != set(props):
                return False
        return all(_strict_compatible(v) for v in schema.values())
    if isinstance(schema, list):
        return all(_strict_compatible(v) for v in schema)
    return True


def _http_client(kind: str | None, timeout: float) -> tuple[str, Any]:
    """(transport name, the SDK http client to pass)."""
    if kind is not None and kind not in HTTP_CLIENTS:
        raise FatalError(
            f"unknown HTTP client {kind!r} (VERITRAIL_HTTP_CLIENT): use one of "
            + ", ".join(HTTP_CLIENTS)
        )
    # No connection cap of our own: the `Model`'s concurrency limit is the one bound on calls in
    # flight. The SDK's default pool (1,000 connections, 100 kept alive) silently capped a
    # budget above 1,000 and, with httpx, reconnected for every call beyond 100 in flight.
    # The SDK's HTTP library (openai >= 3 is built on httpx2; both are declared dependencies).
    import httpx2 as httpx_lib

    # A number, not None: the SDK's aiohttp transport turns None into aiohttp's own default (100).
    limits = httpx_lib.Limits(max_connections=100_000, max_keepalive_connections=None)
    if kind == "httpx":
        return "httpx", openai.DefaultAsyncHttpxClient(timeout=timeout, limits=limits)
    try:
        return "aiohttp", openai.DefaultAioHttpClient(timeout=timeout, limits=limits)
    except RuntimeError:  # the SDK's stand-in when the `aiohttp` extra is missing
        if kind == "aiohttp":
            raise FatalError(
                "the aiohttp HTTP client needs the SDK's extra: pip install 'openai[aiohttp]'"
            ) from None
        return "httpx", None


FORMAT_WORDS = ("response_format", "json_schema", "json_object", "response format")
"""Words of a refusal that is about the requested response format (structured-output fallback)."""


def mentions_format(message: str, words: tuple[str, ...] = FORMAT_WORDS) -> bool:
    """Whether a server's refusal is about the response format (any of `words`)."""
    m = message.lower()
    return any(w in m for w in words)


class OpenAIProvider:
    """Chat completions over the `openai` SDK (async). Transport only; see module docs."""

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        azure_endpoint: str | None = None,
        azure_deployment: str | None = None,
        api_version: str | None = None,
        organization: str | None = None,
        default_headers: Mapping[str, str] | None = None,
        name: str | None = None,
        http_client: str | None = None,
    ) -> None:
        if name is not None:
            self.name = name
        self.model = model
        env = os.environ
        self.timeout = float(
            timeout
            if timeout is not None
            else environment.get("VERITRAIL_TIMEOUT") or DEFAULT_TIMEOUT
        )
        self.http_client, http = _http_client(
            http_client or environment.get("VERITRAIL_HTTP_CLIENT") or None, self.timeout
        )
        azure_endpoint = azure_endpoint or env.get("AZURE_OPENAI_ENDPOINT") or None
        self.client: openai.AsyncOpenAI
        self.url: str
        """The base URL with credentials removed: what error causes name."""
        if azure_endpoint:
            url_secret(azure_endpoint)
            azure_endpoint = check_base_url(azure_endpoint)
            key = api_key or environment.get("VERITRAIL_API_KEY") or env.get("AZURE_OPENAI_API_KEY")
            if not key:
                raise FatalError(
                    "Azure OpenAI needs a key: set AZURE_OPENAI_API_KEY (or VERITRAIL_API_KEY)"
                )
            register_secret(key)
            version = api_version or env.get("OPENAI_API_VERSION") or "2024-10-21"
            self.client = openai.AsyncAzureOpenAI(
                azure_endpoint=azure_endpoint,
                azure_deployment=azure_deployment or model,
                api_version=version,
                api_key=key,
                timeout=self.timeout,
                max_retries=0,
                default_headers=dict(default_headers or {}),
                http_client=http,
            )
            self.url = redact_url(azure_endpoint)
            self.endpoint = f"azure:{self.url}/{azure_deployment or model}"
        else:
            url = (
                base_url
                or environment.get("VERITRAIL_BASE_URL")
                or env.get("OPENAI_BASE_URL")
                or None
            )
            headers = dict(default_headers or {})
            if url is not None:
                url_secret(url)
                url, basic = _split_userinfo(check_base_url(url))
                if basic is not None:
                    headers["Authorization"] = basic
            key = api_key or environment.get("VERITRAIL_API_KEY") or env.get("OPENAI_API_KEY")
            register_secret(key)
            if not key:
                if url is None:
                    raise FatalError(
                        f"openai/{model} needs an API key: set OPENAI_API_KEY (or "
                        "VERITRAIL_API_KEY), or point --base-url at a compatible server"
                    )
                key = _NO_KEY  # local servers accept anything; the SDK refuses an empty key
            self.client = openai.AsyncOpenAI(
                base_url=url,
                api_key=key,
                organization=organization,
                timeout=self.timeout,
                max_retries=0,
                default_headers=headers,
                http_client=http,
            )
            self.url = redact_url(url or OPENAI_DEFAULT_URL)
            self.endpoint = f"{self.url}#{model}"

    def __repr__(self) -> str:
        return redact(f"OpenAIProvider(model={self.model!r}, endpoint={self.endpoint!r})")

    def _request(self, messages: Sequence[Message], config: GenerateConfig) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": config.temperature,
        }
        if config.max_tokens is not None:
            req["max_tokens"] = config.max_tokens
        if config.seed is not None:
            req["seed"] = config.seed
        fmt = config.response_format
        if fmt is ResponseFormat.JSON_SCHEMA and config.json_schema is not None:
            req["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": config.schema_name,
                    "schema": config.json_schema,
                    "strict": _strict_for(config.json_schema),
                },
            }
        elif fmt in (ResponseFormat.JSON_OBJECT, ResponseFormat.JSON_SCHEMA):
            req["response_format"] = {"type": "json_object"}
        return req

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> ModelOutput:
        """One chat-completions call; raises a classified `ProviderError` on failure."""
        req = self._request(messages, config)
        # The typed `chat.completions.create` walks every message through the SDK's TypedDict
        # transforms and builds pydantic models from the reply: ~3 ms of CPU per call, the
        # largest client-side cost at high concurrency (benchmarks/bench_schedule.py). The SDK's
        # own low-level `post` sends the same JSON to the same route (Azure deployment routing,
        # auth and error mapping included) and returns the decoded body.
        try:
            data = await self.client.post("/chat/completions", cast_to=object, body=req)
        except openai.APIStatusError as exc:
            raise _classify_status(exc, self.url, structured="response_format" in req) from None
        except openai.APIConnectionError as exc:  # APITimeoutError included
            raise connection_error(exc, self.url, self.timeout) from None
        except (json.JSONDecodeError, UnicodeDecodeError, openai.APIResponseValidationError) as exc:
            cause = f"unreadable reply body from {self.url} ({type(exc).__name__})"
            raise TransientError(redact(f"{cause}: {exc}"), cause=cause) from None
        return _read_reply(data, self.url)

    async def aclose(self) -> None:
        """Close the SDK's connection pool."""
        await self.client.close()


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from, outermost first."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


# Raised while connecting or reading by either transport when the peer went away mid-exchange.
_DROPPED = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
_DROPPED_NAMES = ("ServerDisconnectedError", "RemoteProtocolError")
_CONNECT_TIMEOUT_NAMES = ("ConnectTimeout", "ConnectionTimeoutError")
# TLS errors no retry can fix: the certificate is refused, or the server does not speak TLS.
_TLS_FATAL_REASONS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST")


def _tls_reason(err: ssl.SSLError) -> str:
    if isinstance(err, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {err.verify_message or err.reason}"
    reason = getattr(err, "reason", None)
    if reason:
        return str(reason).lower().replace("_", " ")
    return str(err.strerror or err).split(" (_ssl.c")[0] or type(err).__name__


def connection_error(exc: BaseException, url: str, timeout: float) -> ProviderError:
    """Classify a transport failure (either HTTP client) by the OS error at the bottom of its
    chain, with a redacted, groupable `cause` (see the module docs)."""
    chain = list(_chain(exc))
    # Deepest first: aiohttp's wrapper is itself an `ssl.SSLError`, without the OpenSSL reason.
    for e in reversed(chain):
        if isinstance(e, ssl.SSLError):
            cause = redact(f"TLS failure talking to {url}: {_tls_reason(e)}")
            if isinstance(e, ssl.SSLCertVerificationError) or getattr(e, "reason", None) in (
                _TLS_FATAL_REASONS
            ):
                return EndpointError(cause, endpoint=url, cause=cause)
            err = TransientError(cause, cause=cause)
            err.connect_failure = True
            return err
    for e in chain:
        if isinstance(e, socket.gaierror):
            host = urlsplit(url).hostname or url
            cause = redact(f"cannot resolve host {host} (DNS failure)")
            err = TransientError(cause, cause=cause)
            err.connect_failure = True
            return err
    for e in chain:
        if isinstance(e, ConnectionRefusedError):
            cause = f"cannot connect to {url} (connection refused)"
            err = TransientError(cause, cause=cause)
            err.connect_failure = True
            return err
    for e in chain:
        if isinstance(e, _DROPPED) or type(e).__name__ in _DROPPED_NAMES:
            cause = f"connection to {url} dropped before a reply (connection reset)"
            return TransientError(cause, cause=cause)
    for e in chain:
        if isinstance(e, OSError) and not isinstance(e, TimeoutError) and e.errno is not None:
            reason = (e.strerror or type(e).__name__).lower()
            cause = redact(f"cannot connect to {url} ({reason})")
            err = TransientError(cause, cause=cause)
            err.connect_failure = True
            return err
    if any(type(e).__name__ in _CONNECT_TIMEOUT_NAMES for e in chain):
        cause = f"cannot connect to {url} within {timeout:g}s (connect timeout)"
        return TransientError(cause, cause=cause)
    if isinstance(exc, openai.APITimeoutError) or any(isinstance(e, TimeoutError) for e in chain):
        cause = f"no reply from {url} within {timeout:g}s (timeout)"
        return TransientError(cause, cause=cause)
    inner = chain[1] if len(chain) > 1 else exc
    cause = f"connection to {url} failed ({type(inner).__name__})"
    return TransientError(redact(f"{cause}: {str(inner)[:200]}"), cause=cause)


def _read_reply(data: Any, url: str) -> ModelOutput:
    """A chat-completions reply body as a `ModelOutput`; a body of the wrong shape is transient."""
    try:
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        usage = data.get("usage") or {}
        input_tokens = int(usage.get("prompt_tokens") or 0)
        details = usage.get("prompt_tokens_details")
        cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
        return ModelOutput(
            text=str(text),
            input_tokens=input_tokens,
            output_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
            # Clamped: a server that counts differently must not make the uncached share negative.
            cached_input_tokens=max(0, min(cached, input_tokens)),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        cause = f"reply from {url} has no usable choice"
        raise TransientError(redact(f"{cause}: {str(data)[:300]}"), cause=cause) from None


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(exc.message)


def _error_code(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("code") or err.get("type") or "")
    return ""


def _classify_status(exc: openai.APIStatusError, url: str, *, structured: bool) -> ProviderError:
    status = exc.status_code
    server_msg = _error_message(exc)
    # The server's message can echo the key ("Incorrect API key provided: sk-..."): redacted.
    msg = redact(f"HTTP {status} from {url}: {server_msg[:500]}")
    retry_after = parse_retry_after(exc.response.headers)
    if status == 429:
        if _error_code(exc) == "insufficient_quota":
            # Waiting does not add credit: no call to this endpoint can succeed.
            return EndpointError(msg, endpoint=url, status=status)
        return RateLimitError(msg, retry_after=retry_after, status=status)
    # Endpoints without json_schema answer 400/422, some (llama-cpp-python) 500.
    if structured and status in (400, 422, 500) and mentions_format(server_msg):
        return UnsupportedFormatError(msg, status=status)
    if status in (401, 403, 404):
        # Wrong key, no access, unknown model or route: the same for every call.
        return EndpointError(msg, endpoint=url, status=status)
    if status in (408, 409) or status >= 500:
        return TransientError(msg, retry_after=retry_after, status=status)
    return FatalError(msg, status=status)


__all__ = [
    "DEFAULT_TIMEOUT",
    "OPENAI_DEFAULT_URL",
    "OpenAIProvider",
    "check_base_url",
    "connection_error",
    "parse_retry_after",
]
