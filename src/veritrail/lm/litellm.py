"""Hosted providers other than OpenAI, through LiteLLM (`pip install 'veritrail[litellm]'`).

Names: `anthropic/<model>`, `gemini/<model>`, `vertex_ai/<model>`, `bedrock/<model>`,
`mistral/<model>` and the others in `PROVIDERS`, plus `litellm/<any LiteLLM model string>` for
everything else LiteLLM knows (`litellm/groq/llama-3.1-8b-instant`). The name after `litellm/`
is handed to LiteLLM as is; the other prefixes are LiteLLM's own, so `anthropic/claude-x` is
LiteLLM's `anthropic/claude-x`.

Settings: the key is the argument `api_key`, else `VERITRAIL_API_KEY`, else LiteLLM reads the
provider's own variable (`ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, ...; `KEY_ENV` lists them;
Bedrock and Vertex use the AWS and Google credential chains). `base_url` (`--base-url`, or
`VERITRAIL_BASE_URL`) is LiteLLM's `api_base`: a proxy or a compatible server; with one and no key
anywhere, a placeholder key is sent, as the OpenAI provider does for local servers.

Same behaviour as `lm.openai` towards the `Model` wrapper: transport only (LiteLLM's own retries
are off: `num_retries=0`, `max_retries=0`), LiteLLM's exceptions mapped onto the classified
`ProviderError`s (429 → `RateLimitError` with `Retry-After`; timeouts, connection failures, 408,
409 and 5xx → `TransientError`; 401/403/404 → `EndpointError`; a rejected response format →
`UnsupportedFormatError`, which drives the wrapper's structured-output fallback; any other
refusal, a context window overflow included → `FatalError`), usage read from the reply (cached
prompt tokens from `prompt_tokens_details.cached_tokens`). Every message and cause passes through
`veritrail.redaction`: LiteLLM's error texts can quote the request.

LiteLLM is imported on first use, with its network and logging side effects turned off: the
model-cost map is read from the copy in the package (`LITELLM_LOCAL_MODEL_COST_MAP`), no
telemetry or callbacks, no debug banner on stdout, message logging off, and its logger at ERROR
unless `LITELLM_LOG` says otherwise.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .. import environment
from ..errors import InputProblem
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
from .openai import (
    DEFAULT_TIMEOUT,
    FORMAT_WORDS,
    check_base_url,
    connection_error,
    mentions_format,
    parse_retry_after,
)
from .pricing import Price

INSTALL = "pip install 'veritrail[litellm]'"

KEY_ENV: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY"),
    "vertex_ai": (),  # Google application default credentials
    "bedrock": (),  # the AWS credential chain
}
"""The environment variables LiteLLM reads a provider's key from (documentation and the
placeholder decision); `vertex_ai` and `bedrock` use their clouds' credential chains."""

PROVIDERS: tuple[str, ...] = (*KEY_ENV, "litellm")
"""The `provider/` prefixes served by this module (`litellm/` takes any LiteLLM model string)."""

_DEFAULT_URLS = {
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "mistral": "https://api.mistral.ai/v1",
}

_NO_KEY = "no-key-needed"

_OFFLINE = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_OFFLINE_MODE": "true",
}
"""LiteLLM's switches that make it use its bundled tables instead of fetching them."""


class LiteLLMMissingError(InputProblem, ImportError):
    """The `litellm` extra is not installed (exit 2, before any call)."""


_LITELLM: Any = None


