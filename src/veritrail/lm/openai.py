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
with `Retry-After` read from the reply. The key lives only inside the SDK client: it is not an
attribute of the provider, not in its `repr`, not in error messages, and never part of a cache
key (see lm/cache.py).
"""

from __future__ import annotations

import email.utils
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import openai

from .base import (
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
    """(transport name, the SDK http client to pass; None for the SDK's own httpx default)."""
    if kind is not None and kind not in HTTP_CLIENTS:
        raise FatalError(
            f"unknown HTTP client {kind!r} (VERITRAIL_HTTP_CLIENT): use one of "
            + ", ".join(HTTP_CLIENTS)
        )
    if kind == "httpx":
        return "httpx", None
    try:
        return "aiohttp", openai.DefaultAioHttpClient(timeout=timeout)
    except RuntimeError:  # the SDK's stand-in when the `aiohttp` extra is missing
        if kind == "aiohttp":
            raise FatalError(
                "the aiohttp HTTP client needs the SDK's extra: pip install 'openai[aiohttp]'"
            ) from None
        return "httpx", None


def _mentions_format(message: str) -> bool:
    m = message.lower()
    return any(w in m for w in ("response_format", "json_schema", "json_object", "response format"))


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
            timeout if timeout is not None else env.get("VERITRAIL_TIMEOUT", DEFAULT_TIMEOUT)
        )
        self.http_client, http = _http_client(
            http_client or env.get("VERITRAIL_HTTP_CLIENT") or None, self.timeout
        )
        azure_endpoint = azure_endpoint or env.get("AZURE_OPENAI_ENDPOINT") or None
        self.client: openai.AsyncOpenAI
        if azure_endpoint:
            key = api_key or env.get("VERITRAIL_API_KEY") or env.get("AZURE_OPENAI_API_KEY")
            if not key:
                raise FatalError(
                    "Azure OpenAI needs a key: set AZURE_OPENAI_API_KEY (or VERITRAIL_API_KEY)"
                )
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
            self.endpoint = f"azure:{azure_endpoint}/{azure_deployment or model}"
        else:
            url = base_url or env.get("VERITRAIL_BASE_URL") or env.get("OPENAI_BASE_URL") or None
            key = api_key or env.get("VERITRAIL_API_KEY") or env.get("OPENAI_API_KEY")
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
                default_headers=dict(default_headers or {}),
                http_client=http,
            )
            self.endpoint = f"{url or 'https://api.openai.com/v1'}#{model}"

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, endpoint={self.endpoint!r})"

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
                    "strict": _strict_compatible(config.json_schema),
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
            raise _classify_status(exc, structured="response_format" in req) from None
        except openai.APITimeoutError:
            raise TransientError(f"no reply within {self.timeout:g}s") from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise TransientError(f"connection failed: {type(cause).__name__}: {cause}") from None
        except (json.JSONDecodeError, UnicodeDecodeError, openai.APIResponseValidationError) as exc:
            raise TransientError(f"malformed reply body: {type(exc).__name__}: {exc}") from None
        return _read_reply(data)

    async def aclose(self) -> None:
        """Close the SDK's connection pool."""
        await self.client.close()


def _read_reply(data: Any) -> ModelOutput:
    """A chat-completions reply body as a `ModelOutput`; a body of the wrong shape is transient."""
    try:
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        usage = data.get("usage") or {}
        return ModelOutput(
            text=str(text),
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        raise TransientError(f"reply has no usable choice: {str(data)[:300]}") from None


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


def _classify_status(exc: openai.APIStatusError, *, structured: bool) -> ProviderError:
    status = exc.status_code
    msg = f"HTTP {status}: {_error_message(exc)[:500]}"
    retry_after = parse_retry_after(exc.response.headers)
    if status == 429:
        if _error_code(exc) == "insufficient_quota":
            return FatalError(msg, status=status)  # waiting does not add credit
        return RateLimitError(msg, retry_after=retry_after, status=status)
    # Endpoints without json_schema answer 400/422, some (llama-cpp-python) 500.
    if structured and status in (400, 422, 500) and _mentions_format(_error_message(exc)):
        return UnsupportedFormatError(msg, status=status)
    if status in (408, 409) or status >= 500:
        return TransientError(msg, retry_after=retry_after, status=status)
    return FatalError(msg, status=status)


__all__ = ["DEFAULT_TIMEOUT", "OpenAIProvider", "parse_retry_after"]
