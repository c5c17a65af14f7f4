"""The provider contract: one async call. Everything cross-cutting lives in `lm.model.Model`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import RunFailure

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: Role
    content: str


class ResponseFormat(StrEnum):
    """How structured output is requested from an endpoint (best first)."""

    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"
    TEXT = "text"


@dataclass(frozen=True, slots=True)
class GenerateConfig:
    """Every request parameter that can change a model's output (all of it goes into cache keys)."""

    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    response_format: ResponseFormat = ResponseFormat.TEXT
    json_schema: dict[str, Any] | None = None
    schema_name: str = "reply"
    sample_index: int = 0  # distinguishes the k samples of soft prediction in the cache


@dataclass(frozen=True, slots=True)
class ModelOutput:
    """What a provider returns for one call."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    cached_input_tokens: int = 0
    """Of `input_tokens`, those the server answered from its prompt (prefix) cache, when it says
    (OpenAI's `usage.prompt_tokens_details.cached_tokens`; llama.cpp's server reports the same
    field). Priced at the cached-input rate; 0 when the provider does not report it."""


class ProviderError(RunFailure):
    """Base class of classified provider failures. `retry_after` is seconds, when the server said.

    `cause` is a short, redacted description of what went wrong that names the endpoint and the
    kind of failure, e.g. ``cannot connect to http://127.0.0.1:8011/v1 (connection refused)``. It
    carries nothing specific to one request, so every claim that hits the same failure gets the
    same text and a summary can group claims by it. Defaults to the message.
    """

    attempts: int = 1
    """Calls made before this error was given up on (set by the retry loop)."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        cause: str | None = None,
    ):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status
        self.cause: str = cause if cause is not None else message


class RateLimitError(ProviderError):
    """HTTP 429 or an equivalent quota signal: retry after backing off."""


class TransientError(ProviderError):
    """5xx, connection refused or reset, DNS failure, timeout: retry."""

    connect_failure: bool = False
    """True when no connection could be made at all (refused, DNS): the retry policy gives these
    fewer attempts (`RetryPolicy.max_connect_attempts`)."""


class FatalError(ProviderError):
    """Bad request, auth failure, unknown model: never retried."""


class EndpointError(FatalError):
    """A failure no other call to the same endpoint can avoid: HTTP 401/403, 404 (unknown model
    or route), a 429 `insufficient_quota`, a malformed base URL.

    `Model` remembers the first one it sees (`Model.fatal`) and raises it again for every later
    call without sending a request; a run stops starting new claims. `endpoint` is the base URL
    with credentials removed; `status` the HTTP status (None for a malformed URL).
    """

    def __init__(
        self,
        message: str,
        *,
        endpoint: str,
        status: int | None = None,
        cause: str | None = None,
    ):
        super().__init__(message, status=status, cause=cause)
        self.endpoint = endpoint


class UnsupportedFormatError(FatalError):
    """The endpoint rejected the requested response format (drives the structured-output fallback)."""


@runtime_checkable
class Provider(Protocol):
    """A model endpoint. Implementations do the transport only: no caching, retries or accounting."""

    name: str
    model: str

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> ModelOutput:
        """Make one call and return its output, or raise a `ProviderError` subclass."""
        ...

    async def aclose(self) -> None:
        """Release connections or stop a server the provider owns."""
        ...