def load_litellm() -> Any:
    """The `litellm` module, imported once with its network and logging side effects off."""
    global _LITELLM
    if _LITELLM is not None:
        return _LITELLM
    # Read by LiteLLM at import or first use: otherwise it downloads its model-cost map at
    # import and Anthropic's beta-header table at the first Anthropic call (bundled copies of
    # both ship in the package). A user who wants the live tables sets the variables.
    for name, value in _OFFLINE.items():
        os.environ.setdefault(name, value)
    try:
        import litellm
    except ImportError:
        raise LiteLLMMissingError(
            f"models other than openai/, local/ and fake/ go through LiteLLM: {INSTALL}"
        ) from None
    litellm.telemetry = False
    litellm.suppress_debug_info = True  # else a "Provider List: <url>" banner goes to stdout
    litellm.turn_off_message_logging = True
    litellm.success_callback = []
    litellm.failure_callback = []
    litellm.callbacks = []
    if not os.environ.get("LITELLM_LOG"):
        # Its warnings (deprecated parameters of unknown models) would interleave with our output.
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
            logging.getLogger(name).setLevel(logging.ERROR)
    _LITELLM = litellm
    return litellm


class LiteLLMProvider:
    """One LiteLLM model (`litellm.acompletion`). Transport only; see the module docs.

    Args:
        model: the model after the prefix (`claude-sonnet-4-5`).
        prefix: the provider prefix (`anthropic`, ..., or `litellm` for a full LiteLLM string).
        base_url: LiteLLM's `api_base` (a proxy or a compatible server).
        api_key: the key (else `VERITRAIL_API_KEY`, else the provider's own variable).
        timeout: seconds for one call (else `VERITRAIL_TIMEOUT`, else 120).
    """

    def __init__(
        self,
        model: str,
        *,
        prefix: str = "litellm",
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self._litellm = load_litellm()  # first: a missing extra is an input problem (exit 2)
        self.name = prefix
        self.model = model
        self.target = litellm_target(prefix, model)
        """The model string LiteLLM is given."""
        self.timeout = float(
            timeout
            if timeout is not None
            else environment.get("VERITRAIL_TIMEOUT") or DEFAULT_TIMEOUT
        )
        url = base_url or environment.get("VERITRAIL_BASE_URL") or None
        if url is not None:
            url_secret(url)
            url = check_base_url(url)
        self._api_base = url
        key = api_key or environment.get("VERITRAIL_API_KEY") or None
        register_secret(key)
        route = self.target.split("/", 1)[0]
        if key is None and url is not None:
            env_names = KEY_ENV.get(route)
            if env_names and not any(os.environ.get(n) for n in env_names):
                key = _NO_KEY  # a local server accepts anything; LiteLLM refuses no key
        self._api_key = key
        self.url: str = redact_url(url or _DEFAULT_URLS.get(route, f"{route} (LiteLLM default)"))
        """The endpoint with credentials removed: what error causes name."""
        self.endpoint = f"{self.url}#{self.target}"

    def __repr__(self) -> str:
        return redact(f"LiteLLMProvider(model={self.target!r}, endpoint={self.url!r})")

    def list_price(self) -> Price | None:
        """The model's list price from LiteLLM's bundled cost map (the copy in the installed
        package, never fetched), or None when LiteLLM has none. `Model` uses it when the price
        table (built-in, `--prices` file, `VERITRAIL_PRICES`) has no entry, so a price file
        still wins."""
        return list_price(self.name, self.model)

    def _request(self, messages: Sequence[Message], config: GenerateConfig) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.target,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": config.temperature,
            "timeout": self.timeout,
            # The `Model` wrapper owns retries.
            "num_retries": 0,
            "max_retries": 0,
            # A parameter a provider lacks (seed, for Anthropic) is dropped, not an error.
            "drop_params": True,
        }
        if self._api_base is not None:
            req["api_base"] = self._api_base
        if self._api_key is not None:
            req["api_key"] = self._api_key
        if config.max_tokens is not None:
            req["max_tokens"] = config.max_tokens
        if config.seed is not None:
            req["seed"] = config.seed
        fmt = config.response_format
        if fmt is ResponseFormat.JSON_SCHEMA and config.json_schema is not None:
            req["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": config.schema_name, "schema": config.json_schema},
            }
        elif fmt in (ResponseFormat.JSON_OBJECT, ResponseFormat.JSON_SCHEMA):
            req["response_format"] = {"type": "json_object"}
        return req

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> ModelOutput:
        """One completion through LiteLLM; raises a classified `ProviderError` on failure."""
        req = self._request(messages, config)
        try:
            reply = await self._litellm.acompletion(**req)
        except Exception as exc:  # noqa: BLE001 - every failure is classified, none escapes raw
            raise classify(
                exc, self.url, self.timeout, structured="response_format" in req
            ) from None
        return read_reply(reply, self.url)

    async def aclose(self) -> None:
        """Nothing to release: LiteLLM owns its HTTP clients, shared by every model in the
        process (closing them here would break another model still in use)."""


