"""Resolve `provider/model` names to a ready `Model`, importing each provider only when used.

Built in: `openai/<model>` (OpenAI, Azure OpenAI and compatible servers), `local/<name>` (the
embedded llama.cpp model), `fake/<name>` (the scripted provider), `demo/overlap` (the word-overlap
demonstration model, keyless and offline: not a judge); `anthropic/`, `gemini/`,
`vertex_ai/`, `bedrock/`, `mistral/`, ... and `litellm/<any LiteLLM model>` through LiteLLM
(lm/litellm.py, the `litellm` extra). Others can be added with
`register_provider("name", "package.module:factory")` or a callable.

With no name given, `VERITRAIL_MODEL` is used, else `DEFAULT_MODEL` (the embedded model, so a
fresh install runs with no key; it is for trying the tool, not for real verdicts).

Retry pacing can be set from the environment when no `retry=` policy is given (used by tests and
CI to keep fault runs short): `VERITRAIL_RETRY_BASE_DELAY` (seconds before the first retry,
doubled each retry; also caps the floor of the wait after a 429 without `Retry-After`) and
`VERITRAIL_RETRY_MAX_ATTEMPTS` (calls in total, the first included).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import environment
from ..errors import InputProblem
from .base import Provider
from .cache import ResponseCache
from .model import DEFAULT_MAX_REASKS, Model
from .pricing import Price, PriceTable
from .retry import RetryPolicy

DEFAULT_MODEL = "local/qwen2.5-coder-1.5b"
"""The model used when nothing is configured."""

ProviderFactory = Callable[..., Provider]

LITELLM_PREFIXES = (
    "anthropic",
    "gemini",
    "vertex_ai",
    "bedrock",
    "mistral",
    "cohere",
    "groq",
    "deepseek",
    "xai",
    "together_ai",
    "openrouter",
    "fireworks_ai",
    "litellm",
)
"""Prefixes served through LiteLLM (lm/litellm.py; `litellm/` takes any LiteLLM model string)."""

_PROVIDERS: dict[str, str | ProviderFactory] = {
    "openai": "veritrail.lm.openai:OpenAIProvider",
    "local": "veritrail.lm.local:LocalProvider",
    "fake": "veritrail.lm.registry:_fake",
    # The word-overlap demonstration model, in-process: keyless, offline, not a judge (lm/demo.py).
    "demo": "veritrail.lm.demo:DemoProvider",
    # Hosted providers through LiteLLM (the `litellm` extra, imported on first use).
    **dict.fromkeys(LITELLM_PREFIXES, "veritrail.lm.litellm:FACTORIES"),
}


def retry_policy_from_env(environ: Mapping[str, str] | None = None) -> RetryPolicy:
    """The default `RetryPolicy`, with `VERITRAIL_RETRY_BASE_DELAY` and
    `VERITRAIL_RETRY_MAX_ATTEMPTS` applied when set. A bad value raises `ValueError` naming it."""
    policy = RetryPolicy()
    raw_delay = (environment.get("VERITRAIL_RETRY_BASE_DELAY", environ) or "").strip()
    if raw_delay:
        try:
            delay = float(raw_delay)
        except ValueError:
            delay = -1.0
        if not delay >= 0:  # also rejects nan
            raise ValueError(
                f"VERITRAIL_RETRY_BASE_DELAY must be a number of seconds >= 0, got {raw_delay!r}"
            )
        policy = replace(
            policy,
            base_delay=delay,
            rate_limit_min_delay=min(policy.rate_limit_min_delay, delay),
        )
    raw_attempts = (environment.get("VERITRAIL_RETRY_MAX_ATTEMPTS", environ) or "").strip()
    if raw_attempts:
        try:
            attempts = int(raw_attempts)
        except ValueError:
            attempts = 0
        if attempts < 1:
            raise ValueError(
                f"VERITRAIL_RETRY_MAX_ATTEMPTS must be a whole number >= 1, got {raw_attempts!r}"
            )
        policy = replace(policy, max_attempts=attempts)
    return policy


def _fake(model: str, **options: Any) -> Provider:
    from .fake import FakeProvider

    return FakeProvider(model=model, **options)


class ModelNameError(InputProblem, ValueError):
    """A model name that is not `provider/model` or names an unknown provider."""


def register_provider(prefix: str, factory: str | ProviderFactory) -> None:
    """Make `prefix/<model>` resolve to `factory(model, **options)` ("module:attr" is lazy)."""
    _PROVIDERS[prefix] = factory


def providers() -> list[str]:
    """Known provider prefixes."""
    return sorted(_PROVIDERS)


def resolve_name(name: str | None) -> str:
    """The model name to use: `name`, else `VERITRAIL_MODEL`, else `DEFAULT_MODEL`."""
    return name or environment.get("VERITRAIL_MODEL") or DEFAULT_MODEL


def model_price(name: str, table: PriceTable) -> Price | None:
    """The price a `Model` of `name` would charge, from its name alone: `table`'s entry, else the
    provider's list price (LiteLLM's bundled cost map for LiteLLM's prefixes), else None (the
    model notes "no price known"). Raises `ModelNameError` for a name that is not a model's."""
    prefix, model = split_name(name)
    price = table.lookup(prefix, model)
    if price is None and prefix in LITELLM_PREFIXES:
        from .litellm import list_price

        try:
            price = list_price(prefix, model)
        except ImportError:  # no extra: the model's own build says which to install
            return None
    return price