def _factory(prefix: str) -> Any:
    def make(
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
    ) -> LiteLLMProvider:
        return LiteLLMProvider(
            model, prefix=prefix, base_url=base_url, api_key=api_key, timeout=timeout
        )

    make.__name__ = f"{prefix}_provider"
    return make


FACTORIES: dict[str, Any] = {p: _factory(p) for p in PROVIDERS}
"""`prefix -> factory(model, base_url=, api_key=, timeout=)`, what `lm.registry` registers."""


def litellm_target(prefix: str, model: str) -> str:
    """The model string LiteLLM is given for `prefix/model` (`litellm/` passes its string on)."""
    return model if prefix == "litellm" else f"{prefix}/{model}"


def list_price(prefix: str, model: str) -> Price | None:
    """`prefix/model`'s list price in LiteLLM's bundled cost map, or None. What the provider
    charges (`LiteLLMProvider.list_price`) and what a batch's driver predicts from a model's name
    (`lm.registry.model_price`) both come from here. Raises `LiteLLMMissingError` without the
    extra."""
    return litellm_price(load_litellm().model_cost, litellm_target(prefix, model))


def litellm_price(cost_map: Mapping[str, Any], target: str) -> Price | None:
    """`target`'s price in a LiteLLM cost map (USD per token there, per 1M tokens here): the
    entry of `provider/model` if present, else of `model` when its provider is the same."""
    route, _, bare = target.partition("/")
    entry = cost_map.get(target)
    if not isinstance(entry, Mapping) and bare:
        candidate = cost_map.get(bare)
        if isinstance(candidate, Mapping) and candidate.get("litellm_provider") in (route, None):
            entry = candidate
    if not isinstance(entry, Mapping):
        return None
    try:
        per_input = float(entry["input_cost_per_token"])
        per_output = float(entry["output_cost_per_token"])
    except (KeyError, TypeError, ValueError):
        return None
    cached = entry.get("cache_read_input_token_cost")
    # Rounded: per-token figures times 1e6 carry binary noise (2e-6 * 1e6 = 1.9999999999999998).
    return Price(
        round(per_input * 1e6, 9),
        round(per_output * 1e6, 9),
        round(float(cached) * 1e6, 9) if isinstance(cached, int | float) else None,
    )


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def read_reply(reply: Any, url: str) -> ModelOutput:
    """A LiteLLM `ModelResponse` as a `ModelOutput`; a reply of the wrong shape is transient."""
    try:
        choice = _get(reply, "choices")[0]
        text = _get(_get(choice, "message"), "content") or ""
    except (TypeError, IndexError, KeyError):
        cause = f"reply from {url} has no usable choice"
        raise TransientError(redact(f"{cause}: {str(reply)[:300]}"), cause=cause) from None
    usage = _get(reply, "usage")
    input_tokens = _int(_get(usage, "prompt_tokens"))
    cached = _int(_get(_get(usage, "prompt_tokens_details"), "cached_tokens"))
    return ModelOutput(
        text=str(text),
        input_tokens=input_tokens,
        output_tokens=_int(_get(usage, "completion_tokens")),
        finish_reason=_get(choice, "finish_reason"),
        cached_input_tokens=max(0, min(cached, input_tokens)),
    )


_FORMAT_WORDS = (
    *FORMAT_WORDS,
    "response_schema",
    "responseschema",
    "response_mime_type",
    "responsemimetype",
    "output_format",  # Anthropic's structured outputs
    "json_tool_call",  # the tool LiteLLM forces for a schema where those are missing
)
"""The OpenAI provider's format words and those of the other providers' format options."""