def split_name(name: str) -> tuple[str, str]:
    """`"openai/gpt-4o"` → `("openai", "gpt-4o")`; the model part may contain slashes."""
    prefix, sep, model = name.partition("/")
    if not sep or not prefix or not model:
        raise ModelNameError(
            f"model name {name!r} must look like provider/model, e.g. openai/gpt-4o-mini or "
            f"local/qwen2.5-coder-1.5b (providers: {', '.join(providers())})"
        )
    if prefix not in _PROVIDERS:
        raise ModelNameError(
            f"unknown provider {prefix!r} in {name!r} (known: {', '.join(providers())})"
        )
    return prefix, model


def _factory(prefix: str) -> ProviderFactory:
    target = _PROVIDERS[prefix]
    if not isinstance(target, str):
        return target
    mod_name, attr = target.split(":")
    found = getattr(importlib.import_module(mod_name), attr)
    # A mapping serves several prefixes from one module (lm/litellm.py's FACTORIES).
    factory: ProviderFactory = found[prefix] if isinstance(found, Mapping) else found
    return factory


def takes_option(name: str, option: str) -> bool:
    """Whether the provider of model `name` takes constructor option `option` (e.g. `base_url`:
    `openai/` does, `demo/` and `local/` do not). False for an unknown provider."""
    try:
        prefix, _ = split_name(resolve_name(name))
        factory = _factory(prefix)
    except (ModelNameError, ValueError):
        return False
    params = inspect.signature(factory).parameters
    return option in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def get_provider(name: str | None = None, **options: Any) -> Provider:
    """Build the provider for `name` (see `resolve_name`); `options` go to its constructor.

    `fake/...` takes `replies=` and `responder=` like `FakeProvider`; `openai/...` takes
    `base_url`, `api_key`, `timeout` and the Azure options; `local/...` takes `threads`
    (None = from the free cores), `n_ctx`, `parallel` and `model_dir`. Options that are None are
    dropped, so CLI flags can be passed as-is.
    """
    prefix, model = split_name(resolve_name(name))
    opts = {k: v for k, v in options.items() if v is not None}
    factory = _factory(prefix)
    try:
        inspect.signature(factory).bind(model, **opts)
    except TypeError:
        params = inspect.signature(factory).parameters
        unknown = sorted(k for k in opts if k not in params)
        raise ModelNameError(
            f"{prefix}/ models do not take the option(s) {', '.join(unknown) or '?'}"
        ) from None
    return factory(model, **opts)


def open_cache(cache: ResponseCache | str | Path | bool | None) -> ResponseCache | None:
    """The response cache `cache` names: a `ResponseCache` as is, a path to one, True for the
    default path (`$VERITRAIL_CACHE_DIR` or `~/.cache/veritrail/cache.sqlite`; off when
    `VERITRAIL_CACHE=0`), False/None for none."""
    if cache is True:
        return None if environment.get("VERITRAIL_CACHE") == "0" else ResponseCache()
    if cache is None or cache is False:
        return None
    if isinstance(cache, ResponseCache):
        return cache
    return ResponseCache(cache)


def model_for(
    provider: Provider,
    *,
    cache: ResponseCache | str | Path | bool | None = None,
    concurrency: int | None = None,
    retry: RetryPolicy | None = None,
    prices: PriceTable | str | Path | None = None,
    max_reasks: int | None = None,
) -> Model:
    """The `Model` wrapper `get_model` puts around a provider, around one given here (e.g. a
    provider shared by several models, as `veritrail batch` shares one connection pool between
    jobs). The arguments are `get_model`'s."""
    policy = retry if retry is not None else retry_policy_from_env()
    table = PriceTable.from_file(prices) if isinstance(prices, (str, Path)) else prices
    default_conc = int(getattr(provider, "default_concurrency", 8))
    return Model(
        provider,
        cache=open_cache(cache),
        concurrency=concurrency or default_conc,
        retry=policy,
        prices=table,
        max_reasks=DEFAULT_MAX_REASKS if max_reasks is None else max_reasks,
    )


def get_model(
    name: str | None = None,
    *,
    cache: ResponseCache | str | Path | bool | None = None,
    concurrency: int | None = None,
    retry: RetryPolicy | None = None,
    prices: PriceTable | str | Path | None = None,
    max_reasks: int | None = None,
    **options: Any,
) -> Model:
    """A `Model` for `provider/model` with the wrapper's settings.

    Args:
        name: `provider/model`; None = `VERITRAIL_MODEL` or the embedded default.
        cache: a `ResponseCache`, a path to one, True for the default path
            (`$VERITRAIL_CACHE_DIR` or `~/.cache/veritrail/cache.sqlite`), False/None for none.
            `VERITRAIL_CACHE=0` turns the default off.
        concurrency: calls in flight at once (default 8; the embedded model defaults to its
            server slots, `LocalProvider.parallel`: 1 unless `VERITRAIL_LOCAL_PARALLEL` says
            otherwise).
        retry: the retry policy (default: `retry_policy_from_env()`).
        prices: a `PriceTable` or a JSON price file (default: built-in + `VERITRAIL_PRICES`).
        max_reasks: re-asks after an unreadable structured reply (default 3; each at a higher
            temperature, see `lm.model.reask_temperature`).
        options: provider options (see `get_provider`).
    """
    policy = retry if retry is not None else retry_policy_from_env()  # bad env: before building
    return model_for(
        get_provider(name, **options),
        cache=cache,
        concurrency=concurrency,
        retry=policy,
        prices=prices,
        max_reasks=max_reasks,
    )


def missing_key(name: str, base_url: str | None = None) -> str | None:
    """What to say when the model `name` would be called with no API key at all (None when a
    key, or a base URL that may need none, is there): the key variables each provider reads, as
    its constructor does. Said up front, so that a missing key is bad input (exit 2) instead of
    a run of retries ending in "connection failed" on every claim."""
    import os

    prefix, _, model = name.partition("/")
    if base_url or environment.get("VERITRAIL_BASE_URL") or environment.get("VERITRAIL_API_KEY"):
        return None
    if prefix == "openai":
        names: tuple[str, ...] = ("OPENAI_API_KEY",)
        # Azure and a compatible server are configured by their own variables.
        if any(os.environ.get(n) for n in ("OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT")):
            return None
    else:
        from .litellm import KEY_ENV, PROVIDERS

        if prefix not in PROVIDERS:
            return None  # local, demo, fake, ...: keyless; bedrock, vertex: their own credentials
        route = model.split("/", 1)[0] if prefix == "litellm" else prefix
        names = KEY_ENV.get(route, ())
    if not names or any(os.environ.get(n) for n in names):
        return None
    either = " or ".join(names)
    return (
        f"{name} needs an API key: set {either} (or VERITRAIL_API_KEY), or point --base-url at "
        "a compatible server"
    )


def describe_fatal(exc: BaseException, endpoint: str | None = None) -> str:
    """One line for a fatal endpoint error (`Model.fatal`, an `EndpointError`): the HTTP status,
    the endpoint (credentials removed; `endpoint` when the error names none) and the cause
    (`ProviderError.cause` when the provider gave one), redacted."""
    from ..redaction import redact, redact_url

    cause = getattr(exc, "cause", None)
    msg = redact(str(cause or exc)).strip() or type(exc).__name__
    status = getattr(exc, "status", None)
    if status is not None and f"HTTP {status}" not in msg:
        msg = f"HTTP {status}: {msg}"
    ep_raw = getattr(exc, "endpoint", None) or endpoint
    if ep_raw:
        ep = redact_url(str(ep_raw))
        if ep not in msg:
            msg += f" (endpoint {ep})"
    return msg


__all__ = [
    "DEFAULT_MODEL",
    "ModelNameError",
    "describe_fatal",
    "get_model",
    "get_provider",
    "missing_key",
    "model_for",
    "open_cache",
    "providers",
    "register_provider",
    "resolve_name",
    "retry_policy_from_env",
    "split_name",
]