def _headers(exc: BaseException) -> Mapping[str, str] | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers:
        return dict(headers)
    response = getattr(exc, "response", None)
    found = getattr(response, "headers", None)
    return dict(found) if found else None


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _server_message(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc)
    # LiteLLM prefixes its class and the provider ("litellm.RateLimitError: AnthropicException -").
    if text.startswith("litellm.") and ": " in text:
        text = text.split(": ", 1)[1]
    return " ".join(text.split())


def _refused(text: str) -> bool:
    """Whether an exception's (lower-cased) text is a refused connection, in the words of
    httpx ("all connection attempts failed"), aiohttp ("cannot connect to host", "connect call
    failed") or the OS ("connection refused")."""
    return any(
        w in text
        for w in (
            "connection refused",
            "all connection attempts failed",
            "cannot connect to host",
            "connect call failed",
        )
    )


def classify(exc: BaseException, url: str, timeout: float, *, structured: bool) -> ProviderError:
    """Map a LiteLLM exception (or anything `acompletion` raised) onto `lm.base`'s classes, with
    a redacted message and a `cause` that names the endpoint (see the module docs)."""
    ll = load_litellm()
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, ll.Timeout):
        cause = f"no reply from {url} within {timeout:g}s (timeout)"
        return TransientError(cause, cause=cause)
    status = _status(exc)
    said = f"HTTP {status} from {url}" if status is not None else f"error from {url}"
    msg = redact(f"{said}: {_server_message(exc)[:500]}")
    if isinstance(exc, ll.RateLimitError) or status == 429:
        if "insufficient_quota" in msg:
            return EndpointError(msg, endpoint=url, status=status)  # waiting adds no credit
        return RateLimitError(msg, retry_after=parse_retry_after(_headers(exc)), status=status)
    text = str(exc).lower()
    if isinstance(exc, ll.APIConnectionError) or _refused(text):
        # LiteLLM raises this for transport failures and for replies it could not read: both
        # are worth another try. The OS error, when still chained, names the failure. Some of
        # its providers (Anthropic) wrap a refused connection as an HTTP 500 whose text is
        # aiohttp's, with an object's address in it: named for what it is instead.
        if _refused(text) or "refused" in text:
            cause = f"connection refused (endpoint {url})"
            refused = TransientError(cause, cause=cause)
            refused.connect_failure = True
            return refused
        return connection_error(exc, url, timeout)
    if isinstance(exc, ll.ContextWindowExceededError):
        return FatalError(msg, status=status)
    if isinstance(exc, (ll.AuthenticationError, ll.PermissionDeniedError, ll.NotFoundError)) or (
        status in (401, 403, 404)
    ):
        return EndpointError(msg, endpoint=url, status=status)
    if isinstance(exc, (ll.BadRequestError, ll.UnprocessableEntityError)) or status in (400, 422):
        if structured and mentions_format(msg, _FORMAT_WORDS):
            return UnsupportedFormatError(msg, status=status)
        return FatalError(msg, status=status)
    if status is not None and (status in (408, 409) or status >= 500):
        if structured and status == 500 and mentions_format(msg, _FORMAT_WORDS):
            return UnsupportedFormatError(msg, status=status)
        return TransientError(msg, retry_after=parse_retry_after(_headers(exc)), status=status)
    if isinstance(exc, (ll.InternalServerError, ll.ServiceUnavailableError, ll.APIError)):
        return TransientError(msg, status=status)
    text = redact(f"{type(exc).__name__} from LiteLLM for {url}: {str(exc)[:500]}")
    return FatalError(text, cause=redact(f"{type(exc).__name__} from LiteLLM for {url}"))


__all__ = [
    "FACTORIES",
    "INSTALL",
    "KEY_ENV",
    "PROVIDERS",
    "LiteLLMMissingError",
    "LiteLLMProvider",
    "classify",
    "load_litellm",
    "read_reply",
]
